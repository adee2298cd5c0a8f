"""MemlaneStore as LangGraph's BaseStore: the same operations give the same answers as LangGraph's own
InMemoryStore (run side by side), it works inside a compiled StateGraph across threads, on both engines."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory
from memlane.core.store.protocol import Store
from memlane.integrations.langgraph import MemlaneStore


@pytest.fixture
def store(store_factory: Callable[[], Store]) -> Iterator[MemlaneStore]:
    s = MemlaneStore(Memory(store_factory(), HashingEmbedder()))
    yield s
    s.close()


def fill(s: BaseStore) -> None:
    s.put(("users", "alice", "prefs"), "food", {"likes": "pizza", "level": 3, "tags": ["it"]})
    s.put(("users", "alice", "prefs"), "music", {"likes": "jazz", "level": 5, "meta": {"src": "chat"}})
    s.put(("users", "alice", "facts"), "home", {"text": "Alice lives in Ghent", "level": 1})
    s.put(("users", "bob", "prefs"), "food", {"likes": "sushi", "level": 4})
    s.put(("docs",), "readme", {"text": "memlane stores memories"})


def test_same_answers_as_langgraphs_in_memory_store(store: MemlaneStore) -> None:
    ref = InMemoryStore()
    for s in (ref, store):
        fill(s)
        s.put(("users", "alice", "prefs"), "food", {"likes": "pasta", "level": 2, "tags": ["it"]})  # overwrite
        s.delete(("users", "bob", "prefs"), "food")

    def same(call: Callable[[BaseStore], Any]) -> None:
        assert call(store) == call(ref)

    def item(s: BaseStore, ns: tuple[str, ...], key: str) -> Any:
        got = s.get(ns, key)
        return None if got is None else (got.namespace, got.key, got.value)

    def found(s: BaseStore, prefix: tuple[str, ...], **kw: Any) -> Any:
        return sorted((i.namespace, i.key, repr(i.value)) for i in s.search(prefix, **kw))

    same(lambda s: item(s, ("users", "alice", "prefs"), "food"))
    same(lambda s: item(s, ("users", "bob", "prefs"), "food"))
    same(lambda s: item(s, ("users", "nobody"), "food"))
    same(lambda s: found(s, ("users",)))
    same(lambda s: found(s, ("users", "alice"), filter={"level": {"$gte": 2}}))
    same(lambda s: found(s, ("users",), filter={"likes": "jazz", "meta": {"src": "chat"}}))
    same(lambda s: found(s, ("users",), filter={"level": {"$ne": 5}, "tags": ["it"]}))
    same(lambda s: found(s, (), filter={"text": {"$eq": "memlane stores memories"}}))
    same(lambda s: len(s.search(("users",), limit=1, offset=1)))
    # Batches: reads see the store before the batch's puts; the last put of a key wins.
    same(
        lambda s: [
            None if r is None else [getattr(x, "key", x) for x in r] if isinstance(r, list) else r.value
            for r in s.batch(
                [
                    PutOp(("b",), "k", {"v": 1}),
                    GetOp(("b",), "k"),
                    PutOp(("b",), "k", {"v": 2}),
                    SearchOp(("b",)),
                ]
            )
        ]
    )
    same(lambda s: item(s, ("b",), "k"))


def test_list_namespaces_as_langgraphs_in_memory_store(store: MemlaneStore) -> None:
    # On stores that only had puts: InMemoryStore also lists namespaces whose items were all deleted, and
    # those a get() looked into; memlane lists the namespaces that hold items (as a database-backed store).
    ref = InMemoryStore()
    fill(ref)
    fill(store)
    for kw in ({}, {"prefix": ("users",), "max_depth": 2}, {"suffix": ("prefs",)}, {"prefix": ("users", "*", "facts")}):
        assert store.list_namespaces(**kw) == ref.list_namespaces(**kw)  # type: ignore[arg-type]
    assert store.list_namespaces(limit=1, offset=1) == ref.list_namespaces(limit=1, offset=1)
    store.delete(("docs",), "readme")
    assert ("docs",) not in store.list_namespaces()


def test_overwrite_keeps_created_at_and_one_value(store: MemlaneStore) -> None:
    store.put(("a",), "k", {"v": 1})
    first = store.get(("a",), "k")
    store.put(("a",), "k", {"v": 2})
    second = store.get(("a",), "k")
    assert first is not None and second is not None and second.value == {"v": 2}
    assert second.created_at == first.created_at and second.updated_at >= first.updated_at
    assert len(store.memory.list("langgraph:a")) == 1  # the older block is gone
    assert store.search(("a",)) and len(store.search(("a",))) == 1


def test_semantic_search_and_fields(store: MemlaneStore) -> None:
    fill(store)
    store.put(("users", "alice", "facts"), "job", {"text": "Alice works as a baker", "n": 9}, index=["text"])
    hits = store.search(("users", "alice"), query="where does Alice live? Ghent", limit=2)
    assert hits[0].key == "home" and hits[0].score is not None and hits[0].score > hits[1].score  # type: ignore[operator]
    assert all(h.namespace[:2] == ("users", "alice") for h in hits)
    assert [h.key for h in store.search(("users",), query="baker works", limit=1)] == ["job"]
    assert [h.key for h in store.search(("users",), query="pizza", filter={"likes": "jazz"})] == ["music"]
    # Only the indexed field was embedded: the number 9 is not part of the text.
    assert store.memory.list("langgraph:users.alice.facts", session_id="job")[0].message == (
        "user: Alice works as a baker"
    )
    store.put(("users", "alice", "facts"), "secret", {"text": "hidden words"}, index=False)
    assert store.memory.list("langgraph:users.alice.facts", session_id="secret")[0].message == "user: secret"


def test_bad_input_is_a_clear_error(store: MemlaneStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph",), "k", {"v": 1})
    with pytest.raises(ValueError, match="JSON"):
        store.put(("a",), "k", {"v": object()})
    with pytest.raises(ValueError, match="key"):
        store.put(("a",), " padded", {"v": 1})
    with pytest.raises(NotImplementedError, match="TTL"):
        store.put(("a",), "k", {"v": 1}, ttl=5)
    with pytest.raises(ValueError, match="operator"):
        store.search(("a",), filter={"v": {"$regex": "x"}})
    assert store.get(("a",), "k") is None  # nothing half-written


class State(TypedDict):
    user: str
    message: str
    replies: Annotated[list[str], operator.add]


def remember(state: State, runtime: Runtime[None]) -> dict[str, Any]:
    assert runtime.store is not None
    text = state["message"]
    if text.startswith("remember "):
        fact = text.removeprefix("remember ")
        runtime.store.put(("memories", state["user"]), f"m{abs(hash(fact))}", {"text": fact})
    return {}


def answer(state: State, runtime: Runtime[None]) -> dict[str, Any]:
    assert runtime.store is not None
    hits = runtime.store.search(("memories", state["user"]), query=state["message"], limit=1)
    return {"replies": [hits[0].value["text"] if hits else "I know nothing yet."]}


def graph(store: BaseStore) -> Any:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=InMemorySaver(), store=store)


def test_inside_a_compiled_graph_across_threads(store: MemlaneStore) -> None:
    app = graph(store)

    def say(thread: str, user: str, message: str) -> str:
        config = {"configurable": {"thread_id": thread}}
        out = app.invoke({"user": user, "message": message, "replies": []}, config)
        return str(out["replies"][-1])

    assert say("t1", "alice", "what is my cat called?") == "I know nothing yet."
    say("t1", "alice", "remember my cat is called Miso")
    say("t2", "bob", "remember my dog is called Rex")
    # A new thread finds what another thread stored, and only its own user's memories.
    assert say("t3", "alice", "what is my cat called?") == "my cat is called Miso"
    assert say("t4", "bob", "what is my cat called?") == "my dog is called Rex"
    assert store.list_namespaces(prefix=("memories",)) == [("memories", "alice"), ("memories", "bob")]


def test_async_graph_and_abatch(store: MemlaneStore) -> None:
    app = graph(store)

    async def main() -> list[str]:
        async def say(i: int) -> str:
            user = f"user{i % 5}"
            config = {"configurable": {"thread_id": f"t{i}"}}
            await app.ainvoke({"user": user, "message": f"remember {user} code {i}", "replies": []}, config)
            return str((await store.aget(("memories", user), f"m{abs(hash(f'{user} code {i}'))}")).value["text"])  # type: ignore[union-attr]

        return await asyncio.gather(*(say(i) for i in range(20)))

    got = asyncio.run(main())
    assert got == [f"user{i % 5} code {i}" for i in range(20)]
    assert len(store.search(("memories",), limit=100)) == 20


def test_concurrent_puts_of_one_key_leave_one_value(store: MemlaneStore) -> None:
    async def main() -> None:
        await asyncio.gather(*(store.aput(("race",), "k", {"v": i}) for i in range(12)))

    asyncio.run(main())
    item = store.get(("race",), "k")
    assert item is not None and item.value["v"] in range(12)
    assert len(store.memory.list("langgraph:race")) == 1
