"""The console's pages of the memory model in a real browser: sessions on a timeline and a session's blocks,
a filtered search checked against the API's answer, an edit in place found again by search, a session ended
and one deleted, the prompt registry. Like test_console_browser.py, it skips without Chromium or
Playwright."""

from __future__ import annotations

import pytest
from console_support import ADMIN_KEY, Console, Tab


@pytest.fixture
def modelled(console: Console) -> Console:
    """alice with an ended session of messages, a session of facts and one of a two-sided exchange."""
    key = console.new_user("alice")
    console.new_user("bob")
    console.add("alice", ["My sister Ana moved to Lisbon.", "Nice!"], time="2023-05-08", session_id="trip")
    with console.client(key) as alice:
        facts = {"facts": ["Alice is allergic to peanuts.", "Alice's cat is called Miso."], "session_id": "profile",
                 "annotations": {"topic": "health"}, "time": "2023-06-01"}  # fmt: skip
        assert alice.post("/v1/facts", json=facts).status_code == 201
        exchange = {"user_content": "I booked the flight to Tokyo.", "assistant_content": "Enjoy the trip!"}
        body = {"exchanges": [exchange], "session_id": "travel", "annotations": {"topic": "travel"},
                "time": "2023-07-01"}  # fmt: skip
        assert alice.post("/v1/exchanges", json=body).status_code == 201
        assert alice.post("/v1/sessions/trip/end", json={}).status_code == 200
    return console


def test_sessions_on_a_timeline_then_a_sessions_blocks(tab: Tab, modelled: Console) -> None:
    tab.sign_in(ADMIN_KEY)
    tab.go("#/users/alice")
    with modelled.client() as admin:
        sessions = admin.get("/v1/users/alice/sessions").json()
    # oldest started first, as the blocks are listed (the API lists the latest first)
    assert tab.testids("session-row", "data-session") == [s["session_id"] for s in sessions["items"]][::-1]
    assert {s["session_id"] for s in sessions["items"]} == {"trip", "profile", "travel"}
    assert "ended" in tab.text("[data-session=trip]") and "open" in tab.text("[data-session=profile]")
    tab.click("[data-session=profile] [data-testid=session-link]")
    assert tab.text("h1") == "Session profile"
    with modelled.client(modelled.keys["alice"]) as alice:
        blocks = alice.get("/v1/memories", params={"session_id": "profile"}).json()
    assert tab.testids("block-row", "data-block") == [b["block_id"] for b in blocks]
    assert tab.page.locator("[data-testid=end-session]").count() == 0  # the admin holds no user's key
    tab.accessible("session")
    tab.click("[data-testid=block-link] >> nth=0")
    assert tab.text("[data-testid=block-kind]") == "fact"
    assert tab.text("[data-testid=block-status]").startswith("ready")


def test_a_filtered_search_matches_the_apis_answer(tab: Tab, modelled: Console) -> None:
    tab.sign_in(modelled.keys["alice"])
    tab.go("#/users/alice/search?q=cat")
    tab.page.fill("[data-testid=filter-sessions]", "profile, travel")
    tab.page.fill("[data-testid=filter-annotations]", "topic=health")
    tab.page.select_option("[data-testid=filter-kind]", "fact")
    tab.click("[data-testid=search-form] button[type=submit]")
    body = {"query": "cat", "k": 10, "mode": "hybrid", "sessions": ["profile", "travel"],
            "annotations": {"topic": "health"}, "kinds": ["fact"]}  # fmt: skip
    with modelled.client(modelled.keys["alice"]) as alice:
        hits = alice.post("/v1/search", json=body).json()
    assert len(hits) == 2 and all(h["session_id"] == "profile" for h in hits)
    assert tab.testids("hit", "data-block") == [h["block_id"] for h in hits]
    for i, hit in enumerate(hits):
        item = tab.page.locator("[data-testid=hit]").nth(i)
        assert item.locator("[data-testid=hit-score]").inner_text() == f"{hit['score']:.4f} {hit['score_kind']}"
    curl = tab.page.input_value("[data-testid=curl]")
    assert '"sessions":["profile","travel"]' in curl and '"kinds":["fact"]' in curl
    tab.accessible("search-filters")


def test_an_edit_in_place_is_found_by_search_and_a_failed_edit_changes_nothing(tab: Tab, modelled: Console) -> None:
    with modelled.client(modelled.keys["alice"]) as alice:
        block = alice.get("/v1/memories", params={"session_id": "travel"}).json()[0]
    tab.sign_in(modelled.keys["alice"])
    tab.go(f"#/users/alice/blocks/{block['block_id']}")
    assert tab.page.input_value("[data-testid=edit-user]") == "I booked the flight to Tokyo."
    tab.page.fill("[data-testid=edit-user]", "I booked the flight to Osaka.")
    tab.page.fill("[data-testid=edit-annotations]", "topic=travel\ncity=osaka")
    tab.page.click("[data-testid=edit-form] button[type=submit]")
    tab.page.click("#confirm-ok")
    tab.said("Block updated")
    assert "Osaka" in tab.text("[data-testid=block-message]")
    with modelled.client(modelled.keys["alice"]) as alice:
        now = alice.get(f"/v1/memories/{block['block_id']}").json()
        assert "Osaka" in now["message"] and now["annotations"] == {"topic": "travel", "city": "osaka"}
        found = alice.post("/v1/search", json={"query": "Osaka", "k": 1, "mode": "keyword"}).json()
        assert [h["block_id"] for h in found] == [block["block_id"]]
    tab.go("#/users/alice/search?q=Osaka&mode=keyword&k=1")
    assert tab.testids("hit", "data-block") == [block["block_id"]]
    # The session ends while the page is open: the edit is refused, said on the page, the block unchanged.
    tab.go(f"#/users/alice/blocks/{block['block_id']}")
    with modelled.client(modelled.keys["alice"]) as alice:
        assert alice.post("/v1/sessions/travel/end", json={}).status_code == 200
    tab.page.fill("[data-testid=edit-user]", "I booked the flight to Kyoto.")
    tab.page.click("[data-testid=edit-form] button[type=submit]")
    tab.page.click("#confirm-ok")
    assert "ended" in tab.said("Nothing was changed", "action-error")
    assert "Osaka" in tab.text("[data-testid=block-message]")
    with modelled.client(modelled.keys["alice"]) as alice:
        assert "Osaka" in alice.get(f"/v1/memories/{block['block_id']}").json()["message"]
    tab.accessible("block-edit")
    tab.go(f"#/users/alice/blocks/{block['block_id']}")  # read again: no form, and why
    assert tab.page.locator("[data-testid=edit-form]").count() == 0
    assert "has ended" in tab.text("[data-testid=block-session-ended]")


def test_a_ttl_for_a_session_then_ending_and_deleting_it(tab: Tab, modelled: Console) -> None:
    tab.sign_in(modelled.keys["alice"])
    tab.go("#/users/alice/sessions/profile")
    tab.page.fill("[data-testid=session-ttl]", "86400")
    tab.page.click("text=Set TTL")
    tab.page.click("#confirm-ok")
    assert tab.said("got the new TTL") == "2 blocks got the new TTL (1 day)."
    with modelled.client(modelled.keys["alice"]) as alice:
        blocks = alice.get("/v1/memories", params={"session_id": "profile"}).json()
    assert [b["ttl_s"] for b in blocks] == [86400, 86400] and all(b["expires_at"] for b in blocks)
    tab.page.click("[data-testid=end-session]")
    tab.page.click("#confirm-ok")
    tab.said("Session ended")
    assert "ended" in tab.text("[data-testid=session-state]")
    tab.page.click("[data-testid=delete-session]")
    tab.page.click("#confirm-ok")
    assert tab.said("deleted with") == "Session “profile” deleted with 2 blocks."
    assert tab.page.evaluate("location.hash") == "#/users/alice"  # its user's page: the session is gone
    assert "profile" not in tab.testids("session-row", "data-session")
    with modelled.client(modelled.keys["alice"]) as alice:
        assert alice.get("/v1/sessions/profile").status_code == 404
        assert all(b["session_id"] != "profile" for b in alice.get("/v1/memories").json())


def test_users_with_their_sessions_and_the_prompt_registry(tab: Tab, modelled: Console) -> None:
    with modelled.client() as admin:
        made = {"prompt_id": "travel", "text": "Extract travel plans.", "description": "Travel facts"}
        assert admin.post("/v1/prompts", json=made).status_code == 201
        assert admin.patch("/v1/prompts/travel", json={"text": "Extract travel plans and dates."}).status_code == 200
        assert admin.patch("/v1/users/alice", json={"display_name": "Alice Liddell"}).status_code == 200
    tab.sign_in(ADMIN_KEY)
    row = tab.page.locator("[data-user=alice]").inner_text()
    assert "Alice Liddell" in row
    assert "\t3\t" in f"\t{row}\t".replace("\n", "\t")  # alice's three sessions
    tab.go("#/users/alice")
    assert tab.text("[data-testid=display-name]") == "Alice Liddell"
    with modelled.client() as admin:
        info = admin.get("/v1/users/alice").json()
    assert tab.text("[data-testid=last-activity]").startswith(info["last_activity"][:10])
    tab.go("#/ops")
    assert tab.testids("prompt-row", "data-prompt") == ["travel"]
    tab.page.click("[data-prompt=travel] button")
    tab.page.wait_for_selector("[data-prompt=travel] [data-testid=prompt-versions] li")
    versions = tab.text("[data-prompt=travel] [data-testid=prompt-versions]")
    assert "version 1 (current)" in versions and "Extract travel plans and dates." in versions
    tab.accessible("operations-prompts")
