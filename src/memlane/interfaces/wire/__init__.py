"""What the interfaces share, and nothing else: the JSON shapes of blocks and hits, the request and
response bodies, the error codes of core errors, and the guards every network server puts in front of its
app (request ids, the ``Host`` allowlist, read deadlines).

The CLI, the HTTP service and the MCP server never import one another (an import-linter contract in
``pyproject.toml``); what two of them need lives here and depends on the core only.
"""
