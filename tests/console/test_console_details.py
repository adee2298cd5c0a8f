"""The console's newer pages in a real browser: a block with the other perspectives of its exchange, users
found by part of their name, the LLM's health and its probe on the operations page, and edits of a user's
name and metadata and of a session's annotations and metadata (saved and seen after a reload; refused and
changing nothing). Like test_console_browser.py, it skips without Chromium or Playwright."""

from __future__ import annotations

import json

import pytest
from console_support import ADMIN_KEY, Console, Tab


@pytest.fixture
def alice(console: Console) -> Console:
    console.new_user("alice")
    console.add(
        "alice",
        ["I moved to Lisbon.", "Lovely city!", "My cat came too.", "Good cat."],
        time="2023-05-08",
        extract="async",
    )
    return console


def test_a_block_links_the_other_perspectives_of_its_exchange(tab: Tab, alice: Console) -> None:
    with alice.client(alice.keys["alice"]) as a:
        blocks = a.get("/v1/memories").json()
        alice.memory.worker(concurrency=1).run(drain=True)  # summaries for the list
        first, mate = blocks[0], blocks[1]
        assert first["exchange_index"] == mate["exchange_index"] and first["perspective"] != mate["perspective"]
        summary = a.get(f"/v1/memories/{mate['block_id']}").json()["summary"]
    tab.sign_in(ADMIN_KEY)
    tab.go(f"#/users/alice/blocks/{first['block_id']}")
    assert tab.testids("perspective", "data-block") == [mate["block_id"]]
    row = tab.text("[data-testid=perspective]")
    assert mate["perspective"] in row and summary and summary in row and "ready" in row
    tab.accessible("block-perspectives")
    tab.click("[data-testid=perspective-link]")
    assert tab.text("[data-testid=block-message]") == mate["message"]
    assert tab.testids("perspective", "data-block") == [first["block_id"]]
    # A fact has no other perspective: no section.
    with alice.client(alice.keys["alice"]) as a:
        fact = a.post("/v1/facts", json={"facts": ["Alice likes figs."]}).json()["block_ids"][0]
    tab.go(f"#/users/alice/blocks/{fact}")
    assert tab.page.locator("[data-testid=perspectives]").count() == 0


def test_users_found_by_part_of_their_name(tab: Tab, console: Console) -> None:
    with console.client() as admin:
        for user, name in (("carol", "Carol Smith"), ("erin", "Erin SMITHSON"), ("dave_1", "Dave"), ("frank", None)):
            body = {"user": user} if name is None else {"user": user, "display_name": name}
            assert admin.post("/v1/users", json=body).status_code == 201
    tab.sign_in(ADMIN_KEY)
    tab.page.fill("[data-testid=user-filter]", "smith")
    tab.click("form[role=search] button[type=submit]")
    assert tab.testids("user-row", "data-user") == ["carol", "erin"]
    assert tab.text("[data-testid=user-count]").startswith("2 users matching “smith”")
    tab.accessible("users-search")
    tab.go("#/users?q=_")  # literal: only the id with an underscore
    assert tab.testids("user-row", "data-user") == ["dave_1"]


def test_the_llm_on_the_operations_page(tab: Tab, alice: Console) -> None:
    tab.sign_in(ADMIN_KEY)
    tab.go("#/ops")
    assert tab.text("[data-testid=llm-configured]") == "yes"
    assert tab.text("[data-testid=llm-model]") == "scripted · scripted"
    assert tab.text("[data-testid=llm-outage]") == "none"
    health = tab.text("[data-testid=health]")
    assert "llm (information: never unhealthy)" in health and "configured: true" in health
    tab.page.click("[data-testid=probe-llm]")
    assert "The LLM answered in" in tab.said("answered", "llm-probe-ok")
    tab.accessible("operations-llm")
    # A user's key: the same facts, no probe.
    tab.sign_in(alice.keys["alice"])
    tab.go("#/ops")
    assert tab.text("[data-testid=llm-configured]") == "yes"
    assert tab.page.locator("[data-testid=probe-llm]").count() == 0


def test_a_users_name_and_metadata_edited_then_a_refused_edit(tab: Tab, alice: Console) -> None:
    tab.sign_in(ADMIN_KEY)
    tab.go("#/users/alice")
    tab.page.fill("[data-testid=edit-display-name]", "Alice Liddell")
    tab.page.fill("[data-testid=edit-user-metadata]", '{"team": "blue", "level": 3}')
    tab.page.click("[data-testid=user-edit-form] button[type=submit]")
    assert "display_name and metadata" in tab.text("#confirm-body")
    tab.page.click("#confirm-ok")
    tab.said("Saved: display_name and metadata")
    assert tab.text("[data-testid=display-name]") == "Alice Liddell"
    with alice.client() as admin:
        info = admin.get("/v1/users/alice").json()
    assert info["display_name"] == "Alice Liddell" and info["metadata"] == {"team": "blue", "level": 3}
    tab.page.reload()  # the page reads them back from the server (the tab keeps its key)
    tab.ready()
    assert tab.page.locator("[data-testid=action-ok]").count() == 0  # a new page, not the one edited
    assert tab.text("[data-testid=display-name]") == "Alice Liddell"
    assert json.loads(tab.text("[data-testid=user-metadata]")) == {"team": "blue", "level": 3}
    assert tab.page.input_value("[data-testid=edit-display-name]") == "Alice Liddell"
    tab.accessible("user-edit")

    # Cancelled: nothing sent.
    tab.page.fill("[data-testid=edit-display-name]", "Someone else")
    tab.page.click("[data-testid=user-edit-form] button[type=submit]")
    tab.page.keyboard.press("Escape")
    # Refused by the server (a display name over 256 characters is checked there): its reason is said.
    tab.page.evaluate("document.querySelector('[data-testid=edit-display-name]').removeAttribute('maxlength')")
    tab.page.fill("[data-testid=edit-display-name]", "x" * 300)
    tab.page.click("[data-testid=user-edit-form] button[type=submit]")
    tab.page.click("#confirm-ok")
    refused = tab.said("Nothing was changed", "action-error")
    assert "display_name" in refused and "HTTP 422" in refused
    # Not JSON: refused before anything is sent.
    tab.page.fill("[data-testid=edit-user-metadata]", "{team: blue")
    tab.page.click("[data-testid=user-edit-form] button[type=submit]")
    assert "metadata: not JSON" in tab.said("metadata", "action-error")
    assert tab.text("[data-testid=display-name]") == "Alice Liddell"
    with alice.client() as admin:
        assert admin.get("/v1/users/alice").json() == info


def test_a_sessions_annotations_and_metadata_edited_then_a_refused_edit(tab: Tab, alice: Console) -> None:
    with alice.client(alice.keys["alice"]) as a:
        made = {"session_id": "trip", "annotations": {"topic": "travel"}, "metadata": {"by": "agent"}}
        assert a.post("/v1/sessions", json=made).status_code == 201
    tab.sign_in(alice.keys["alice"])
    tab.go("#/users/alice/sessions/trip")
    assert tab.page.input_value("[data-testid=edit-session-annotations]") == "topic=travel"
    tab.page.fill("[data-testid=edit-session-annotations]", "topic=travel\ncity=lisbon")
    tab.page.fill("[data-testid=edit-session-metadata]", '{"by": "console"}')
    tab.page.click("[data-testid=session-edit-form] button[type=submit]")
    tab.page.click("#confirm-ok")
    tab.said("Saved: annotations and metadata")
    assert tab.text("[data-testid=session-annotations]") == "city=lisbon, topic=travel"
    tab.page.reload()
    tab.ready()
    assert tab.page.locator("[data-testid=action-ok]").count() == 0
    assert json.loads(tab.page.input_value("[data-testid=edit-session-metadata]")) == {"by": "console"}
    assert tab.text("[data-testid=session-annotations]") == "city=lisbon, topic=travel"
    assert tab.text("[data-testid=session-metadata]") == '{"by":"console"}'
    tab.accessible("session-edit")
    with alice.client(alice.keys["alice"]) as a:
        before = a.get("/v1/sessions/trip").json()
    assert before["annotations"] == {"topic": "travel", "city": "lisbon"} and before["metadata"] == {"by": "console"}

    # A key that is no identifier: the server refuses, naming the field; nothing changes, metadata included.
    tab.page.fill("[data-testid=edit-session-annotations]", "bad key=x")
    tab.page.fill("[data-testid=edit-session-metadata]", '{"by": "nobody"}')
    tab.page.click("[data-testid=session-edit-form] button[type=submit]")
    tab.page.click("#confirm-ok")
    refused = tab.said("Nothing was changed", "action-error")
    assert "annotations" in refused and "HTTP 422" in refused
    assert tab.text("[data-testid=session-annotations]") == "city=lisbon, topic=travel"
    with alice.client(alice.keys["alice"]) as a:
        assert a.get("/v1/sessions/trip").json() == before


def test_the_api_docs_render_offline_under_their_csp(tab: Tab, console: Console) -> None:
    """/docs draws every route from the server's own files: the browser reaches no other origin (a request
    elsewhere would fail here, and a CSP refusal is a console error the tab fixture fails on)."""
    elsewhere: list[str] = []
    tab.page.on("request", lambda r: None if r.url.startswith(console.base) else elsewhere.append(r.url))
    tab.page.goto(console.base + "/docs")
    tab.page.wait_for_selector(".opblock", timeout=20_000)
    assert tab.page.locator(".opblock").count() > 20
    assert "/v1/search" in tab.text("#swagger-ui")
    assert elsewhere == []
