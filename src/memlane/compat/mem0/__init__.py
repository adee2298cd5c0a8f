"""mem0's ``Memory`` API over memlane: ``from memlane.compat.mem0 import Memory`` (docs/integrations/mem0.md)."""

from memlane.compat.mem0.config import Mem0Settings, read_config
from memlane.compat.mem0.memory import Memory

__all__ = ["Mem0Settings", "Memory", "read_config"]
