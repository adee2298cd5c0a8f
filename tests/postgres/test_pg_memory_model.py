"""The memory model on the PostgreSQL store, on one server and on Citus, at the store's level: updates leave
nothing of the old text findable (with the ANN index on), expired blocks vanish from every read at once,
filters are exact in every candidate path (checked against a brute-force filter-then-rank reference on the
same store), sessions and the prompt registry behave, and a store made before the model migrates."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pg_stores import NewStore

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import AlreadyExistsError, ConflictError, NotFoundError, SessionEndedError
from memlane.core.jobs import ExtractionResult
from memlane.core.llm import ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.model import BlockKind, Filters, MemoryBlock, content_hash
from memlane.core.store.blocks import BlockBrowse, BlockUpdate
from memlane.core.store.candidates import postgres_search as search
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.core.store.candidates.postgres_search import vector_top_blocks
from memlane.core.store.candidates.scope import Scope
from memlane.core.store.expiry import TtlChange
from memlane.core.store.postgres.store import PostgresStore
from memlane.core.store.prompts import PromptChange
from memlane.core.store.sessions import NewSession, SessionChanges
from memlane.core.store.users import UserQuery
from memlane.core.timefmt import to_epoch

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
INLINE = AnnSettings(threshold=0, background=False)
WORDS = "apple river stone cloud tiger lemon violin garden rocket candle silver harbor meadow pepper".split()  # noqa: SIM905

Store = PostgresStore


@pytest.fixture(params=["postgres", "citus"])
def make_store(request: pytest.FixtureRequest, new_store: NewStore) -> Iterator[Callable[..., Store]]:
    """A PostgreSQL store, or one on the Citus test cluster, each in a fresh schema."""
    import os
    import uuid

    from memlane.core.store.postgres.schema import drop_schema

    made: list[tuple[PostgresStore, str, str]] = []

    def make(**kw: Any) -> Store:
        if request.param == "postgres":
            return new_store(**kw)
        url = os.environ.get("MEMLANE_TEST_CITUS_URL")
        if not url:
            pytest.skip("Citus: set MEMLANE_TEST_CITUS_URL (.ci/citus.sh starts a cluster)")
        schema = f"test_{uuid.uuid4().hex[:16]}"
        store = PostgresStore(url, schema=schema, pool_max=4, **kw)
        made.append((store, schema, url))
        return store

    yield make
    for store, schema, url in made:
        store.close()
        drop_schema(url, schema)


def chat(a: str, b: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": a}, {"role": "assistant", "content": b}]


def sentence(rng: random.Random, n: int = 6) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def all_modes(mem: Memory, user: str, query: str, k: int = 50) -> set[str]:
    found = set()
    for mode in ("vector", "keyword", "hybrid"):
        found |= {h.block.id for h in mem.search(user, query, k=k, mode=mode)}
    return found


def test_an_update_leaves_nothing_of_the_old_text_with_the_ann_index_on(make_store: Callable[..., Store]) -> None:
    store = make_store(ann=INLINE)
    mem = Memory(store, HashingEmbedder())
    rng = random.Random(5)
    for i in range(30):
        mem.add("ann", chat(sentence(rng), sentence(rng)), session_id=f"s{i % 3}", perspective="single")
    res = mem.add("ann", chat("zebra xylophone quartz", "unique marmalade"), session_id="s0", perspective="single")
    (block_id,) = res.block_ids
    assert block_id in all_modes(mem, "ann", "zebra xylophone quartz marmalade")
    old = store.get_block("ann", block_id)
    emb = HashingEmbedder()
    new_text = "user: walrus harmonica\nassistant: saffron"
    new = replace(old, message=new_text, content_hash=content_hash(new_text), annotations={"topic": "music"})
    t = to_epoch(datetime.now(tz=UTC))
    stored = store.update_block("ann", new, emb.embed([new_text]), BlockUpdate(), now=t)
    assert stored.id == block_id and stored.message == new_text and stored.annotations == {"topic": "music"}
    assert stored.updated_at is not None
    index = store.index_status("ann")[0]
    assert index.state == "ready"
    old_query = "zebra xylophone quartz marmalade"
    assert block_id not in {h.block.id for h in mem.search("ann", old_query, k=50, mode="keyword")}
    for mode in ("vector", "keyword", "hybrid"):
        assert all("zebra" not in h.block.message for h in mem.search("ann", old_query, k=50, mode=mode))
    # its only vector is the new text's: its score for the old query is the new text's similarity
    qv = emb.embed([old_query])[0]
    found = dict(store.vector_candidates("ann", qv, 50, Scope(now=t)))
    (ref,) = [r for r, b in store.fetch_blocks("ann", list(found)).items() if b.id == block_id]
    assert found[ref] == pytest.approx(float(qv @ emb.embed([new_text])[0]), abs=1e-5)
    assert block_id in {h.block.id for h in mem.search("ann", "walrus harmonica saffron", k=3, mode="keyword")}
    assert mem.search("ann", new_text, k=1, mode="vector")[0].block.id == block_id
    assert store.integrity_check() == []


def test_an_ended_session_refuses_writes_and_updates(make_store: Callable[..., Store]) -> None:
    store = make_store()
    mem = Memory(store, HashingEmbedder())
    (bid,) = mem.add("bo", chat("hello there", "hi"), session_id="s1", perspective="single").block_ids
    now = to_epoch(datetime.now(tz=UTC))
    session = store.end_session("bo", "s1", at=now, now=now)
    assert session.ended and session.blocks == 1
    with pytest.raises(SessionEndedError):
        store.end_session("bo", "s1", at=now, now=now)
    with pytest.raises(SessionEndedError):
        mem.add("bo", chat("more", "words"), session_id="s1", perspective="single")
    block = store.get_block("bo", bid)
    with pytest.raises(SessionEndedError):
        store.update_block("bo", replace(block, annotations={"a": "b"}), None, BlockUpdate(), now=now)
    assert store.get_block("bo", bid).annotations == {}
    assert [h.block.id for h in mem.search("bo", "hello there", k=1)] == [bid]  # still searchable


def test_sessions_users_and_their_deletion(make_store: Callable[..., Store]) -> None:
    store = make_store()
    mem = Memory(store, HashingEmbedder())
    now = to_epoch(datetime.now(tz=UTC))
    assert store.create_user("cy", display_name="Cy", metadata={"team": "red", "n": 1})
    assert not store.create_user("cy")
    with pytest.raises(NotFoundError):
        store.create_session("nobody", NewSession("s", "c", now), now=now)
    made = store.create_session(
        "cy", NewSession("s1", "c", now - 10, annotations={"a": "1"}, metadata={"m": [1]}, default_ttl_s=60), now=now
    )
    assert (made.annotations, made.metadata, made.default_ttl_s, made.blocks) == ({"a": "1"}, {"m": [1]}, 60, 0)
    with pytest.raises(AlreadyExistsError):
        store.create_session("cy", NewSession("s1", "c", now), now=now)
    mem.add("cy", chat("first words", "reply"), session_id="s1", conversation_id="c", perspective="single")
    mem.add("cy", chat("second words", "reply"), session_id="s2", perspective="single")
    page = store.list_sessions("cy", limit=10, offset=0, now=now)
    assert page.total == 2 and {s.session_id for s in page.items} == {"s1", "s2"}
    assert store.get_session("cy", "s1", now=now).blocks == 1
    updated = store.update_session("cy", "s1", SessionChanges(metadata={"x": "y"}), now=now)
    assert updated.metadata == {"x": "y"} and updated.annotations == {"a": "1"}
    info = store.get_user("cy")
    assert (info.display_name, info.metadata, info.sessions, info.blocks) == ("Cy", {"team": "red", "n": 1}, 2, 2)
    store.create_user("dee", metadata={"team": "blue"})
    assert [u.name for u in store.find_users(UserQuery(metadata={"team": "red"})).items] == ["cy"]
    assert [u.name for u in store.find_users(UserQuery(metadata={"team": "red", "n": 1})).items] == ["cy"]
    assert store.find_users(UserQuery(metadata={"n": "1"})).total == 0  # a JSON value: the string is not the number
    assert [u.name for u in store.find_users(UserQuery(name="Cy")).items] == ["cy"]
    assert store.find_users(UserQuery(limit=1)).total == 2
    store.update_user("dee", display_name="Dee", metadata={"team": "red"})
    assert [u.name for u in store.find_users(UserQuery(metadata={"team": "red"}, limit=1, offset=1)).items] == ["dee"]
    deleted = store.delete_session("cy", "s1")
    assert [b.session_id for b in deleted] == ["s1"]
    with pytest.raises(NotFoundError):
        store.get_session("cy", "s1", now=now)
    assert store.count_blocks("cy") == 1 and store.integrity_check() == []
    mem.delete_user("cy")
    assert all(n == 0 for n in store.user_row_counts("cy").values())


def test_expired_blocks_vanish_from_every_read_at_once(make_store: Callable[..., Store]) -> None:
    store = make_store(ann=INLINE)
    mem = Memory(store, HashingEmbedder())
    ids = [
        mem.add("eve", chat(f"walnut story {i}", "noted"), session_id="s", perspective="single").block_ids[0]
        for i in range(4)
    ]
    now = to_epoch(datetime.now(tz=UTC))
    assert store.set_ttl("eve", TtlChange(100, block_ids=ids[:2], now=now)) == 2
    assert store.get_block("eve", ids[0]).expires_at is not None
    later = now + 101  # the reads with a clock: after the expiry
    assert {
        h for h, _ in store.vector_candidates("eve", HashingEmbedder().embed(["walnut story"])[0], 10, Scope(now=later))
    }
    refs = store.keyword_candidates("eve", "walnut story", 10, Scope(now=later))
    kept = store.fetch_blocks("eve", [r for r, _ in refs])
    assert sorted(b.id for b in kept.values()) == sorted(ids[2:])
    page = store.browse_blocks("eve", BlockBrowse(None, "ingested", 10, 0), now=later)
    assert page.total == 2 and {b.id for b in page.items} == set(ids[2:])
    assert store.expired_users(later) == ["eve"] and store.expired_users(now) == []
    # the reads without a clock (get, list, count, search) see the expiry once it passes
    assert store.set_ttl("eve", TtlChange(1, block_ids=ids[:2], now=now - 5)) == 2
    assert store.count_blocks("eve") == 2 and len(store.list_blocks("eve")) == 2
    with pytest.raises(NotFoundError):
        store.get_block("eve", ids[0])
    assert not set(ids[:2]) & all_modes(mem, "eve", "walnut story")
    assert store.get_user("eve").blocks == 2
    swept = store.delete_ttl_expired("eve", now=now, limit=None)
    assert sorted(b.id for b in swept) == sorted(ids[:2])
    assert store.integrity_check() == [] and store.expired_users(now) == []


def _blocks(mem: Memory, user: str) -> list[MemoryBlock]:
    return mem.store.list_blocks(user, limit=10_000)


@pytest.mark.parametrize("ann", ["exact", "pool", "index", "fallback"])
def test_filters_are_exact_in_every_candidate_path(
    make_store: Callable[..., Store], ann: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random filters against the brute-force reference: rank every block unfiltered, keep those that pass.
    With the ANN index on: pools small enough are scored exactly ("pool"); with that bound at nothing,
    every filter goes through the index's filtered iterative scan ("index"); with its budget at nothing,
    those fall back to scoring their pool exactly ("fallback")."""
    if ann in ("index", "fallback"):
        monkeypatch.setattr(search, "EXACT_POOL_FACTOR", 0)
    if ann == "fallback":
        monkeypatch.setattr(search, "SCAN_BUDGET", 0)
    store = make_store(ann=AnnSettings(threshold=None if ann == "exact" else 0, background=False))
    mem = Memory(store, HashingEmbedder())
    rng = random.Random(7)
    for i in range(120):
        mem.add(
            "fil",
            chat(sentence(rng), sentence(rng)),
            session_id=f"s{i % 6}",
            time=T0 + timedelta(hours=i),
            perspective="single",
        )
    blocks = _blocks(mem, "fil")
    now = to_epoch(datetime.now(tz=UTC))
    # annotations on a third of them, via updates; a few facts
    for b in blocks[::3]:
        store.update_block(
            "fil", replace(b, annotations={"team": rng.choice(["red", "blue"])}), None, BlockUpdate(), now=now
        )
    blocks = {b.id: b for b in _blocks(mem, "fil")}
    emb = HashingEmbedder()
    for trial in range(25):
        f = Filters(
            sessions=tuple(rng.sample([f"s{i}" for i in range(6)], rng.randint(1, 3))) if rng.random() < 0.6 else None,
            block_ids=tuple(rng.sample(sorted(blocks), 30)) if rng.random() < 0.3 else None,
            annotations={"team": rng.choice(["red", "blue"])} if rng.random() < 0.5 else {},
            kinds=frozenset({BlockKind.EXCHANGE}) if rng.random() < 0.2 else None,
        )
        query = sentence(rng, 3)
        k = rng.choice([1, 5, 10])
        qv = emb.embed([query])[0]
        full_v = store.vector_candidates("fil", qv, 1000, Scope(now=now))
        full_k = store.keyword_candidates("fil", query, 1000, Scope(now=now))
        by_ref = store.fetch_blocks("fil", [r for r, _ in full_v + full_k])
        want_v = [(r, s) for r, s in full_v if f.admits(by_ref[r])][:k]
        want_k = [(r, s) for r, s in full_k if f.admits(by_ref[r])][:k]
        got_v = store.vector_candidates("fil", qv, k, Scope(filters=f, now=now))
        got_k = store.keyword_candidates("fil", query, k, Scope(filters=f, now=now))
        for got, want, full in ((got_v, want_v, full_v), (got_k, want_k, full_k)):
            # the same scores in the same order (blocks of equal score may come in either order), each
            # of a block that passes, with its unfiltered score
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6), trial
            scores = dict(full)
            assert all(f.admits(by_ref[r]) and scores[r] == pytest.approx(s, abs=1e-6) for r, s in got), trial
        page = store.browse_blocks("fil", BlockBrowse(f, "event", 1000, 0), now=now)
        assert {b.id for b in page.items} == {i for i, b in blocks.items() if f.admits(b)}, trial
        assert page.total == len(page.items)


def test_the_prompt_registry(make_store: Callable[..., Store]) -> None:
    store = make_store()
    now = to_epoch(datetime.now(tz=UTC))
    head = store.create_prompt("billing", "look for billing disputes", description="billing", annotations={}, now=now)
    assert (head.current_version, head.version_count, head.text) == (0, 1, "look for billing disputes")
    with pytest.raises(AlreadyExistsError):
        store.create_prompt("billing", "x", description="d", annotations={}, now=now)
    head = store.update_prompt("billing", PromptChange(text="look for refunds", now=now))
    assert (head.current_version, head.version_count, head.text) == (1, 2, "look for refunds")
    assert store.get_prompt_version("billing", 0).text == "look for billing disputes"
    assert [v.version for v in store.list_prompt_versions("billing", limit=10, offset=0).items] == [1, 0]
    with pytest.raises(ConflictError):
        store.purge_prompt("billing", 1)
    assert store.purge_prompt("billing", 0) == 1
    with pytest.raises(NotFoundError):
        store.get_prompt_version("billing", 0)
    head = store.update_prompt("billing", PromptChange(text="third", now=now))
    assert head.current_version == 2  # versions are never reused
    store.archive_prompt("billing", now=now)
    assert store.list_prompts(limit=10, offset=0).total == 0
    assert store.list_prompts(limit=10, offset=0, include_archived=True).items[0].archived
    with pytest.raises(AlreadyExistsError):
        store.create_prompt("billing", "x", description="d", annotations={}, now=now)  # reserved
    store.purge_prompt("billing")
    assert store.create_prompt("billing", "x", description="d", annotations={}, now=now).current_version == 0


@pytest.mark.parametrize("ann", ["exact", "index"])
def test_blocks_of_several_equal_keys_are_read_on_through_a_cursor(
    new_store: NewStore, ann: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every block owns three keys of one vector (its message, and a summary and a fact of the same words):
    the first k keys of a wide filter's scan hold about k/3 blocks, so the search reads the scan on through
    a cursor (open in its transaction: ``pg_cursors``) and still returns the exact filtered top k. Searched
    exactly, the scan is the pool's keys among the user's nearest; with the ANN index (every pool wider than
    nothing walks it here), the index's filtered walk."""
    if ann == "index":
        monkeypatch.setattr(search, "EXACT_POOL_FACTOR", 0)
    store = new_store(ann=AnnSettings(threshold=None if ann == "exact" else 0, background=False))
    mem = Memory(store, HashingEmbedder(), llm=ScriptedLLM("unused"))
    rng = random.Random(11)
    for i in range(60):
        mem.add(
            "cur", chat(sentence(rng), sentence(rng)), session_id=f"s{i % 4}", perspective="single", extract="async"
        )
    jobs = mem.queue.claim("t", 100, 60.0)
    for job in jobs:
        text = job.block.message
        assert mem.queue.complete(job, ExtractionResult(text, (text,), "copy@0"), mem.embedder.embed([text, text]))
    assert len(jobs) == 60 and store.query("SELECT n_keys FROM users WHERE name = 'cur'") == [(180,)]
    f = Filters(sessions=("s0", "s1"))  # 30 blocks, 90 keys
    walks = "SELECT count(*) FROM pg_cursors WHERE name LIKE 'memlane%%walk%%'"
    for _ in range(6):
        qv = mem.embedder.embed([sentence(rng, 3)])[0]
        full = store.vector_candidates("cur", qv, 1000)
        by_ref = store.fetch_blocks("cur", [r for r, _ in full])
        want = [(r, s) for r, s in full if f.admits(by_ref[r])][:10]
        with store.transaction() as conn:
            got = vector_top_blocks(conn, "cur", qv, 10, Scope(filters=f), ann=store.ann_settings)
            (cursors,) = conn.execute(walks).fetchone()
        assert cursors == 1
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
        assert all(f.admits(by_ref[r]) for r, _ in got) and len({r for r, _ in got}) == 10
