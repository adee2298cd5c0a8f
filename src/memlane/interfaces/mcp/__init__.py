"""The MCP server (official ``mcp`` SDK): add_memory, search_memory, list_memories, delete_memory."""

from memlane.interfaces.mcp.server import ApiKeyVerifier, build_server

__all__ = ["ApiKeyVerifier", "build_server"]
