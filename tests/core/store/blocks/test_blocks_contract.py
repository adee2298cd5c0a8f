"""The ``Blocks`` protocol (memlane.core.store.blocks) on every backend, driven through that protocol alone: what
each method's docstring promises and the Memory-level block tests beside this one do not already check."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.errors import NotFoundError, UserDeletedError
from memlane.core.memory import Memory
from memlane.core.model import Filters
from memlane.core.store.blocks import BlockListing, Blocks, BlockUpdate, BlockWrite
from memlane.core.store.candidates import Candidates
from memlane.core.store.users import Users
from memlane.core.timefmt import from_epoch


def test_get_block_is_the_users_only(blocks: Blocks, writer: Memory) -> None:
    mine = writer.add_facts("alice", ["alice's fact"]).block_ids[0]
    writer.add_facts("bob", ["bob's fact"])
    assert blocks.get_block("alice", mine).message == "alice's fact"
    for user in ("bob", "nobody"):
        with pytest.raises(NotFoundError):
            blocks.get_block(user, mine)


def test_list_and_count_page_and_filter_alike(blocks: Blocks, writer: Memory) -> None:
    ids = list(writer.add_facts("alice", [f"fact {i}" for i in range(5)], session_id="s1").block_ids)
    ids += writer.add_facts("alice", ["other"], session_id="s2", conversation_id="c2").block_ids
    listed = blocks.list_blocks("alice", limit=100)
    assert sorted(b.id for b in listed) == sorted(ids) and blocks.count_blocks("alice") == 6
    page = blocks.list_blocks("alice", limit=2, offset=1)
    assert [b.id for b in page] == [b.id for b in listed[1:3]]  # pages of one order
    assert blocks.list_blocks("alice", limit=100, offset=6) == []
    assert [b.id for b in blocks.list_blocks("alice", BlockListing(conversation_id="c2"))] == ids[5:]
    assert blocks.count_blocks("alice", BlockListing(conversation_id="c2")) == 1
    assert (
        blocks.count_blocks("alice", BlockListing(session_id="s1"))
        == 5
        == len(blocks.list_blocks("alice", BlockListing(session_id="s1")))
    )
    assert blocks.list_blocks("nobody") == [] and blocks.count_blocks("nobody") == 0


def test_fetch_blocks_reads_only_the_users_references(blocks: Blocks, candidates: Candidates, writer: Memory) -> None:
    mine = writer.add_facts("alice", ["the red kite"]).block_ids[0]
    writer.add_facts("bob", ["the red kite"])
    refs = {u: [ref for ref, _ in candidates.keyword_candidates(u, "red kite", 5)] for u in ("alice", "bob")}
    assert len(refs["alice"]) == len(refs["bob"]) == 1
    fetched = blocks.fetch_blocks("alice", refs["alice"] + refs["bob"])
    assert list(fetched) == refs["alice"] and fetched[refs["alice"][0]].id == mine
    assert blocks.fetch_blocks("nobody", refs["alice"]) == {}


def test_update_block_writes_what_it_is_given_and_resets_the_ttl(blocks: Blocks, writer: Memory) -> None:
    block = blocks.get_block("alice", writer.add_facts("alice", ["a fact"], ttl_s=600).block_ids[0])
    now = time.time() + 60
    changed = replace(block, annotations={"k": "v"}, updated_at=from_epoch(now))
    kept = blocks.update_block("alice", changed, None, BlockUpdate(), now=now)
    assert kept.annotations == {"k": "v"} and kept.expires_at == block.expires_at  # no reset: expiry kept
    assert blocks.get_block("alice", block.id) == kept
    reset = blocks.update_block("alice", changed, None, BlockUpdate(reset_ttl=True), now=now)
    assert reset.expires_at == from_epoch(now + 600)
    with pytest.raises(NotFoundError):
        blocks.update_block("bob", changed, None, BlockUpdate(), now=now)


def test_delete_block_returns_it_and_leaves_another_users_alone(blocks: Blocks, writer: Memory) -> None:
    mine = writer.add_facts("alice", ["alice's fact", "another"]).block_ids
    theirs = writer.add_facts("bob", ["bob's fact"]).block_ids[0]
    gone = blocks.delete_block("alice", mine[0])
    assert (gone.id, gone.message) == (mine[0], "alice's fact")
    with pytest.raises(NotFoundError):
        blocks.get_block("alice", mine[0])
    with pytest.raises(NotFoundError):
        blocks.delete_block("alice", theirs)  # bob's block, asked as alice
    assert blocks.get_block("bob", theirs).message == "bob's fact"
    assert blocks.delete_blocks("nobody", Filters()) == []


def test_write_blocks_after_a_delete_of_the_user_writes_nothing(blocks: Blocks, users: Users, writer: Memory) -> None:
    block = blocks.get_block("alice", writer.add_facts("alice", ["before"]).block_ids[0])
    epoch = users.deletion_epoch()  # what an add read when it began
    users.delete_user("alice")
    late = replace(block, id=uuid.uuid4().hex[:22], message="after")
    vectors = HashingEmbedder().embed([late.message])
    with pytest.raises(UserDeletedError):
        blocks.write_blocks("alice", [late], vectors, BlockWrite(epoch=epoch))
    with pytest.raises(NotFoundError):
        users.get_user("alice")  # the refused write did not bring the user back
    assert blocks.count_blocks("alice") == 0
