"""The peer adapters, mem0 OSS and engram-search, on small made-up histories: offline, memlane's hashing
embedder, mem0's LLM path against the in-process fake OpenAI-compatible server. Skipped (with the reason)
where the peer's package is not installed."""

from __future__ import annotations

import importlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memlane.bench.datasets.model import Session, Turn
from memlane.bench.datasets.registry import DATASETS
from memlane.bench.systems import SystemContext, make_system, parse_system_spec
from memlane.bench.systems.engram import engram_version
from memlane.bench.systems.mem0 import mem0_version
from memlane.core.embedding.protocol import CachedEmbedder, make_embedder
from memlane.core.errors import ConfigError, ValidationError
from memlane.core.store.sqlite import SqliteStore

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS / "core" / "llm") not in sys.path:
    sys.path.append(str(TESTS / "core" / "llm"))
fakeserver = importlib.import_module("fakeserver")

needs_mem0 = pytest.mark.skipif(mem0_version() is None, reason="mem0ai is not installed (pip install 'memlane[mem0]')")
needs_engram = pytest.mark.skipif(
    engram_version() is None, reason="engram-search is not installed (make venv installs it, without its torch deps)"
)

LME = DATASETS["longmemeval-s"].family
LOCOMO = DATASETS["locomo"].family


def lme_sessions() -> list[Session]:
    day = datetime(2023, 5, 1, 10, 0, tzinfo=UTC)
    texts = [
        ("s_pets", ["I adopted a grey cat named Miso last week.", "She sleeps on my keyboard all day."]),
        ("s_trip", ["We are planning a trip to Lisbon in June.", "I booked a hotel near the river."]),
        ("s_work", ["My manager asked me to lead the database migration.", "It moves us to PostgreSQL."]),
    ]
    out = []
    for n, (sid, user_turns) in enumerate(texts):
        turns: list[Turn] = []
        for i, text in enumerate(user_turns):
            turns.append(Turn(f"{sid}_{2 * i + 1}", "user", text))
            turns.append(Turn(f"{sid}_{2 * i + 2}", "assistant", "That sounds good, tell me more."))
        out.append(Session(sid, day.replace(day=1 + n), tuple(turns)))
    return out


def context(tmp_path: Path, family: Any = LME) -> SystemContext:
    store = SqliteStore(tmp_path / "emb.db")
    return SystemContext(family, CachedEmbedder(make_embedder("hashing"), store), tmp_path / "systems", 50)


@needs_mem0
def test_mem0_stores_messages_verbatim_and_maps_hits_to_turns(tmp_path: Path) -> None:
    system = make_system(parse_system_spec("mem0"), context(tmp_path))
    try:
        system.ingest("q1", lme_sessions())
        hits = system.search("q1", "I adopted a grey cat named Miso last week.", 10, None)  # hashing: same text, top
        assert hits and hits[0].session_id == "s_pets" and hits[0].turn_ids == ("s_pets_1",)
        assert hits[0].text == "I adopted a grey cat named Miso last week."
        assert len(hits) == 10  # threshold 0: every stored message with a positive score can rank
        assert {h.session_id for h in hits} == {"s_pets", "s_trip", "s_work"}
        settings = system.settings()
        assert settings["infer"] is False and settings["version"] == mem0_version()
        system.reset("q1")
        assert system.search("q1", "cat", 10, None) == []
    finally:
        system.close()


@needs_mem0
def test_mem0_prefixes_locomo_speakers(tmp_path: Path) -> None:
    system = make_system(parse_system_spec("mem0"), context(tmp_path, LOCOMO))
    session = Session(
        "session_1", None, (Turn("D1:1", "Caroline", "I went to a support group."), Turn("D1:2", "Mel", "Nice!"))
    )
    try:
        system.ingest("conv-1", [session])
        texts = {h.text for h in system.search("conv-1", "Caroline: I went to a support group.", 5, None)}
        assert "Caroline: I went to a support group." in texts
    finally:
        system.close()


@needs_mem0
def test_mem0_infer_uses_the_configured_llm_and_maps_facts_to_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fakeserver.FakeChatServer() as server:
        server.responder = lambda body: json.dumps({"memory": [{"text": "User has a grey cat named Miso"}]})
        monkeypatch.setenv("MEMLANE_LLM_BASE_URL", server.url)
        monkeypatch.setenv("MEMLANE_LLM_MODEL", fakeserver.FAKE_MODEL)
        monkeypatch.setenv("MEMLANE_LLM_API_KEY", fakeserver.FAKE_API_KEY)
        system = make_system(parse_system_spec("mem0:infer=true"), context(tmp_path))
        try:
            system.ingest("q1", lme_sessions()[:1])
            assert len(server.requests) == 1
            sent = json.dumps(server.requests[0].body)
            assert "Miso" in sent and server.requests[0].body["model"] == fakeserver.FAKE_MODEL
            hits = system.search("q1", "cat", 5, None)
            assert [(h.text, h.session_id, h.turn_ids) for h in hits] == [
                ("User has a grey cat named Miso", "s_pets", ())
            ]
            assert system.ranks_turns is False
        finally:
            system.close()


@needs_mem0
def test_mem0_options_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("MEMLANE_LLM_BASE_URL", "MEMLANE_LLM_MODEL", "MEMLANE_LLM_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigError, match="API key"):
        make_system(parse_system_spec("mem0:infer=true"), context(tmp_path))
    with pytest.raises(ValidationError, match="threshold must be from 0 to 1"):
        make_system(parse_system_spec("mem0:threshold=2"), context(tmp_path))
    with pytest.raises(ValidationError, match="infer must be true or false"):
        make_system(parse_system_spec("mem0:infer=maybe"), context(tmp_path))


@needs_engram
def test_engram_maps_chunks_to_turns_and_synthetic_docs_to_sessions(tmp_path: Path) -> None:
    system = make_system(parse_system_spec("engram"), context(tmp_path))
    long = Session(
        "s_long",
        datetime(2023, 6, 1, tzinfo=UTC),
        tuple(
            Turn(f"s_long_{i}", "user" if i % 2 else "assistant", f"turn {i} about gardening tomatoes")
            for i in range(1, 15)
        ),
    )
    try:
        system.ingest("q1", [*lme_sessions(), long])
        hits = system.search("q1", "We are planning a trip to Lisbon in June.", 50, datetime(2023, 6, 10, tzinfo=UTC))
        assert hits[0].session_id == "s_trip"
        by_id = {h.item_id: h for h in hits}
        assert by_id["s_trip"].turn_ids == ("s_trip_1", "s_trip_2", "s_trip_3", "s_trip_4")
        # 14 turns in windows of 6 overlapping by 1: turns 1-6, 6-11, 11-14
        assert by_id["s_long_c1"].turn_ids == tuple(f"s_long_{i}" for i in range(6, 12))
        assert by_id["s_long_c2"].turn_ids == tuple(f"s_long_{i}" for i in range(11, 15))
        assert by_id["s_trip_topic"].turn_ids == () and by_id["s_trip_topic"].session_id == "s_trip"
        assert by_id["s_trip"].text.startswith("[2023/05/02 (Tue) 10:00] ")
        system.reset("q1")
        with pytest.raises(ConfigError, match="nothing ingested"):
            system.search("q1", "trip", 5, None)
    finally:
        system.close()
