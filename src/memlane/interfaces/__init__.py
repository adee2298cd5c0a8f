"""Interfaces: CLI, HTTP service, MCP server. Thin adapters over the core."""
