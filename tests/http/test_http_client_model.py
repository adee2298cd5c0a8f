"""The memory model through memlane.client (Client and AsyncClient) against the in-process app."""

from __future__ import annotations

import asyncio

import httpx
from http_support import BASE_URL, Service, chat

from memlane.client import AsyncClient, Client


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
