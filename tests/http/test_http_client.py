"""memlane.client.Client against the real app (in process, through an ASGI transport): every route, and
each failure as its typed error."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from http_support import ADMIN_KEY, BASE_URL, MAX_BODY, Service, chat

from memlane.client import (
    AuthenticationError,
    Client,
    PayloadTooLargeError,
    PermissionDeniedError,
    TransportError,
)
from memlane.core.errors import AlreadyExistsError, ConfigError, MemlaneError, NotFoundError, ValidationError
from memlane.core.model import ExtractionStatus, PerspectiveMode
from memlane.core.retention import RetentionPolicy


def client(service: Service, key: str | None) -> Client:
    return Client(BASE_URL, key, transport=service.transport)


def test_every_route_through_the_client(service: Service) -> None:
    admin = client(service, ADMIN_KEY)
    assert admin.health().ok and admin.health().embedder.detail["model_id"] == "hashing-64"
    assert admin.create_user("alice") is True and admin.create_user("alice", exist_ok=True) is False
    with pytest.raises(AlreadyExistsError):
        admin.create_user("alice")
    new = admin.create_key("alice", label="laptop")
    assert new.user == "alice" and new.key.startswith("mlk_") and new.label == "laptop"
    assert [k.key_id for k in admin.keys("alice")] == [new.key_id]

    with client(service, new.key) as alice:
        added = alice.add(
            chat("My sister Ana moved to Lisbon.", "Lovely!"),
            session_id="s1",
            time=datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
            extract="sync",
        )
        assert added.user == "alice" and len(added.block_ids) == 2 and added.jobs_enqueued == 2
        alice.add([{"role": "user", "content": "Later news.", "time": "2024-01-01"}], perspective="single")
        hits = alice.search("Where does Ana live?", k=2, before="2023-12-31")
        assert [h.block.id for h in hits] and all(h.block.session_id == "s1" for h in hits)
        assert hits[0].block.event_time == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
        assert hits[0].block.extraction_status is ExtractionStatus.DONE and hits[0].block.contexts
        assert set(hits[0].ranks) == {"vector", "keyword"} and hits[0].score > 0
        # "A few days ago" asked on 3 Jan 2024 lifts the later news; asked on 11 May 2023, Ana's session.
        scores = [
            {h.block.session_id: h.score for h in alice.search("what news did I tell you a few days ago", at=at)}
            for at in (datetime(2024, 1, 3, tzinfo=UTC), "2023-05-11")
        ]
        assert scores[0]["default"] > scores[1]["default"] and scores[1]["s1"] > scores[0]["s1"]
        block = alice.get(added.block_ids[0])
        assert block.mode is PerspectiveMode.DUAL and block.time_annotation == "1:56 pm on 8 May, 2023"
        assert [b.id for b in alice.list(session_id="s1")] == list(added.block_ids)
        assert len(alice.list(limit=1, offset=2)) == 1
        alice.delete(added.block_ids[1])
        with pytest.raises(NotFoundError):
            alice.get(added.block_ids[1])
        assert alice.queue_status().done == 1  # the deleted block took its job along

    assert {u.name: u.blocks for u in admin.users()} == {"alice": 2}
    assert "memlane_http_requests_total" in admin.metrics()
    admin.revoke_key("alice", new.key_id)
    with pytest.raises(AuthenticationError):
        client(service, new.key).list()
    other = admin.create_key("alice")
    deleted = client(service, other.key).delete_user("alice")  # a user may delete themself
    assert (deleted.blocks_deleted, deleted.keys_deleted) == (2, 1)
    assert admin.users() == []


def test_retention_through_the_client(service: Service) -> None:
    admin = client(service, ADMIN_KEY)
    admin.create_user("alice")
    key = admin.create_key("alice").key
    with client(service, key) as alice:
        alice.add(chat("Old news.", "ok"), time="2024-01-01T00:00:00Z")
        alice.add(chat("New news.", "ok"), time="2024-03-01T00:00:00Z")
        assert alice.retention("alice") == (None, "none")  # a user reads their own policy
    admin.set_retention(None, RetentionPolicy(max_age_days=30))
    admin.set_retention("alice", RetentionPolicy(max_blocks=3))
    assert admin.retention("alice") == (RetentionPolicy(max_blocks=3), "user")
    assert admin.retention_policies().users == {"alice": RetentionPolicy(max_blocks=3)}
    admin.set_retention("alice", None)
    assert admin.retention("alice") == (RetentionPolicy(max_age_days=30), "default")
    dry = admin.apply_retention(at=datetime(2024, 3, 2, tzinfo=UTC), dry_run=True)
    assert dry.dry_run and dry.expired == 2 and dry.at == datetime(2024, 3, 2, tzinfo=UTC)
    report = admin.apply_retention(at="2024-03-02", user="alice")
    assert (report.expired, report.users[0].remaining, report.users[0].source) == (2, 2, "default")
    admin.set_retention(None, None)
    assert admin.retention_policies().default is None


def test_failures_are_typed_errors(service: Service) -> None:
    admin = client(service, ADMIN_KEY)
    key = service.new_user("alice")
    alice = client(service, key)
    with pytest.raises(ValidationError) as exc:
        alice.add([{"role": "user", "content": ""}])
    assert exc.value.where == "messages[0].content" and str(exc.value).startswith("messages[0].content: ")
    with pytest.raises(ValidationError) as exc:
        alice.search("x", mode="psychic")
    assert exc.value.where == "mode"
    with pytest.raises(PayloadTooLargeError):
        alice.add(chat("x" * MAX_BODY))
    with pytest.raises(NotFoundError):
        alice.delete("no-such-block")
    with pytest.raises(NotFoundError):
        alice.get("../../v1/users")  # an id never escapes its path segment
    with pytest.raises(PermissionDeniedError) as denied:
        alice.users()
    assert denied.value.status == 403 and denied.value.code == "forbidden"
    with pytest.raises(PermissionDeniedError):
        admin.search("x")
    with pytest.raises(AuthenticationError):
        client(service, None).list()
    with pytest.raises(NotFoundError):
        admin.create_key("ghost")
    service.memory.llm = None
    with pytest.raises(ConfigError):
        alice.add(chat("x"), extract="sync")


def test_no_server_is_a_transport_error() -> None:
    with Client("http://127.0.0.1:9", "k", timeout=2) as c, pytest.raises(TransportError) as exc:
        c.health()
    assert isinstance(exc.value, MemlaneError) and exc.value.status == 0


def test_the_client_adds_speaker_messages(service: Service) -> None:
    with client(service, service.new_user("alice")) as alice:
        talk = [{"speaker": "Ana", "content": "I moved to Lisbon."}, {"speaker": "Bo", "content": "Lovely city!"}]
        added = alice.add(talk, perspective="speakers")
        assert len(added.block_ids) == 2
        assert sorted(b.perspective for b in alice.list()) == ["Ana", "Bo"]
