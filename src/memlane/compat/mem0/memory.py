"""mem0's ``Memory`` over memlane: the calls agents make, with mem0's names, arguments and return shapes.

An agent written for mem0 changes its import (``from memlane.compat.mem0 import Memory``) and keeps its code.
What differs, and why, is in docs/integrations/mem0.md. In short: memories live in memlane users (the
``user_id``; ``agent:<id>`` or ``run:<id>`` when a memory has no user), ``infer=True`` stores the exchanges
and lets memlane's extraction add facts (when an LLM is configured) instead of rewriting memories, scores are
memlane's hybrid scores, and ``update`` replaces a memory by a new one with a new id.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import json
import warnings
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from memlane.compat.mem0.config import Mem0Settings, read_config
from memlane.core.errors import NotFoundError, ValidationError
from memlane.core.llm.registry import make_llm
from memlane.core.memory import AddRequest
from memlane.core.memory import Memory as CoreMemory
from memlane.core.model import ExtractMode, MemoryBlock
from memlane.core.names import check_name
from memlane.core.retrieval import MAX_K
from memlane.core.timefmt import now_utc

# mem0 2.x defaults.
DEFAULT_TOP_K = 20
DEFAULT_LIST_LIMIT = 100
ENTITY_KEYS = ("user_id", "agent_id", "run_id")
# Annotation keys this facade keeps on memlane blocks.
A_USER, A_AGENT, A_RUN, A_ROLE = "mem0.user_id", "mem0.agent_id", "mem0.run_id", "mem0.role"
A_TEXT, A_METADATA, A_CREATED, A_UPDATED, A_HISTORY = (
    "mem0.text",
    "mem0.metadata",
    "mem0.created_at",
    "mem0.updated_at",
    "mem0.history",
)
PAGE = 1000

Item = dict[str, Any]
Scope = dict[str, str]


class Memory:
    """mem0's ``Memory`` API on a memlane store.

    ``Memory()`` opens ``memlane.db`` in the working folder with memlane's default embedder;
    ``Memory.from_config({...})`` maps a mem0 configuration (see :mod:`memlane.compat.mem0.config`);
    ``Memory(memory=...)`` wraps a :class:`memlane.core.memory.Memory` you opened yourself (its ``llm``, if
    any, runs extraction for ``infer=True``)."""

    def __init__(self, config: Mapping[str, Any] | None = None, *, memory: CoreMemory | None = None) -> None:
        self.settings: Mem0Settings = read_config(config)
        if self.settings.ignored:
            warnings.warn(
                "memlane's mem0 facade ignores these configuration keys: " + ", ".join(self.settings.ignored),
                UserWarning,
                stacklevel=2,
            )
        if memory is None:
            memory = CoreMemory.open(self.settings.store, embedder=self.settings.embedder)
            if self.settings.llm is not None:
                memory.llm = make_llm("openai", settings=self.settings.llm)
        self.memory = memory

    @classmethod
    def from_config(cls, config_dict: Mapping[str, Any]) -> Memory:
        """Like mem0's: a configuration dict (``vector_store``, ``embedder``, ``llm``, ...)."""
        return cls(config_dict)

    def close(self) -> None:
        self.memory.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # -- writes ------------------------------------------------------------------------------------------

    def add(
        self,
        messages: str | Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = True,
        memory_type: str | None = None,
        prompt: str | None = None,
    ) -> dict[str, builtins.list[Item]]:
        """Store messages for a user (or agent, or run): ``{"results": [{"id", "memory", "event": "ADD"}]}``.

        ``infer=False`` stores each user or assistant message as its own memory, as mem0 does. ``infer=True``
        stores each exchange (a message and its reply) as one memory and, when an LLM is configured, runs
        memlane's extraction on it before returning (its summary becomes the memory's text, its facts extra
        search keys); without an LLM the exchange is stored as it is."""
        if memory_type is not None:
            raise ValidationError("memlane has no procedural memories; leave memory_type unset", where="memory_type")
        if prompt is not None:
            warnings.warn("memlane's extraction uses its own prompt; prompt= is ignored", UserWarning, stacklevel=2)
        scope = _scope(user_id, agent_id, run_id, where="add")
        user = _namespace(scope)
        msgs = _messages(messages)
        if msgs and all(m.get("role") == "system" for m in msgs):
            return {"results": []}  # as mem0: system messages are not memories
        base = _annotations(scope, metadata)
        conversation = scope.get("run_id", "default")
        if infer:
            requests = [AddRequest(user, msgs, conversation, perspective="single", annotations=base)]
        else:
            requests = [
                AddRequest(
                    user,
                    [m],
                    conversation,
                    perspective="single",
                    annotations={**base, A_ROLE: str(m["role"]), A_TEXT: str(m["content"])},
                )
                for m in msgs
                if m.get("role") != "system"
            ]
        if not requests:
            return {"results": []}
        extract: ExtractMode = "sync" if infer and self.memory.llm is not None else "off"
        added = self.memory.add_many(requests, extract=extract)
        ids = [(r.user, bid) for r in added for bid in r.block_ids]
        blocks = [self.memory.get(u, bid) for u, bid in ids]
        return {"results": [{"id": _memory_id(b), "memory": _text(b), "event": "ADD", **_role(b)} for b in blocks]}

    def update(
        self,
        memory_id: str,
        text: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        data: str | None = None,
    ) -> dict[str, str]:
        """Replace a memory's text and/or merge into its metadata. memlane blocks are written once, so the
        memory is stored anew (with its time, scope and history) and the old one deleted: the result's
        ``id`` is the memory's new id."""
        text = data if text is None else text
        if text is None and metadata is None:
            raise ValidationError("give text or metadata to update", where="update")
        user, block = self._block(memory_id)
        ann = dict(block.annotations)
        old_text = _text(block)
        if metadata is not None:
            ann[A_METADATA] = json.dumps({**_metadata(block), **_clean_metadata(metadata)}, sort_keys=True)
        history = json.loads(ann.get(A_HISTORY, "[]"))
        now = now_utc().isoformat()
        history.append({"event": "UPDATE", "old_memory": old_text, "new_memory": text or old_text, "at": now})
        ann.update({A_HISTORY: json.dumps(history), A_UPDATED: now, A_CREATED: _created(block)})
        role = ann.get(A_ROLE, "user")
        content = old_text if text is None else text
        ann[A_TEXT] = content
        added = self.memory.add(
            user,
            [{"role": role, "content": content}],
            conversation_id=block.conversation_id,
            session_id=block.session_id,
            time=block.event_time,
            perspective="single",
            annotations=ann,
        )
        self.memory.delete(user, block.id)
        return {"message": "Memory updated successfully!", "id": _compose(user, added.block_ids[0])}

    def delete(self, memory_id: str) -> dict[str, str]:
        user, block = self._block(memory_id)
        self.memory.delete(user, block.id)
        return {"message": "Memory deleted successfully!"}

    def delete_all(
        self, user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None
    ) -> dict[str, str]:
        """Delete every memory of the scope. With ``user_id`` alone this deletes the memlane user (final, as
        :meth:`memlane.core.memory.Memory.delete_user`)."""
        scope = _scope(user_id, agent_id, run_id, where="delete_all")
        user = _namespace(scope)
        if len(scope) == 1:
            if user in {u.name for u in self.memory.users()}:
                self.memory.delete_user(user)
            return {"message": "Memories deleted successfully!"}
        for block in builtins.list(self._scoped(user, scope)):
            self.memory.delete(user, block.id)
        return {"message": "Memories deleted successfully!"}

    def reset(self) -> None:
        """Delete every user of the store (all of memlane's, not only those written through this facade)."""
        for user in self.memory.users():
            self.memory.delete_user(user.name)

    # -- reads -------------------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        top_k: int | None = None,
        limit: int | None = None,
        threshold: float | None = None,
        rerank: bool = False,
    ) -> dict[str, builtins.list[Item]]:
        """The ``top_k`` (or mem0 1.x's ``limit``) best memories: ``{"results": [{"id", "memory", "score",
        "metadata", "created_at", "user_id", ...}]}``. The scope comes from ``filters={"user_id": ...}`` (mem0
        2.x) or the ``user_id=``/``agent_id=``/``run_id=`` keywords (1.x); other keys of ``filters`` must equal
        the memory's metadata. ``threshold`` drops hits scoring below it (memlane's hybrid scores). A memory
        that newer ones among the results' candidates restate says so in ``metadata["superseded_by"]`` (their
        ids, newest first): it may be outdated."""
        if rerank:
            warnings.warn("memlane's hybrid search has no separate reranker; rerank is ignored", stacklevel=2)
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("Invalid query: must be a non-empty string", where="query")
        scope, meta_filters = _filters(filters, user_id, agent_id, run_id, where="search")
        k = _limit(top_k, limit, DEFAULT_TOP_K)
        if k == 0:
            return {"results": []}
        user = _namespace(scope)
        extra = {key: v for key, v in scope.items() if key != _primary(scope)}
        fetch = k if not (extra or meta_filters) else min(MAX_K, 4 * k)
        hits = self.memory.search(user, query, fetch) if self._exists(user) else []
        results: builtins.list[Item] = []
        for hit in hits:
            if not _matches(hit.block, extra, meta_filters):
                continue
            if threshold is not None and hit.score < threshold:
                continue
            item: Item = {**_item(hit.block), "score": hit.score}
            if hit.superseded_by:  # newer memories restate this one: a hint, as metadata (mem0 has no field)
                newer = [_compose(user, block_id) for block_id in hit.superseded_by]
                item["metadata"] = {**(item["metadata"] or {}), "superseded_by": newer}
            results.append(item)
            if len(results) == k:
                break
        return {"results": results}

    def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        top_k: int | None = None,
        limit: int | None = None,
    ) -> dict[str, builtins.list[Item]]:
        """The scope's memories, oldest first: ``{"results": [...]}`` (at most ``top_k``/``limit``, 100 by
        default). An exchange stored from several perspectives (memlane's ``dual`` or ``speakers``) is one
        memory, its first perspective, as in :meth:`search`."""
        scope, meta_filters = _filters(filters, user_id, agent_id, run_id, where="get_all")
        k = _limit(top_k, limit, DEFAULT_LIST_LIMIT)
        user = _namespace(scope)
        results: builtins.list[Item] = []
        seen: set[tuple[object, ...]] = set()
        for block in self._scoped(user, scope):
            if len(results) >= k:
                break
            if block.exchange_key in seen or not _matches(block, {}, meta_filters):
                continue
            seen.add(block.exchange_key)
            results.append(_item(block))
        return {"results": results}

    def get(self, memory_id: str) -> Item | None:
        """One memory, or None if there is none with this id."""
        try:
            _, block = self._block(memory_id)
        except ValueError:
            return None
        return _item(block)

    def history(self, memory_id: str) -> builtins.list[Item]:
        """The memory's ADD and UPDATE events, oldest first ([] for an unknown or deleted memory)."""
        try:
            _, block = self._block(memory_id)
        except ValueError:
            return []
        mid = _memory_id(block)
        role = block.annotations.get(A_ROLE)
        events = json.loads(block.annotations.get(A_HISTORY, "[]"))
        first_text = events[0]["old_memory"] if events else _text(block)
        rows: builtins.list[Item] = [
            {"event": "ADD", "old_memory": None, "new_memory": first_text, "created_at": _created(block)}
        ]
        rows += [
            {"event": e["event"], "old_memory": e["old_memory"], "new_memory": e["new_memory"], "created_at": e["at"]}
            for e in events
        ]
        return [
            {"id": i + 1, "memory_id": mid, **row, "updated_at": None, "is_deleted": 0, "actor_id": None, "role": role}
            for i, row in enumerate(rows)
        ]

    # -- plumbing ----------------------------------------------------------------------------------------

    def _block(self, memory_id: str) -> tuple[str, MemoryBlock]:
        user, block_id = _decompose(memory_id)
        try:
            return user, self.memory.get(user, block_id)
        except (NotFoundError, ValidationError):
            raise ValidationError(f"Memory with id {memory_id} not found", where="memory_id") from None

    def _exists(self, user: str) -> bool:
        return bool(self.memory.list(user, limit=1))

    def _scoped(self, user: str, scope: Scope) -> Iterator[MemoryBlock]:
        """The namespace's blocks of the scope, oldest first, read a page at a time."""
        extra = {k: v for k, v in scope.items() if k != _primary(scope)}
        conversation = scope.get("run_id")
        offset = 0
        while True:
            page = self.memory.list(user, conversation_id=conversation, limit=PAGE, offset=offset)
            yield from (b for b in page if _matches(b, extra, {}))
            if len(page) < PAGE:
                return
            offset += PAGE


# -- scopes ------------------------------------------------------------------------------------------------


def _scope(user_id: Any, agent_id: Any, run_id: Any, *, where: str) -> Scope:
    scope: Scope = {}
    for key, value in zip(ENTITY_KEYS, (user_id, agent_id, run_id), strict=True):
        if value is None:
            continue
        text = str(value).strip()  # mem0 coerces ids to str and trims them
        if not text or any(c.isspace() for c in text):
            raise ValidationError(f"Invalid {key}: must be non-empty and without whitespace", where=key)
        scope[key] = check_name(text, key)
    if not scope:
        raise ValidationError(
            f"{where}: at least one of 'user_id', 'agent_id' or 'run_id' must be given", where="filters"
        )
    return scope


def _filters(
    filters: Mapping[str, Any] | None, user_id: Any, agent_id: Any, run_id: Any, *, where: str
) -> tuple[Scope, dict[str, Any]]:
    given = dict(filters or {})
    if not isinstance(filters, Mapping | None):
        raise ValidationError("must be a dict", where="filters")
    ids = {k: given.pop(k, None) for k in ENTITY_KEYS}
    for key, value in zip(ENTITY_KEYS, (user_id, agent_id, run_id), strict=True):
        if value is not None:
            if ids[key] is not None and str(ids[key]).strip() != str(value).strip():
                raise ValidationError(f"{key} given twice with different values", where=key)
            ids[key] = value
    for key, value in given.items():
        if isinstance(value, Mapping) or key in ("AND", "OR", "NOT"):
            raise ValidationError(
                f"memlane's mem0 facade filters metadata by equality only ({key!r} has an operator)",
                where=f"filters.{key}",
            )
    return _scope(ids["user_id"], ids["agent_id"], ids["run_id"], where=where), given


def _primary(scope: Scope) -> str:
    return next(k for k in ENTITY_KEYS if k in scope)


def _namespace(scope: Scope) -> str:
    """The memlane user of a scope: the user_id; for a memory without one, ``agent:<id>`` or ``run:<id>``."""
    if "user_id" in scope:
        return scope["user_id"]
    if "agent_id" in scope:
        return f"agent:{scope['agent_id']}"
    return f"run:{scope['run_id']}"


def _matches(block: MemoryBlock, scope: Mapping[str, str], meta: Mapping[str, Any]) -> bool:
    ann = block.annotations
    if any(ann.get(f"mem0.{key}") != value for key, value in scope.items()):
        return False
    stored = _metadata(block)
    return all(key in stored and stored[key] == value for key, value in meta.items())


def _limit(top_k: int | None, limit: int | None, default: int) -> int:
    if top_k is not None and limit is not None and top_k != limit:
        raise ValidationError("give top_k or limit, not both", where="top_k")
    k = top_k if top_k is not None else limit if limit is not None else default
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_K:
        raise ValidationError(f"must be an integer from 0 to {MAX_K}, not {k!r}", where="top_k")
    return k


# -- messages and metadata ---------------------------------------------------------------------------------


def _messages(messages: Any) -> builtins.list[dict[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, Mapping):
        return [dict(messages)]
    if isinstance(messages, Sequence) and all(isinstance(m, Mapping) for m in messages):
        return [dict(m) for m in messages]
    raise ValidationError("messages must be a str, a dict or a list of dicts", where="messages")


def _clean_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(metadata, Mapping):
        raise ValidationError("must be a dict", where="metadata")
    # As mem0: the scope comes from the id arguments, never from metadata.
    clean = {str(k): v for k, v in metadata.items() if k not in (*ENTITY_KEYS, "actor_id")}
    try:
        json.dumps(clean)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"must be JSON-serialisable: {exc}", where="metadata") from None
    return clean


def _annotations(scope: Scope, metadata: Mapping[str, Any] | None) -> dict[str, str]:
    ann = {f"mem0.{key}": value for key, value in scope.items()}
    if metadata:
        ann[A_METADATA] = json.dumps(_clean_metadata(metadata), sort_keys=True)
    return ann


def _metadata(block: MemoryBlock) -> dict[str, Any]:
    raw = block.annotations.get(A_METADATA)
    value = json.loads(raw) if raw else {}
    return value if isinstance(value, dict) else {}


def _text(block: MemoryBlock) -> str:
    """What mem0 calls the memory: the message itself, or for an exchange its summary once extracted."""
    return block.annotations.get(A_TEXT) or block.summary or block.message


def _created(block: MemoryBlock) -> str:
    return block.annotations.get(A_CREATED) or block.ingest_time.isoformat()


def _role(block: MemoryBlock) -> dict[str, str]:
    role = block.annotations.get(A_ROLE)
    return {"role": role} if role else {}


def _item(block: MemoryBlock) -> Item:
    ann = block.annotations
    item: Item = {
        "id": _memory_id(block),
        "memory": _text(block),
        "hash": block.content_hash,
        "metadata": _metadata(block) or None,
        "created_at": _created(block),
        "updated_at": ann.get(A_UPDATED),
    }
    for key in ENTITY_KEYS:
        if f"mem0.{key}" in ann:
            item[key] = ann[f"mem0.{key}"]
    return {**item, **_role(block)}


# -- ids ---------------------------------------------------------------------------------------------------


def _compose(user: str, block_id: str) -> str:
    """A memory id names its block and its memlane user, so that ``get(memory_id)`` finds it in one read."""
    tag = base64.urlsafe_b64encode(user.encode("utf-8")).decode("ascii").rstrip("=")
    return f"{block_id}-{tag}"


def _memory_id(block: MemoryBlock) -> str:
    return _compose(block.user, block.id)


def _decompose(memory_id: str) -> tuple[str, str]:
    if not isinstance(memory_id, str) or "-" not in memory_id:
        raise ValidationError(f"Memory with id {memory_id} not found", where="memory_id")
    block_id, tag = memory_id.split("-", 1)
    try:
        user = base64.urlsafe_b64decode(tag + "=" * (-len(tag) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ValidationError(f"Memory with id {memory_id} not found", where="memory_id") from None
    return user, block_id
