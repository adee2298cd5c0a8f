"""What a first hour with the console found, each in a real browser: ids no URL can carry, pages that follow
their writes, exchanges corrected by both sides, the admin told why it cannot write, hits that say they were
moved up, one account of a failed extraction, and the smaller things (plurals, durations, separators, one
time format, one row per exchange, the search modes explained, filters folded on a phone, a key copied,
empty states, long words, buttons, a shell-quoted curl line). Skips without Chromium or Playwright."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any
from urllib.parse import urlencode

import pytest
from console_support import ADMIN_KEY, FAILING_TEXT, Console, Tab

import memlane.core.ingest as ingest_module
from memlane.core.names import check_stored_name

PHONE = {"width": 390, "height": 844}
TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$")
ANA = ["My sister Ana moved to Lisbon.", "Lisbon is lovely in May."]


@pytest.fixture
def alice(console: Console) -> Console:
    console.new_user("alice")
    console.add("alice", ANA, time="2023-05-08T10:00:00Z", session_id="s1")
    return console


def test_an_id_no_url_can_carry_is_refused_and_a_stored_one_says_how_to_reach_it(
    tab: Tab, console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:  # stored by a memlane that let a "/" in
        patch.setattr(ingest_module, "check_name", check_stored_name)
        console.memory.add("acme/bob", [{"role": "user", "content": "I keep bees."}])
    tab.sign_in(ADMIN_KEY)
    row = tab.page.locator("[data-user='acme/bob']")
    assert row.locator("a").count() == 0  # no link to a page the API cannot serve
    assert "memlane keys create 'acme/bob'" in row.locator("[data-testid=pathless]").inner_text()
    tab.accessible("users-pathless")
    tab.go("#/users/acme%2Fbob")
    assert "memlane delete-user 'acme/bob'" in tab.text("[data-testid=pathless]")
    assert tab.page.locator("[data-testid=load-error]").count() == 0
    # A new one is refused by the server, with its reason, and nothing is created.
    tab.go("#/users")
    tab.page.fill("[data-testid=new-user]", "support/ticket-1")
    tab.page.click("text=Create user")
    tab.page.click("#confirm-ok")
    refused = tab.said("Nothing was changed", "action-error")
    assert "URL path" in refused and "user" in refused
    with console.client() as admin:
        assert sorted(u["user"] for u in admin.get("/v1/users").json()) == ["acme/bob"]


def test_sign_in_and_a_new_user_keep_the_address_in_step(tab: Tab, alice: Console) -> None:
    tab.open("#/users/alice/sessions/s1")
    assert tab.page.evaluate("location.hash") == "#/signin?next=" + "%23%2Fusers%2Falice%2Fsessions%2Fs1"
    tab.page.fill("[data-testid=key]", ADMIN_KEY)
    tab.click("[data-testid=signin] button[type=submit]")
    assert tab.page.evaluate("location.hash") == "#/users/alice/sessions/s1" and tab.text("h1") == "Session s1"
    tab.go("#/users")
    tab.page.fill("[data-testid=new-user]", "carol")
    tab.page.click("text=Create user")
    tab.page.click("#confirm-ok")
    assert tab.said("created") == "User “carol” created."
    assert tab.page.evaluate("location.hash") == "#/users/carol" and tab.text("h1") == "carol's memory"


def test_a_block_page_shows_what_was_saved_and_an_undo_is_saved_too(tab: Tab, alice: Console) -> None:
    with alice.client(alice.keys["alice"]) as a:
        block = a.get("/v1/memories").json()[0]
    tab.sign_in(alice.keys["alice"])
    tab.go(f"#/users/alice/blocks/{block['block_id']}")
    assert tab.text("[data-testid=block-ttl]").startswith("none")
    tab.page.fill("[data-testid=edit-annotations]", "topic=family")
    tab.page.fill("[data-testid=edit-ttl]", "86400")
    tab.page.click("[data-testid=edit-form] button[type=submit]")
    tab.page.click("#confirm-ok")
    tab.said("Block updated")
    assert tab.text("[data-testid=block-annotations]") == "topic = family"
    assert tab.text("[data-testid=block-ttl]") == "1 day" and TIME.match(tab.text("[data-testid=block-expires]"))
    assert tab.page.input_value("[data-testid=edit-annotations]") == "topic=family"
    # Back to no annotations: a change from what is stored now, not "nothing to save".
    tab.page.fill("[data-testid=edit-annotations]", "")
    tab.page.click("[data-testid=edit-form] button[type=submit]")
    tab.page.click("#confirm-ok")
    tab.said("Block updated")
    assert tab.text("[data-testid=block-annotations]") == "none"
    with alice.client(alice.keys["alice"]) as a:
        now = a.get(f"/v1/memories/{block['block_id']}").json()
    assert now["annotations"] == {} and now["ttl_s"] == 86400


def test_an_ended_session_loses_its_forms_and_deleted_things_leave_for_their_parent(tab: Tab, alice: Console) -> None:
    tab.sign_in(alice.keys["alice"])
    tab.go("#/users/alice/sessions/s1")
    # The buttons keep their height beside the TTL form.
    heights = [
        tab.page.locator(f"[data-testid={t}]").bounding_box()["height"] for t in ("end-session", "delete-session")
    ]
    assert heights[0] == heights[1] < 50
    tab.page.click("[data-testid=end-session]")
    tab.page.click("#confirm-ok")
    tab.said("Session ended")
    assert "ended" in tab.text("[data-testid=session-state]")
    for gone in ("end-session", "session-ttl", "session-edit-form"):
        assert tab.page.locator(f"[data-testid={gone}]").count() == 0, gone
    # A user deleting themself: signed out, told so on the sign-in page.
    tab.go("#/users/alice")
    tab.page.click("[data-testid=delete-user]")
    tab.page.click("#confirm-ok")
    assert "deleted: 2 blocks and 1 key" in tab.said("deleted")
    assert tab.page.evaluate("location.hash") == "#/signin" and tab.page.locator("[data-testid=signin]").count() == 1
    assert tab.page.evaluate("sessionStorage.length") == 0


def test_the_admin_deleting_a_user_goes_back_to_the_users(tab: Tab, alice: Console) -> None:
    alice.new_user("bob")
    tab.sign_in(ADMIN_KEY)
    tab.go("#/users/bob")
    tab.page.click("[data-testid=delete-user]")
    tab.page.click("#confirm-ok")
    assert tab.said("deleted") == "User “bob” deleted: 0 blocks and 1 key."
    assert tab.page.evaluate("location.hash") == "#/users" and tab.testids("user-row", "data-user") == ["alice"]


def test_an_exchange_from_a_message_list_is_corrected_by_both_sides(tab: Tab, alice: Console) -> None:
    with alice.client(alice.keys["alice"]) as a:
        block = a.get("/v1/memories").json()[0]
    assert block["sides"] == []  # stored from a message list
    tab.sign_in(alice.keys["alice"])
    tab.go(f"#/users/alice/blocks/{block['block_id']}")
    assert tab.page.input_value("[data-testid=edit-user]") == ANA[0]
    assert tab.page.input_value("[data-testid=edit-assistant]") == ANA[1]
    tab.page.fill("[data-testid=edit-user]", "My sister Ana moved to Porto.")
    tab.page.click("[data-testid=edit-form] button[type=submit]")
    tab.page.click("#confirm-ok")
    tab.said("Block updated")
    assert "Porto" in tab.text("[data-testid=block-message]") and ANA[1] in tab.text("[data-testid=block-message]")
    with alice.client(alice.keys["alice"]) as a:
        now = a.get(f"/v1/memories/{block['block_id']}").json()
    assert [s["content"] for s in now["sides"]] == ["My sister Ana moved to Porto.", ANA[1]]
    assert tab.page.input_value("[data-testid=edit-user]") == "My sister Ana moved to Porto."
    # The admin reads the block and is told why it cannot change it.
    tab.sign_in(ADMIN_KEY)
    for page in (f"#/users/alice/blocks/{block['block_id']}", "#/users/alice/sessions/s1", "#/users/alice"):
        tab.go(page)
        assert "own key" in tab.text("[data-testid=admin-read-only]"), page
        assert (
            tab.page.locator("[data-testid=edit-form], [data-testid=delete-block], [data-testid=end-session]").count()
            == 0
        )


def test_a_hit_moved_up_says_so_and_links_both_ways(tab: Tab, alice: Console) -> None:
    alice.add("alice", ["I take cello lessons at Riverside Music School on Tuesdays.", "Nice."],
              time="2023-06-01T18:30:00Z", session_id="s2")  # fmt: skip
    alice.add("alice", ["I moved my cello lessons to Harbor Academy.", "A new school!"],
              time="2023-06-10T18:30:00Z", session_id="s3")  # fmt: skip
    # A question for a current value (a place) whose matching sentences name two places: the newer block is
    # moved above the older one, which matches the question's words better.
    query = {"q": "Where do I take cello lessons?", "k": 4, "at": "2023-06-15T12:00:00Z"}
    with alice.client(alice.keys["alice"]) as a:
        hits = a.post("/v1/search", json={"query": query["q"], "k": 4, "at": query["at"]}).json()
    newer, older = hits[0], hits[1]
    assert newer["supersedes"] == [older["block_id"]] and newer["score"] < older["score"]
    tab.sign_in(alice.keys["alice"])
    tab.go("#/users/alice/search?" + urlencode(query))
    cards = tab.page.locator("[data-testid=hit]")
    assert cards.nth(0).locator("[data-testid=hit-moved-badge]").inner_text() == "moved up"
    moved = cards.nth(0).locator("[data-testid=hit-supersedes]")
    assert moved.inner_text().startswith(f"Moved up above #2 ({older['block_id']})")
    assert moved.locator("a").get_attribute("href") == f"#/users/alice/blocks/{older['block_id']}"
    back = cards.nth(1).locator("[data-testid=hit-newer] a")
    assert back.get_attribute("href") == f"#/users/alice/blocks/{newer['block_id']}" and "#1" in back.inner_text()
    assert cards.nth(1).locator("[data-testid=hit-moved-badge]").count() == 0


def test_a_failed_extraction_is_told_once_and_named_on_the_operations_page(tab: Tab, console: Console) -> None:
    console.new_user("dave")
    console.add("dave", [FAILING_TEXT, "Oh no."], time="2023-07-01", extract="sync")
    with console.client(console.keys["dave"]) as dave:
        block = dave.get("/v1/memories").json()[0]
        errors = dave.get("/v1/queue").json()["last_errors"]
    assert block["status"] == "extraction_failed" and block["fail_count"] >= 1
    attempts = next(e["attempts"] for e in errors if e["block_id"] == block["block_id"])
    tab.sign_in(console.keys["dave"])
    tab.go(f"#/users/dave/blocks/{block['block_id']}")
    assert tab.text("[data-testid=block-summary]") == "No summary: its extraction failed (see Extraction below)."
    times = "1 time" if block["fail_count"] == 1 else f"{block['fail_count']} times"
    assert tab.text("[data-testid=block-status]") == f"extraction failed {times}"
    failure = tab.text("[data-testid=block-failure]")
    assert f"after {attempts} attempt" in failure and "not valid JSON" in failure
    assert "has not run" not in tab.text("main")
    tab.go("#/ops")
    link = tab.page.locator(f"[data-testid=error-row][data-block='{block['block_id']}'] [data-testid=error-block]")
    assert link.inner_text().startswith(f"user: {FAILING_TEXT}")
    assert link.get_attribute("href") == f"#/users/dave/blocks/{block['block_id']}"


def test_counts_times_and_durations_read_as_people_write_them(tab: Tab, alice: Console) -> None:
    for i in range(1000):
        alice.memory.create_user(f"user-{i:04d}")
    with alice.client(alice.keys["alice"]) as a:
        assert a.post("/v1/sessions", json={"session_id": "weekly", "default_ttl_s": 7 * 86400}).status_code == 201
    tab.sign_in(ADMIN_KEY)
    assert tab.text("[data-testid=user-count]").startswith("1,001 users")
    assert tab.text("[data-testid=page-range]") == "1–50 of 1,001"
    tab.go("#/users/alice")
    assert tab.page.locator("[data-testid=keys] caption").inner_text() == "1 key"
    assert tab.text("[data-session=s1]").count("1 block") == 0 and "2 blocks" in tab.text("[data-session=s1]")
    cells = [tab.text(f"[data-testid=block-row] >> nth={i} >> td >> nth=0") for i in range(1)]
    cells += tab.page.eval_on_selector_all(".timeline .when", "els => els.map(e => e.textContent)")
    assert cells and all(TIME.match(c) for c in cells), cells
    tab.go("#/users/alice/sessions/weekly")
    assert tab.text("[data-testid=session-default-ttl]") == "7 days"
    tab.go("#/users/user-0001")
    assert "POST /v1/memories" in tab.text("[data-testid=no-blocks]")  # how to add memories


def test_a_new_key_has_a_copy_button_and_joins_the_list(tab: Tab, alice: Console) -> None:
    tab.sign_in(ADMIN_KEY)
    tab.go("#/users/alice")
    tab.page.fill("[data-testid=key-label]", "laptop")
    tab.page.click("text=Create key")
    tab.page.click("#confirm-ok")
    tab.page.wait_for_selector("[data-testid=new-key] [data-testid=copy]")
    assert tab.page.locator("[data-testid=key-row]").count() == 2
    assert tab.page.locator("[data-testid=keys] caption").inner_text() == "2 keys"
    key = tab.page.input_value("[data-testid=new-key-value]")
    with alice.client(key) as a:
        assert a.get("/v1/whoami").json()["user"] == "alice"
    tab.page.click("[data-testid=key-row] >> nth=1 >> [data-testid=revoke-key]")
    tab.page.click("#confirm-ok")
    tab.said("revoked")
    tab.page.wait_for_function("document.querySelectorAll('[data-testid=key-row]').length === 1")


def test_the_search_modes_are_explained_and_the_curl_line_survives_any_id(tab: Tab, console: Console) -> None:
    console.new_user("o'brien")
    console.add("o'brien", ["I moved to Cork.", "Lovely."], time="2023-05-08")
    tab.sign_in(ADMIN_KEY)
    tab.go("#/users/o'brien/search?q=Cork")
    assert "BM25" not in tab.text("[data-testid=mode-help]") and "default" in tab.text("[data-testid=mode-help]")
    tab.page.select_option("[data-testid=mode]", "keyword")
    assert "BM25" in tab.text("[data-testid=mode-help]")
    assert tab.page.locator("[data-testid=modes] dt").count() == tab.page.locator("[data-testid=mode] option").count()
    words = shlex.split(tab.page.input_value("[data-testid=curl]"))
    assert words[-3] == f"{console.base}/v1/users/o'brien/search" and json.loads(words[-1])["query"] == "Cork"
    assert tab.page.evaluate("document.querySelector('[data-testid=filters]').open") is True  # a wide screen
    tab.page.click("details.modes summary")
    assert tab.page.locator("[data-testid=modes]").is_visible()
    tab.accessible("search-modes")


def test_on_a_phone_filters_fold_and_long_words_wrap(browser: Any, alice: Console) -> None:
    token = "x" * 300
    ids = alice.add("alice", [f"My token is {token}", "Noted."], time="2023-06-01", session_id=token[:200])
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    t = Tab(context.new_page(), alice)
    t.sign_in(alice.keys["alice"])
    for hash_ in ("#/users/alice", f"#/users/alice/blocks/{ids[0]}", f"#/users/alice/sessions/{token[:200]}",
                  "#/users/alice/search?q=token"):  # fmt: skip
        t.go(hash_)
        assert t.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), hash_
    t.go("#/users/alice/search?q=token")
    assert t.page.evaluate("document.querySelector('[data-testid=filters]').open") is False
    t.go("#/users/alice/search?q=token&kind=exchange")  # a filter set: shown
    assert t.page.evaluate("document.querySelector('[data-testid=filters]').open") is True
    t.accessible("phone-search-filters")
    context.close()
    assert t.errors == []
