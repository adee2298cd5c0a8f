"""memlane as LangGraph's long-term memory store (needs ``pip install 'memlane[langgraph]'``):
``from memlane.integrations.langgraph import MemlaneStore`` (docs/integrations/langgraph.md)."""

from memlane.integrations.langgraph.store import MemlaneStore

__all__ = ["MemlaneStore"]
