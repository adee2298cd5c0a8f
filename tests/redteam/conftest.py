"""The red-team suite: each edge found by attacking the service, the MCP server and the CLI (bad times, bad
bytes, look-alike names, a store that cannot write, a weak admin key, leaking error bodies, DNS rebinding,
slow clients) reproduced against the real code paths. It runs in `make test`, in bounded time.

The HTTP helpers live in tests/http, the raw-file scans in tests/core/store; they are imported from there."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "http"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "core" / "store"))
