"""The memory model over HTTP /v1: annotations on adds, and (as the core grows them) users with names and
metadata, sessions, facts, updates, TTL, filtered search and the prompt registry. Every bad field is a 4xx
naming it, never a 500."""

from __future__ import annotations

from http_support import Service, chat


def test_add_keeps_annotations_on_every_block(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    body = {"messages": chat("I fly to Oslo.", "Have fun!"), "annotations": {"topic": "travel", "source": "chat"}}
    resp = alice.post("/v1/memories", json=body)
    assert resp.status_code == 201, resp.text
    for block_id in resp.json()["block_ids"]:
        assert alice.get(f"/v1/memories/{block_id}").json()["annotations"] == {"topic": "travel", "source": "chat"}


def test_bad_annotations_name_the_field(service: Service) -> None:
    alice = service.client(service.new_user("alice"))
    for given, field in (
        ({"topic": 3}, "annotations.topic"),
        (["topic"], "annotations"),
        ({f"k{i}": "v" for i in range(65)}, "annotations"),
    ):
        resp = alice.post("/v1/memories", json={"messages": chat("x"), "annotations": given})
        assert resp.status_code == 422, resp.text
        assert resp.json()["error"]["field"] == field, resp.json()
    assert alice.get("/v1/memories").json() == []  # nothing half-written
