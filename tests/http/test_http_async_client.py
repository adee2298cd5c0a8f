"""memlane.client.AsyncClient against the real app (in process, through httpx's ASGI transport): the routes,
many concurrent calls from two users kept apart, and failures as the same typed errors as Client's."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import httpx
import pytest
from http_support import ADMIN_KEY, BASE_URL, Service, chat

from memlane.client import AsyncClient, AuthenticationError, PermissionDeniedError, TransportError
from memlane.core.errors import NotFoundError, ValidationError


def client(service: Service, key: str | None) -> AsyncClient:
    return AsyncClient(BASE_URL, key, transport=httpx.ASGITransport(app=service.app))


def test_routes_and_concurrent_users(service: Service) -> None:
    async def main() -> None:
        async with client(service, ADMIN_KEY) as admin:
            assert (await admin.health()).ok
            assert await admin.create_user("alice") is True and await admin.create_user("bob") is True
            keys = {u: (await admin.create_key(u, label="t")).key for u in ("alice", "bob")}
            assert [k.label for k in await admin.keys("alice")] == ["t"]

            async def one(user: str, i: int) -> None:
                async with client(service, keys[user]) as mem:
                    await mem.add(
                        chat(f"{user} note {i}: the locker code is {user}-{i}.", "Got it."), session_id=f"s{i}"
                    )
                    hits = await mem.search(f"{user} locker code", k=5)
                    assert hits and all(h.block.user == user for h in hits)

            await asyncio.gather(*(one(u, i) for u in ("alice", "bob") for i in range(10)))
            async with client(service, keys["alice"]) as alice:
                blocks = await alice.list(limit=100)
                assert len(blocks) == 20 and {b.user for b in blocks} == {"alice"}
                added = await alice.add(chat("Dated."), time=datetime(2023, 5, 8, 13, 56, tzinfo=UTC), session_id="d")
                block = await alice.get(added.block_ids[0])
                assert block.time_annotation == "1:56 pm on 8 May, 2023"
                assert [b.id for b in await alice.list(session_id="d")] == list(added.block_ids)
                await alice.delete(added.block_ids[0])
                with pytest.raises(NotFoundError):
                    await alice.get(added.block_ids[0])
                assert (await alice.queue_status()).queued == 0
                with pytest.raises(ValidationError) as exc:
                    await alice.search("x", mode="psychic")
                assert exc.value.where == "mode"
                with pytest.raises(PermissionDeniedError):
                    await alice.users()
            async with client(service, keys["bob"]) as bob:
                with pytest.raises(NotFoundError):  # alice's block through bob's key
                    await bob.get(blocks[0].id)
            assert {u.name: u.blocks for u in await admin.users()} == {"alice": 21, "bob": 20}
            assert "memlane_http_requests_total" in await admin.metrics()
            kid = (await admin.keys("bob"))[0].key_id
            await admin.revoke_key("bob", kid)
            with pytest.raises(AuthenticationError):
                await client(service, keys["bob"]).list()
            deleted = await admin.delete_user("alice")
            assert (deleted.blocks_deleted, deleted.keys_deleted) == (21, 1)

    asyncio.run(main())


def test_no_server_is_a_transport_error() -> None:
    async def main() -> None:
        async with AsyncClient("http://127.0.0.1:9", "k", timeout=2) as c:
            with pytest.raises(TransportError) as exc:
                await c.health()
            assert exc.value.status == 0

    asyncio.run(main())


def test_the_async_client_adds_speaker_messages(service: Service) -> None:
    """``{"speaker": ..., "content": ...}`` messages, as the CLI and Memory.add take them (a 422 before)."""

    async def main() -> None:
        async with client(service, ADMIN_KEY) as admin:
            await admin.create_user("alice")
            key = (await admin.create_key("alice")).key
        async with client(service, key) as alice:
            talk = [{"speaker": "Ana", "content": "I moved to Lisbon."}, {"speaker": "Bo", "content": "Lovely city!"}]
            added = await alice.add(talk, perspective="speakers")
            assert len(added.block_ids) == 2
            assert sorted(b.perspective for b in await alice.list()) == ["Ana", "Bo"]
            with pytest.raises(ValidationError) as exc:
                await alice.add([{"role": "user", "speaker": "Ana", "content": "both"}])
            assert exc.value.where == "messages[0]"

    asyncio.run(main())
