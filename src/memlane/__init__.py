"""memlane: persistent per-user memory for LLM agents.

The public Python API lives in :mod:`memlane.core`; the most used names are re-exported here
(``Memory``, ``AsyncMemory``), loaded when first used so that ``import memlane`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memlane.core.errors import MemlaneError

if TYPE_CHECKING:
    from memlane.core.async_memory import AsyncMemory
    from memlane.core.memory import Memory

__all__ = ["AsyncMemory", "MemlaneError", "Memory"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "Memory":
        from memlane.core.memory import Memory

        return Memory
    if name == "AsyncMemory":
        from memlane.core.async_memory import AsyncMemory

        return AsyncMemory
    raise AttributeError(f"module 'memlane' has no attribute {name!r}")
