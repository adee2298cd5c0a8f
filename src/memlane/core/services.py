"""How :class:`memlane.core.memory.Memory` is put together: from services, not mixins.

Each service is a small class over the store that does one part of the work (``Ingest``: the add path;
``Eraser``: every delete and the LLM calls it takes along; ``Extraction``: the queue's runs; ``Users``,
``Sessions``, ``Blocks``: the memory model; ``Retention``: policies and sweeps). ``Memory`` builds one of
each and exposes their public methods as its own through :class:`Via`, so a method is written once, where
its work is, with its signature and docstring; :class:`Settings` is what the services share and what a
caller may change on a live ``Memory`` (``memory.llm = ...``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from memlane.core.embedding.protocol import CachedEmbedder
from memlane.core.extraction.extractor import ExtractionPrompt
from memlane.core.jobs import JobQueue
from memlane.core.llm.protocol import LLM
from memlane.core.store.protocol import Store

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(slots=True)
class Settings:
    """What a memory's services share: the LLM that extracts (None: none), its prompt, the attempts an
    extraction job is allowed, and the server's default TTL of blocks (0: never)."""

    llm: LLM | None
    prompt: ExtractionPrompt
    max_attempts: int
    default_ttl_s: int


@dataclass(eq=False)
class BlockService:
    """What the services that write blocks and run their extraction (``Ingest``, ``Extraction``) are built
    on: the store, its job queue, the embedder (with the memory's cache) and the shared :class:`Settings`."""

    store: Store
    queue: JobQueue
    embedder: CachedEmbedder
    settings: Settings


class Via(Generic[P, R]):
    """A method of the facade that is a method of one of its services: ``create_user = Via("users",
    Users.create)`` makes ``memory.create_user`` the bound ``memory.users.create``, typed as it is and
    documented by its docstring. On the class it reads as the service's function (``help(Memory)``)."""

    def __init__(self, service: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self.service = service
        self.method = method
        # Name, docstring and (through __wrapped__) signature of the service's function, as a def would have.
        functools.update_wrapper(self, method)

    def __call__(self, owner: object, /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Called from the class, as a function defined there would be: ``Memory.create_user(memory, ...)``."""
        bound: Callable[P, R] = self.__get__(owner, type(owner))
        return bound(*args, **kwargs)

    @overload
    def __get__(self, obj: None, owner: type) -> Callable[Concatenate[Any, P], R]: ...

    @overload
    def __get__(self, obj: object, owner: type) -> Callable[P, R]: ...

    def __get__(self, obj: object, owner: type) -> Callable[..., R]:
        if obj is None:
            return self.method
        bound: Callable[P, R] = getattr(getattr(obj, self.service), self.method.__name__)
        return bound
