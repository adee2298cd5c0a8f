"""superseded_by reaches every surface of a search: the Python hit, the wire JSON (/v1 search, MCP, the CLI's
--json), the Python client's hits, and the mem0 facade's metadata."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from memlane.client.models import hit_from_json
from memlane.compat.mem0 import Memory
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.memory import Memory as CoreMemory
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.wire.schemas import HitOut
from memlane.interfaces.wire.shapes import hit_json

NOW = datetime(2024, 7, 1, tzinfo=UTC)


def told(core: CoreMemory, text: str, days_ago: int, session: str) -> None:
    messages = [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
    core.add("alice", messages, session_id=session, time=NOW - timedelta(days=days_ago), perspective="single")


def test_every_surface_names_the_newer_version(tmp_path: Path) -> None:
    core = CoreMemory(SqliteStore(tmp_path / "m.db"), HashingEmbedder())
    told(core, "I have three bikes in the garage.", 120, "march")
    told(core, "I have four bikes in the garage now.", 10, "june")
    told(core, "We cooked lentil soup with cumin.", 60, "soup")
    hits = core.search("alice", "how many bikes do I have in the garage", 3, at=NOW)
    assert [h.block.session_id for h in hits][:2] == ["june", "march"]
    newer, older = hits[0], hits[1]
    assert older.superseded_by == (newer.block.id,) and newer.superseded_by == ()
    # the wire shape (HTTP /v1 search, MCP search_memory, memlane search --json) and the Python client
    wire = hit_json(older)
    assert wire["superseded_by"] == [newer.block.id]
    assert HitOut.model_validate(wire).superseded_by == [newer.block.id]
    assert hit_from_json(wire).superseded_by == (newer.block.id,)
    assert hit_from_json({k: v for k, v in wire.items() if k != "superseded_by"}).superseded_by == ()
    # the mem0 facade: metadata of the older memory names the newer one by its mem0 id
    facade = Memory(memory=core)
    results = facade.search("how many bikes do I have in the garage", user_id="alice", top_k=3)["results"]
    by_text = {r["memory"].split("\n")[0]: r for r in results}
    old_item = by_text["user: I have three bikes in the garage."]
    new_item = by_text["user: I have four bikes in the garage now."]
    assert old_item["metadata"]["superseded_by"] == [new_item["id"]]
    assert not (new_item["metadata"] or {}).get("superseded_by")
