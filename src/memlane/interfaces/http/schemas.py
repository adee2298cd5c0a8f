"""The HTTP API's request and response bodies live in :mod:`memlane.interfaces.wire.schemas` (the MCP server
shares them); this name is kept so that existing imports keep working."""

from memlane.interfaces.wire.schemas import *  # noqa: F403
