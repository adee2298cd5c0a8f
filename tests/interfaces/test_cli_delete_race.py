"""`memlane add` whose user is deleted (by another process) while the add is in flight: a one-line error,
a non-zero exit, and nothing stored; `memlane delete-user` says how many blocks and API keys went."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from memlane.core.apikeys import ApiKeys
from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.embedding.protocol import Vectors, register_embedder
from memlane.core.memory import Memory
from memlane.core.store.sqlite import SqliteStore
from memlane.interfaces.cli.app import cli, register_all

register_all()
MESSAGES = [{"role": "user", "content": "My sister Ana moved to Lisbon."}, {"role": "assistant", "content": "Nice."}]


class DeletesDuringEmbedding(HashingEmbedder):
    """The hashing embedder (same model id), which deletes ``alice`` through a store of its own (another
    process, as far as the add can tell) while it embeds."""

    store_path: Path | None = None

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.store_path is not None:
            other = Memory(SqliteStore(self.store_path), HashingEmbedder())
            other.delete_user("alice")
            other.close()
        return super().embed(texts)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "race.db"
    register_embedder("deletes-during-embedding", DeletesDuringEmbedding)
    yield path
    DeletesDuringEmbedding.store_path = None


def run(args: list[str], store: Path, embedder: str = "hashing", messages: object = MESSAGES) -> tuple[int, str, str]:
    env = {"MEMLANE_STORE": str(store), "MEMLANE_EMBEDDER": embedder}
    res = CliRunner().invoke(cli, args, input=json.dumps(messages), env=env)
    return res.exit_code, res.stdout, res.stderr


def test_an_add_whose_user_is_deleted_in_flight_fails_with_one_line(store: Path) -> None:
    assert run(["add", "alice"], store)[0] == 0
    DeletesDuringEmbedding.store_path = store
    late = [{"role": "user", "content": "A text not embedded before (the cache would answer it)."}]
    code, out, err = run(["add", "alice", "--session", "late"], store, "deletes-during-embedding", late)
    assert code == 1 and out == ""
    assert err == (
        "error: user 'alice' was deleted while this write was in flight; nothing was written "
        "(a new write starts the user afresh)\n"
    )
    DeletesDuringEmbedding.store_path = None
    code, out, _ = run(["users", "--json"], store)
    assert code == 0 and json.loads(out) == []
    assert run(["add", "alice"], store)[0] == 0  # a new add starts alice afresh
    code, out, _ = run(["list", "alice", "--json"], store)
    assert {b["session_id"] for b in json.loads(out)} == {"default"}


def test_delete_user_counts_the_keys_it_revoked(store: Path) -> None:
    assert run(["add", "alice"], store)[0] == 0
    mem = Memory(SqliteStore(store), HashingEmbedder())
    ApiKeys(mem.store).create("alice")
    mem.close()
    code, out, _ = run(["delete-user", "alice"], store)
    assert code == 0 and out.strip() == "deleted alice: 2 blocks, 1 API keys"
