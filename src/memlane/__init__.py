"""memlane: persistent per-user memory for LLM agents.

The public Python API lives in :mod:`memlane.core`; the most used names are re-exported here.
"""

from memlane.core.errors import MemlaneError

__all__ = ["MemlaneError"]
__version__ = "0.1.0"
