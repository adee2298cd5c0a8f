"""The memory model through memlane.client (Client and AsyncClient) against the in-process app."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from http_support import ADMIN_KEY, BASE_URL, Service, chat

from memlane.client import AsyncClient, Client, PermissionDeniedError
from memlane.core.errors import (
    AlreadyExistsError,
    NotFoundError,
    PromptArchivedError,
    SessionEndedError,
    ValidationError,
)
from memlane.core.model import BlockKind, Filters


def test_add_with_annotations_round_trips(service: Service) -> None:
    with Client(BASE_URL, service.new_user("alice"), transport=service.transport) as alice:
        added = alice.add(chat("I fly to Oslo."), annotations={"topic": "travel"})
        assert alice.get(added.block_ids[0]).annotations == {"topic": "travel"}


def test_async_client_add_with_annotations(service: Service) -> None:
    key = service.new_user("alice")

    async def main() -> dict[str, str]:
        async with AsyncClient(BASE_URL, key, transport=httpx.ASGITransport(service.app)) as alice:
            added = await alice.add(chat("I fly to Oslo."), annotations={"topic": "travel"})
            return (await alice.get(added.block_ids[0])).annotations

    assert asyncio.run(main()) == {"topic": "travel"}


def test_the_model_through_the_client(service: Service) -> None:
    admin = Client(BASE_URL, ADMIN_KEY, transport=service.transport)
    assert admin.create_user("alice", display_name="Alice", metadata={"team": "blue"}) is True
    with pytest.raises(AlreadyExistsError):
        admin.create_user("alice", exist_ok=False)
    assert admin.get_user("alice").display_name == "Alice"
    assert admin.update_user("alice", metadata={"team": "red"}).metadata == {"team": "red"}
    assert admin.get_user("alice").display_name == "Alice"  # left out: kept
    cleared = admin.update_user("alice", display_name=None)
    assert cleared.display_name is None and cleared.metadata == {"team": "red"}
    assert admin.update_user("alice", display_name="Alice").display_name == "Alice"
    page = admin.list_users(metadata={"team": "red"})
    assert [u.name for u in page.items] == ["alice"] and page.total == 1
    assert [u.name for u in admin.list_users(contains="LIC").items] == ["alice"]  # any case
    assert admin.list_users(contains="_").total == 0  # literal, not "any character"
    key = admin.create_key("alice").key

    with Client(BASE_URL, key, transport=service.transport) as alice:
        session = alice.create_session("trip", annotations={"topic": "travel"}, default_ttl_s=3600)
        assert session.session_id == "trip" and session.default_ttl_s == 3600 and not session.ended
        with pytest.raises(AlreadyExistsError):
            alice.create_session("trip")
        assert alice.create_session("trip", exist_ok=True).session_id == "trip"
        facts = alice.add_facts(["Alice is allergic to peanuts."], session_id="trip", annotations={"k": "v"})
        pairs = alice.add_exchanges([("I fly to Oslo.", "Safe travels!")], session_id="trip")
        ex = alice.get(pairs.block_ids[0])
        assert ex.kind is BlockKind.EXCHANGE and ex.sides == (
            ("user", "I fly to Oslo."),
            ("assistant", "Safe travels!"),
        )
        fact = alice.get(facts.block_ids[0])
        assert fact.kind is BlockKind.FACT and fact.expires_at is not None

        updated = alice.update(fact.id, content="Alice is allergic to walnuts.", ttl_s=0)
        assert (
            updated.id == fact.id and updated.message == "Alice is allergic to walnuts." and updated.expires_at is None
        )
        assert alice.update(ex.id, sides=("I fly to Bergen.", "Enjoy!")).sides[0] == ("user", "I fly to Bergen.")
        assert alice.set_ttl(7200, session_id="trip") == 2

        hits = alice.search("walnuts", filters=Filters(kinds=frozenset({BlockKind.FACT}), annotations={"k": "v"}))
        assert [h.block.id for h in hits] == [fact.id]
        assert alice.search("walnuts", filters=Filters(sessions=("other",))) == []
        browsed = alice.browse(Filters(sessions=("trip",)), limit=1)
        assert browsed.total == 2 and len(browsed.items) == 1

        assert alice.list_sessions().total == 1
        assert alice.update_session("trip", metadata={"city": "Oslo"}).metadata == {"city": "Oslo"}
        assert alice.end_session("trip").ended
        with pytest.raises(SessionEndedError):
            alice.end_session("trip")
        with pytest.raises(SessionEndedError):
            alice.add_facts(["One more."], session_id="trip")
        assert alice.get_session("trip").ended_at is not None
        assert alice.delete_session("trip") == 2
        with pytest.raises(NotFoundError):
            alice.get_session("trip")
        with pytest.raises(ValidationError) as bad:
            alice.add_facts(["x"], ttl_s=-1)
        assert bad.value.where == "ttl_s"

        created = admin.create_prompt("travel", "List places.", description="Trips")
        assert created.current_version == 0
        assert admin.update_prompt("travel", text="List places and dates.").current_version == 1
        assert alice.prompt("travel").text == "List places and dates."
        assert alice.prompt_version("travel", 0).text == "List places."
        assert alice.prompt_versions("travel").total == 2 and alice.prompts().total == 1
        with pytest.raises(PermissionDeniedError):
            alice.create_prompt("mine", "x")
        admin.archive_prompt("travel")
        with pytest.raises(PromptArchivedError):
            admin.update_prompt("travel", description="x")
        admin.purge_prompt("travel")
        with pytest.raises(NotFoundError):
            alice.prompt("travel")


def test_the_async_client_mirrors_the_model(service: Service) -> None:
    key = service.new_user("alice")

    async def main() -> None:
        transport = httpx.ASGITransport(service.app)
        async with AsyncClient(BASE_URL, key, transport=transport) as alice:
            await alice.create_session("s1")
            added = await alice.add_facts(["Alice has a cat."], session_id="s1")
            pair = await alice.add_exchanges([("Hi", "Hello")], session_id="s1")
            updated = await alice.update(added.block_ids[0], content="Alice has two cats.")
            assert updated.message == "Alice has two cats."
            assert (await alice.set_ttl(60, block_ids=pair.block_ids)) == 1
            hits = await alice.search("cats", filters=Filters(sessions=("s1",)))
            assert hits and hits[0].block.id == added.block_ids[0]
            assert (await alice.browse(Filters(kinds=frozenset({BlockKind.FACT})))).total == 1
            assert (await alice.list_sessions()).total == 1
            assert (await alice.update_session("s1", annotations={"a": "b"})).annotations == {"a": "b"}
            assert (await alice.get_session("s1")).blocks == 2
            assert (await alice.end_session("s1")).ended
            assert (await alice.delete_session("s1")) == 2
            assert (await alice.prompts()).total == 0
            assert (await alice.get_user("alice")).name == "alice"
        async with AsyncClient(BASE_URL, ADMIN_KEY, transport=transport) as admin:
            await admin.create_prompt("p", "Extract.")
            assert (await admin.update_prompt("p", text="Extract more.")).current_version == 1
            assert (await admin.prompt_version("p", 0)).text == "Extract."
            assert (await admin.prompt_versions("p")).total == 2
            assert (await admin.prompt("p")).version_count == 2
            await admin.archive_prompt("p")
            await admin.purge_prompt("p")
            assert (await admin.list_users(name="nobody")).total == 0
            assert [u.name for u in (await admin.list_users(contains="ali")).items] == ["alice"]
            assert (await admin.update_user("alice", display_name="A")).display_name == "A"
            assert await admin.create_user("bob", display_name="Bob") is True

    asyncio.run(main())
