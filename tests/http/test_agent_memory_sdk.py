"""Opt-in: the Agent Memory Python SDK itself, unchanged, against a live ``memlane serve``.

The SDK is not a dependency of memlane (it declares no licence and Python 3.12 or later), so this module
skips, saying why, unless it is importable. A developer checks the real client with::

    .venv/bin/pip install --ignore-requires-python couchbase-agent-memory==1.1.0
    .venv/bin/pytest tests/http/test_agent_memory_sdk.py

It runs the SDK's README quickstart, a flow over every resource (users, sessions, memory, prompts, health)
and the agent plug-in shipped with the SDK (its backend, as the agent runtime drives it), against
``memlane serve`` on SQLite, and on PostgreSQL when ``MEMLANE_TEST_POSTGRES_URL`` is set.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from http_support import ADMIN_KEY, CLI, fakeserver, wait_for_port

agentmemory = pytest.importorskip(
    "agentmemory",
    reason="the Agent Memory SDK is not installed (pip install --ignore-requires-python couchbase-agent-memory==1.1.0)",
)
from agentmemory import AgentMemoryClient, ChatMessage  # noqa: E402
from agentmemory.exceptions import (  # noqa: E402
    AuthenticationError,
    AuthorizationError,
    ConflictError,
    MethodNotAllowedError,
    NotFoundError,
    UpstreamError,
    ValidationError,
)
from agentmemory.http import HTTPClient  # noqa: E402
from agentmemory.models import HealthStatus  # noqa: E402
from agentmemory.resources.session import SessionResource  # noqa: E402
from agentmemory.resources.user import UserResource  # noqa: E402


@contextmanager
def serve(store: str, *args: str, **env: str) -> Iterator[str]:
    """``memlane serve`` on a free loopback port with ``args`` and ``MEMLANE_*`` settings ``env`` (no LLM
    unless they give one: blocks are stored ready); its base URL."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    environ.update({"MEMLANE_ADMIN_KEY": ADMIN_KEY, "MEMLANE_STORE": store, "MEMLANE_EMBEDDER": "hashing", **env})
    cmd = [sys.executable, "-c", CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--workers", "0", *args]
    proc = subprocess.Popen(cmd, env=environ, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    try:
        yield f"http://127.0.0.1:{wait_for_port(proc, lines)}"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, "".join(lines)
        assert "Traceback" not in "".join(lines), "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def server(shared_store: str) -> Iterator[str]:
    """``memlane serve`` without an LLM; its base URL."""
    with serve(shared_store) as url:
        yield url


def llm_env(base_url: str) -> dict[str, str]:
    """The settings that give ``memlane serve`` the LLM at ``base_url``."""
    return {
        "MEMLANE_LLM_BASE_URL": base_url,
        "MEMLANE_LLM_MODEL": fakeserver.FAKE_MODEL,
        "MEMLANE_LLM_API_KEY": fakeserver.FAKE_API_KEY,
    }


def test_the_readme_quickstart(server: str) -> None:
    printed: list[str] = []
    with AgentMemoryClient(base_url=server, token=ADMIN_KEY) as client:
        user = client.create_user(user_id="customer-42", name="Example Customer")
        session = user.create_session(session_id="conv-100")
        session.add_memory(
            messages=[
                ChatMessage(
                    user_content="My order hasn't arrived.",
                    assistant_content="I'll look into that. What's your order number?",
                )
            ],
            annotations={"agent": "support-bot"},
        )
        session.add_memory(facts=["Customer is in the EU timezone."], annotations={"agent": "support-bot"})
        results = session.search_memory(query="shipping delay")
        for block in results.memory_blocks:
            printed.append(block.fact or block.message.user_content)
    assert sorted(printed) == ["Customer is in the EU timezone.", "My order hasn't arrived."]


def test_every_resource(server: str) -> None:
    with AgentMemoryClient(base_url=server, token=ADMIN_KEY) as client:
        health = client.health_ping()
        assert health.server is not None and health.server.status.value == "healthy"
        assert health.models is not None and health.models.llm.status == "not_configured"

        user = client.create_user("u1", "User One", metadata={"tier": "gold"})
        with pytest.raises(ConflictError):
            client.create_user("u1", "Again")
        with pytest.raises(NotFoundError) as missing:
            client.get_user("nobody")
        assert missing.value.error_code == "USER_NOT_FOUND" and missing.value.request_id
        user.update(name="Renamed")
        assert client.get_user("u1").name == "Renamed"
        listed = client.list_users(metadata={"tier": "gold"})
        assert [u.id for u in listed.users] == ["u1"] and listed.total == 1

        session = user.create_session("s1", annotations={"ch": "web"}, metadata={"n": 1}, memory_blocks_ttl=0)
        assert user.get_session("s1").session_id == "s1" and user.list_sessions().count == 1
        session.update(annotations={"ch": "app"})
        added = session.add_memory(facts=["likes tea", "lives in Lisbon"], annotations={"k": "v"})
        assert added.accepted_count == 2 and added.rejected_count == 0
        turn = session.add_memory(messages=[ChatMessage(user_content="hi", assistant_content="hello")])
        found = session.search_memory(query="tea")
        assert found.memory_blocks and found.memory_blocks[0].rel_score is not None
        assert session.search_memory(filters={"block_ids": added.block_ids}).count == 2
        updated = session.update_memory(added.block_ids[0], fact="likes coffee")
        assert updated.block is not None and updated.block.fact == "likes coffee"
        page = user.list_memories(limit=2)
        assert page.count == 2 and page.total == 3 and page.limit == 2
        assert session.list_memories().total == 3
        user.modify_ttl(3600, session_id="s1")
        deleted = session.delete_memory(block_ids=[turn.block_ids[0]])
        assert deleted.deleted_count == 1
        session.end()
        with pytest.raises(ValidationError) as ended:
            session.add_memory(facts=["too late"])
        assert ended.value.error_code == "SESSION_ALREADY_ENDED"

        prompt = client.create_prompt("billing", "Look for billing disputes.", "Billing focus")
        assert prompt.current_vid == 0
        client.update_prompt("billing", prompt="Refunds too.")
        assert client.get_prompt("billing", vid=0).vid == 0
        assert client.list_prompts().total == 1 and client.list_prompt_versions("billing").total == 2
        client.purge_prompt("billing", 0)
        client.archive_prompt("billing", "all")
        with pytest.raises(ConflictError):
            client.archive_prompt("billing", "all")
        client.purge_prompt("billing", "all")

        session.delete()
        client.delete_user("u1")
        with pytest.raises(NotFoundError):
            client.get_user("u1")
    with AgentMemoryClient(base_url=server, token="wrong") as stranger, pytest.raises(AuthenticationError):
        stranger.list_users()


def test_the_agent_plugin_backend(server: str) -> None:
    backend_module = pytest.importorskip("agentmemory_hermes._plugin.backend")
    backend: Any = backend_module.AgentMemoryBackend(
        {"base_url": server}, write_annotations={"agent": "hermes"}, token=lambda: ADMIN_KEY
    )
    try:
        backend.resolve("plugin-user", "chat-1")
        fact = backend.add_fact("User lives in Lisbon.").block_ids[0]
        backend.add_turn("I moved to Lisbon.", "Noted.")
        hits = backend.search("Lisbon", top_k=5, facets={"source": "agent"})
        assert [h.block_id for h in hits] == [fact]
        backend.end_session()
        backend.switch_session("chat-1")
        assert backend.current_session().session_id == "chat-1~2"
        new_id = backend.update(fact, "User lives in Porto.")  # an ended session's block: superseded
        assert new_id != fact
        assert sorted(b.fact or b.message.user_content for b in backend.list()) == [
            "I moved to Lisbon.",
            "User lives in Porto.",
        ]
        assert backend.update(new_id, "User lives in Faro.") == new_id  # in place, in the open session
        backend.delete(new_id)
        assert [b.message.user_content for b in backend.list()] == ["I moved to Lisbon."]
    finally:
        backend.close()


def test_health_ping_is_healthy_against_a_healthy_server(shared_store: str, fake_llm: Any) -> None:
    with (
        serve(shared_store, "--workers", "1", **llm_env(fake_llm.url)) as url,
        AgentMemoryClient(url, token=ADMIN_KEY) as client,
    ):
        ping = client.health_ping()
        assert ping.overall_status is HealthStatus.HEALTHY, ping
        assert len(ping.checked_entities) == 6
        assert ping.async_batch_processor is not None and ping.async_batch_processor.queue is not None
        assert ping.async_batch_processor.queue.queued_ids == 0


def dead_llm_url() -> str:
    """An LLM base URL on a loopback port nothing listens on: connection refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def test_health_ping_reports_an_llm_outage(shared_store: str) -> None:
    with (
        serve(shared_store, "--workers", "1", **llm_env(dead_llm_url())) as url,
        AgentMemoryClient(url, token=ADMIN_KEY) as client,
    ):
        client.create_user("u1", "User One").create_session("s1").add_memory(facts=["likes tea"])
        deadline = time.monotonic() + 30
        while (
            ping := client.health_ping()
        ).async_batch_processor is None or ping.async_batch_processor.status == "healthy":
            assert time.monotonic() < deadline, ping
            time.sleep(0.2)
        assert ping.overall_status is HealthStatus.DEGRADED and ping.models is not None
        assert ping.models.llm.status == "unhealthy"
        processor = ping.async_batch_processor
        assert processor.status == "degraded" and processor.message and "unreachable" in processor.message
        assert processor.queue is not None and processor.queue.queued_ids == 1


def test_a_client_with_the_wrong_url_gets_readable_errors(shared_store: str) -> None:
    with serve(shared_store) as url:
        with AgentMemoryClient(url, token=ADMIN_KEY) as client:
            client.create_user("alice", "Alice").create_session("s1")
        # A base URL ending in /v1 reaches memlane's own API: its routes, and paths it does not have.
        wrong = UserResource(HTTPClient(url + "/v1", token=ADMIN_KEY), "alice")
        with pytest.raises(NotFoundError) as unknown:
            wrong.list_memories()  # GET /v1/users/alice/memory: no such route
        assert "without /v1" in str(unknown.value) and unknown.value.error_code == "NOT_FOUND"
        with pytest.raises(MethodNotAllowedError):
            wrong.create_session("s2")  # POST /v1/users/alice/sessions: that route only reads
        with pytest.raises(NotFoundError) as missing:
            wrong.get_session("nope")  # GET /v1/users/alice/sessions/nope: memlane's route, no such session
        assert "nope" in str(missing.value) and missing.value.request_id
    with serve(shared_store, "--no-agent-memory-api") as url, AgentMemoryClient(url, token=ADMIN_KEY) as client:
        with pytest.raises(NotFoundError) as off:
            client.get_user("alice")
        assert "--no-agent-memory-api" in str(off.value)


def test_one_oidc_service_token_for_every_end_user(shared_store: str, tmp_path: Path) -> None:
    jwt = pytest.importorskip("jwt", reason="OIDC tokens need PyJWT (pip install 'memlane[oidc]')")
    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**json.loads(RSAAlgorithm.to_jwk(key.public_key())), "kid": "k1"}]}))

    def token(role: str) -> str:
        claims = {"sub": "support-bot", "role": role, "exp": int(time.time()) + 300}
        return str(jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"}))

    with serve(shared_store, "--oidc-jwks", str(jwks)) as url:
        with AgentMemoryClient(url, token=lambda: token("ams_admin")) as service:
            for user in ("alice", "bob"):
                service.create_user(user, user.title()).create_session("s1").add_memory(facts=[f"{user} likes tea"])
            assert sorted(u.id for u in service.list_users().users) == ["alice", "bob"]
            found = service.get_user("bob").get_session("s1").search_memory(query="tea").memory_blocks
            assert [b.fact for b in found] == ["bob likes tea"]
        with AgentMemoryClient(url, token=token("ams_rw")) as writer, pytest.raises(AuthorizationError):
            writer.get_user("bob")  # a token without the admin role reaches its own user only


def test_metadata_filters_missing_users_and_field_names(server: str) -> None:
    with AgentMemoryClient(server, token=ADMIN_KEY) as client:
        client.create_user("u1", "One", metadata={"level": 3})  # a number: the SDK filters with strings
        client.create_user("u2", "Two", metadata={"level": "3"})
        assert [u.id for u in client.list_users(metadata={"level": "3"}).users] == ["u1", "u2"]
        ghost = SessionResource(HTTPClient(server, token=ADMIN_KEY), "nobody", "s1")
        with pytest.raises(NotFoundError) as missing:
            ghost.add_memory(facts=["likes tea"])
        assert missing.value.error_code == "USER_NOT_FOUND" and missing.value.message == "user 'nobody' not found"
        session = client.get_user("u1").create_session("s1")
        with pytest.raises(ValidationError) as too_long:
            session.add_memory(facts=["x"], memory_block_ttl=10**12)
        assert too_long.value.details == {"field": "memory_block_ttl"}
        assert too_long.value.message.startswith("memory_block_ttl: ")


@pytest.mark.parametrize("llm_state", ["down", "garbage"])
def test_a_synchronous_add_the_llm_cannot_serve_is_an_upstream_error(
    shared_store: str, fake_llm: Any, llm_state: str
) -> None:
    base_url = dead_llm_url() if llm_state == "down" else fake_llm.url
    fake_llm.responder, fake_llm.default_content = None, "not JSON at all"
    env = {**llm_env(base_url), "MEMLANE_AGENT_SYNC_TIMEOUT": "3"}
    with serve(shared_store, "--workers", "1", **env) as url, AgentMemoryClient(url, token=ADMIN_KEY) as client:
        session = client.create_user("u1", "User One").create_session("s1")
        started = time.monotonic()
        with pytest.raises(UpstreamError) as failed:
            session.add_memory(facts=["likes tea"], async_processing=False)
        assert time.monotonic() - started < 10, "far under the SDK's 30 s"
        assert failed.value.service == "llm" and "stored and searchable" in failed.value.message
        (block,) = session.list_memories().memory_blocks
        assert block.fact == "likes tea" and block.block_id in failed.value.message  # written, and said so
        assert block.status.value in failed.value.message


def test_a_block_the_llm_keeps_failing_is_extraction_failed_after_3_attempts(shared_store: str, fake_llm: Any) -> None:
    fake_llm.queue(*[fakeserver.Reply(status=500)] * 100)  # a model that fails every request
    env = {**llm_env(fake_llm.url), "MEMLANE_LLM_MAX_RETRIES": "0"}
    with serve(shared_store, "--workers", "1", **env) as url, AgentMemoryClient(url, token=ADMIN_KEY) as client:
        session = client.create_user("u1", "User One").create_session("s1")
        (block_id,) = session.add_memory(facts=["likes tea"]).block_ids
        deadline = time.monotonic() + 60
        while (block := session.list_memories().memory_blocks[0]).status.value == "processing":
            assert time.monotonic() < deadline, block
            time.sleep(0.5)
        assert (block.block_id, block.status.value, block.fail_count) == (block_id, "extraction_failed", 3)
        assert fake_llm.count == 3
