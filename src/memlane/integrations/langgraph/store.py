"""A LangGraph ``BaseStore`` over memlane: long-term memory for graphs, searched by meaning.

How items map onto memlane (memlane stores blocks of conversation, not key/value items):

* a namespace ``("memories", "alice")`` is the memlane user ``langgraph:memories.alice`` (``prefix`` plus the
  labels joined by ``.``, which LangGraph forbids inside a label), so one namespace is one isolated user;
* an item is one block in the conversation ``langgraph-store`` whose session id is the item's key;
* the block's text, embedded and indexed for keywords, is the indexed fields of the value (the whole value as
  JSON by default; ``index=[...]`` or ``fields`` pick fields; ``index=False`` indexes the key only);
* the value itself (any JSON object) and its creation time ride in the block's annotations.

Blocks are written once, so ``put`` on an existing key writes a new block, then deletes every block of that
key but the newest (block ids are time-ordered): a reader in between sees the newest, and concurrent puts of
one key leave exactly one value, the newest. Searches with a query rank by cosine similarity (memlane's
``vector`` mode, whose scores can be compared across namespaces) and report it as ``score``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    validate_op_namespace,
)

from memlane.core.errors import NotFoundError, ValidationError
from memlane.core.memory import AddRequest, Memory
from memlane.core.model import MemoryBlock
from memlane.core.names import check_name
from memlane.core.retrieval import MAX_K

CONVERSATION = "langgraph-store"
DEFAULT_PREFIX = "langgraph:"
A_VALUE, A_CREATED = "langgraph.value", "langgraph.created_at"
PAGE = 1000


class MemlaneStore(BaseStore):
    """LangGraph's ``BaseStore`` on a memlane :class:`~memlane.core.memory.Memory`.

    ``MemlaneStore.open("memlane.db")`` opens a store as :meth:`Memory.open` does; ``MemlaneStore(memory)``
    wraps one you opened. ``fields`` are the value's fields embedded by default (LangGraph's path syntax;
    ``"$"``, the default, is the whole value). ``prefix`` starts the memlane user names of namespaces.
    TTLs are not supported (``supports_ttl`` is False)."""

    supports_ttl = False

    def __init__(self, memory: Memory, *, fields: Sequence[str] = ("$",), prefix: str = DEFAULT_PREFIX) -> None:
        self.memory = memory
        self.fields = list(fields)
        self.prefix = prefix

    @classmethod
    def open(
        cls, path: str | Path, *, fields: Sequence[str] = ("$",), prefix: str = DEFAULT_PREFIX, **options: Any
    ) -> MemlaneStore:
        """Open a memlane store (``options`` as :meth:`Memory.open` takes them) as a LangGraph store."""
        return cls(Memory.open(path, **options), fields=fields, prefix=prefix)

    def close(self) -> None:
        self.memory.close()

    # -- BaseStore ---------------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order of kind as LangGraph's reference store does: reads see the store as it
        was before the batch; then its puts are applied (the last put of a key wins)."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            elif isinstance(op, PutOp):
                if op.ttl is not None:
                    raise NotImplementedError("TTL is not supported by MemlaneStore; set ttl=None")
                puts[(op.namespace, op.key)] = op
                results.append(None)
            else:
                raise ValidationError(f"unknown store operation {type(op).__name__}", where="ops")
        if puts:
            self._apply_puts(list(puts.values()))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (asyncio's default pool), so the event loop never waits on the
        embedder or the store."""
        return await asyncio.to_thread(self.batch, list(ops))

    # -- operations --------------------------------------------------------------------------------------

    def _user(self, namespace: tuple[str, ...]) -> str:
        return self.prefix + ".".join(namespace)

    def _namespace(self, user: str) -> tuple[str, ...] | None:
        return tuple(user[len(self.prefix) :].split(".")) if user.startswith(self.prefix) else None

    def _blocks(self, namespace: tuple[str, ...], key: str) -> list[MemoryBlock]:
        """The blocks of one key, newest first (more than one only while a put is replacing the value)."""
        blocks = self.memory.list(self._user(namespace), conversation_id=CONVERSATION, session_id=key, limit=100)
        return sorted(blocks, key=lambda b: b.id, reverse=True)

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        if not namespace:
            return None
        blocks = self._blocks(namespace, key)
        return _item(namespace, blocks[0]) if blocks else None

    def _apply_puts(self, puts: list[PutOp]) -> None:
        requests: list[AddRequest] = []
        written: list[tuple[tuple[str, ...], str]] = []
        for op in puts:
            check_name(op.key, "key")
            old = self._blocks(op.namespace, op.key)
            if op.value is None:
                self._drop(self._user(op.namespace), old)
                continue
            value = _json_object(op.value)
            now = datetime.now().astimezone().isoformat()
            created = old[0].annotations.get(A_CREATED, now) if old else now
            annotations = {A_VALUE: json.dumps(value), A_CREATED: created}
            message = [{"role": "user", "content": self._text(op, value)}]
            requests.append(
                AddRequest(self._user(op.namespace), message, CONVERSATION, op.key, None, "single", annotations)
            )
            written.append((op.namespace, op.key))
        self.memory.add_many(requests)
        for namespace, key in written:
            # Listed after our write: every block of the key but the newest goes, ours too if a concurrent put
            # wrote a newer one. Whichever put lists last sees all the blocks, so one block is left: the newest.
            self._drop(self._user(namespace), self._blocks(namespace, key)[1:])

    def _drop(self, user: str, blocks: Sequence[MemoryBlock]) -> None:
        for block in blocks:
            with contextlib.suppress(NotFoundError):  # a concurrent put or delete took it first
                self.memory.delete(user, block.id)

    def _text(self, op: PutOp, value: dict[str, Any]) -> str:
        if op.index is False:
            return op.key
        fields = self.fields if op.index is None else list(op.index)
        parts: list[str] = []
        for path in fields:
            if path == "$":
                parts.append(json.dumps(value, ensure_ascii=False))
            else:
                parts.extend(get_text_at_path(value, path))
        text = "\n".join(p for p in parts if p.strip())
        return text or op.key

    def _namespaces(self, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        """Every namespace holding items, under ``prefix``."""
        found = []
        for info in self.memory.users():
            ns = self._namespace(info.name)
            if ns is not None and info.blocks and ns[: len(prefix)] == prefix:
                found.append(ns)
        return sorted(found)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise ValidationError("limit and offset must not be negative", where="search")
        _check_filter(op.filter)
        wanted = op.offset + op.limit
        if wanted == 0:
            return []
        items: list[SearchItem] = []
        if op.query:
            fetch = min(MAX_K, wanted if not op.filter else 4 * wanted)
            for ns in self._namespaces(op.namespace_prefix):
                for hit in self.memory.search(self._user(ns), op.query, fetch, mode="vector", distinct=False):
                    block = hit.block
                    if block.conversation_id == CONVERSATION and _matches(_value(block), op.filter):
                        items.append(_item(ns, block, hit.score))
            items.sort(key=lambda it: -(it.score or 0.0))
            items = _newest_per_key(items)
        else:
            for ns in self._namespaces(op.namespace_prefix):
                for block in _newest_blocks(self._all_blocks(ns)):
                    if _matches(_value(block), op.filter):
                        items.append(_item(ns, block))
                if len(items) >= wanted:
                    break
        return items[op.offset : wanted]

    def _all_blocks(self, namespace: tuple[str, ...]) -> Iterator[MemoryBlock]:
        user, offset = self._user(namespace), 0
        while True:
            page = self.memory.list(user, conversation_id=CONVERSATION, limit=PAGE, offset=offset)
            yield from page
            if len(page) < PAGE:
                return
            offset += PAGE

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = [ns for ns in self._namespaces(()) if all(_does_match(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            namespaces = sorted({ns[: op.max_depth] for ns in namespaces})
        return namespaces[op.offset : op.offset + op.limit]


# -- values ------------------------------------------------------------------------------------------------


def _json_object(value: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(f"an item's value must be a dict, not {type(value).__name__}", where="value")
    try:
        decoded = json.loads(json.dumps(dict(value)))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"an item's value must be JSON-serialisable: {exc}", where="value") from None
    return dict(decoded)


def _value(block: MemoryBlock) -> dict[str, Any]:
    return dict(json.loads(block.annotations.get(A_VALUE, "{}")))


def _item(namespace: tuple[str, ...], block: MemoryBlock, score: float | None = None) -> SearchItem:
    created = datetime.fromisoformat(block.annotations.get(A_CREATED, block.ingest_time.isoformat()))
    return SearchItem(
        namespace=namespace,
        key=block.session_id,
        value=_value(block),
        created_at=created,
        updated_at=block.ingest_time,
        score=score,
    )


def _newest_blocks(blocks: Iterable[MemoryBlock]) -> list[MemoryBlock]:
    """One block per key, the newest, in the order the keys were first met."""
    newest: dict[str, MemoryBlock] = {}
    for block in blocks:
        if block.session_id not in newest or block.id > newest[block.session_id].id:
            newest[block.session_id] = block
    return list(newest.values())


def _newest_per_key(items: list[SearchItem]) -> list[SearchItem]:
    seen: set[tuple[tuple[str, ...], str]] = set()
    kept = []
    for item in items:
        if (item.namespace, item.key) not in seen:
            seen.add((item.namespace, item.key))
            kept.append(item)
    return kept


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    if condition.match_type not in ("prefix", "suffix"):
        raise ValidationError(f"unknown match type {condition.match_type!r}", where="match_conditions")
    return all(p == "*" or n == p for n, p in pairs)


def _check_filter(conditions: Mapping[str, Any] | None) -> None:
    """Refuse an unknown operator before any item is looked at (an empty namespace would hide it)."""
    for want in (conditions or {}).values():
        if isinstance(want, Mapping):
            for op in want:
                if str(op).startswith("$"):
                    _operator(0, str(op), 0)
            _check_filter({k: v for k, v in want.items() if not str(k).startswith("$")})


def _matches(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    return all(_compare(value.get(k), want) for k, want in (conditions or {}).items())


def _compare(actual: Any, want: Any) -> bool:
    """LangGraph's filter semantics: equality, nested objects, and the $eq/$ne/$gt/$gte/$lt/$lte operators."""
    if isinstance(want, Mapping):
        if any(str(k).startswith("$") for k in want):
            return all(_operator(actual, str(op), arg) for op, arg in want.items())
        return isinstance(actual, Mapping) and all(_compare(actual.get(k), v) for k, v in want.items())
    if isinstance(want, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(want)
            and all(_compare(a, w) for a, w in zip(actual, want, strict=True))
        )
    return bool(actual == want)


def _operator(actual: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(actual == arg)
    if op == "$ne":
        return bool(actual != arg)
    if op not in ("$gt", "$gte", "$lt", "$lte"):
        raise ValidationError(f"unknown filter operator {op!r} (use $eq, $ne, $gt, $gte, $lt, $lte)", where="filter")
    if not isinstance(actual, int | float) or isinstance(actual, bool):
        return False
    a, b = float(actual), float(arg)
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
