"""Memory core: model, ingest, embedders, stores, retrieval, LLM client, the Memory facade.

The names below are memlane's public Python API; the modules under ``memlane.core`` are its parts and may
move. The values and errors load with this package (they import nothing else); ``Memory``, ``AsyncMemory``
and the protocols of what a memory is built from (``Store``, ``Embedder``, ``LLM``) load when first used,
so that importing one small part of the core does not open the whole of it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from memlane.core.errors import (
    AlreadyExistsError,
    ConfigError,
    ConflictError,
    EmbedderError,
    LLMDeadlineError,
    LLMError,
    LLMResponseError,
    LLMTransportError,
    MemlaneError,
    NotFoundError,
    PromptArchivedError,
    QueueFullError,
    SessionEndedError,
    StoreError,
    StoreNotFoundError,
    UserDeletedError,
    ValidationError,
)
from memlane.core.model import (
    AddResult,
    BlockKind,
    BlockStatus,
    DeletedUser,
    Exchange,
    ExtractionStatus,
    ExtractMode,
    Filters,
    Hit,
    MemoryBlock,
    Message,
    Page,
    PerspectiveMode,
    Prompt,
    PromptVersion,
    Rejected,
    SearchMode,
    Session,
    Turn,
    UserInfo,
)

if TYPE_CHECKING:
    from memlane.core.async_memory import AsyncMemory
    from memlane.core.embedding.protocol import Embedder
    from memlane.core.llm.protocol import LLM
    from memlane.core.memory import Memory
    from memlane.core.store.protocol import Store

# Where each name loaded on first use lives.
_LAZY = {
    "AsyncMemory": "memlane.core.async_memory",
    "Embedder": "memlane.core.embedding.protocol",
    "LLM": "memlane.core.llm.protocol",
    "Memory": "memlane.core.memory",
    "Store": "memlane.core.store.protocol",
}

__all__ = [
    "LLM",
    "AddResult",
    "AlreadyExistsError",
    "AsyncMemory",
    "BlockKind",
    "BlockStatus",
    "ConfigError",
    "ConflictError",
    "DeletedUser",
    "Embedder",
    "EmbedderError",
    "Exchange",
    "ExtractMode",
    "ExtractionStatus",
    "Filters",
    "Hit",
    "LLMDeadlineError",
    "LLMError",
    "LLMResponseError",
    "LLMTransportError",
    "MemlaneError",
    "Memory",
    "MemoryBlock",
    "Message",
    "NotFoundError",
    "Page",
    "PerspectiveMode",
    "Prompt",
    "PromptArchivedError",
    "PromptVersion",
    "QueueFullError",
    "Rejected",
    "SearchMode",
    "Session",
    "SessionEndedError",
    "Store",
    "StoreError",
    "StoreNotFoundError",
    "Turn",
    "UserDeletedError",
    "UserInfo",
    "ValidationError",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memlane.core' has no attribute {name!r}")
    return getattr(import_module(module), name)
