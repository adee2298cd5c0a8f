"""mem0's ``Memory`` and ``AsyncMemory`` APIs over memlane: ``from memlane.compat.mem0 import Memory``
(docs/integrations/mem0.md)."""

from memlane.compat.mem0.async_memory import AsyncMemory
from memlane.compat.mem0.config import Mem0Settings, read_config
from memlane.compat.mem0.memory import Memory

__all__ = ["AsyncMemory", "Mem0Settings", "Memory", "read_config"]
