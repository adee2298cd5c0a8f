"""Adapters that let agent frameworks use memlane: :mod:`memlane.integrations.langgraph`."""
