"""The console in a real browser: Playwright drives Debian's Chromium (no browser download) against the
service on a loopback port. Skips, saying why, where either is missing; CI installs both.

Every page visited is checked with axe-core (vendored under vendor/, test-only) for serious or critical
accessibility violations, and the page must log no error (a CSP refusal included). With
MEMLANE_CONSOLE_SHOTS=DIR the tests save the screenshots docs/console.md shows (docs/img/console-*.png).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
from console_support import ADMIN_KEY, FAILING_TEXT, Console, Tab, exchange_firsts

PHONE = {"width": 390, "height": 844}
ANA = ["My sister Ana moved to Lisbon last spring.", "Lisbon is lovely in May."]
CELLO = ["I started cello lessons with Mr. Okafor.", "How are they going?"]
HOSTILE = [
    '<script>window.pwned = 1</script> <img src=x onerror="window.pwned = 2">'
    ' <a href="javascript:window.pwned=3">click</a>',
    "javascript:window.pwned=4",
]


@pytest.fixture
def seeded(console: Console) -> Console:
    """alice with three exchanges (both perspectives each), bob with one."""
    console.new_user("alice")
    console.new_user("bob")
    console.add("alice", ANA, time="2023-05-08T10:00:00Z", session_id="s1", extract="sync")
    console.add("alice", CELLO, time="2023-06-01T18:30:00Z", session_id="s2", extract="sync")
    console.add("alice", HOSTILE, time="2023-06-02T09:00:00Z", session_id="s2")
    console.add("bob", ["Bob keeps his savings in a blue tin.", "Good to know."], time="2023-05-01")
    return console


def test_sign_in_tells_a_wrong_or_revoked_key_plainly_and_keeps_the_key_to_the_tab(tab: Tab, seeded: Console) -> None:
    tab.open()
    assert tab.page.locator("[data-testid=signin]").is_visible()
    tab.accessible("signin")
    tab.page.fill("[data-testid=key]", "mlk_wrong_key")
    tab.page.click("button[type=submit]")
    tab.page.wait_for_selector("[data-testid=signin-error]")
    assert "refused" in tab.text("[data-testid=signin-error]")
    assert tab.page.evaluate("sessionStorage.length") == 0
    tab.sign_in(seeded.keys["alice"])
    assert tab.text("[data-testid=signed-in-as]") == "alice"
    assert tab.page.evaluate("document.cookie") == "" and tab.page.context.cookies() == []
    assert tab.page.evaluate("sessionStorage.getItem('memlane.console.key')") == seeded.keys["alice"]
    # The key is revoked behind the console's back: the next page says so and asks for a key again.
    with seeded.client() as admin:
        key_id = admin.get("/v1/users/alice/keys").json()[0]["key_id"]
        assert admin.delete(f"/v1/users/alice/keys/{key_id}").status_code == 204
    tab.go("#/users/alice?offset=0")
    tab.page.wait_for_selector("[data-testid=expired]")
    assert "no longer accepts" in tab.text("[data-testid=expired]")
    assert tab.page.evaluate("sessionStorage.length") == 0
    # Another tab of the same browser holds no key.
    other = tab.page.context.new_page()
    other.goto(seeded.ui)
    other.wait_for_selector("[data-testid=signin]")
    other.close()


def test_admin_browses_users_then_a_users_blocks_then_a_block(tab: Tab, seeded: Console) -> None:
    tab.sign_in(ADMIN_KEY)
    assert tab.text("[data-testid=signed-in-as]") == "admin"
    assert tab.testids("user-row", "data-user") == ["alice", "bob"]
    tab.accessible("users")
    # The server finds users by exact display name.
    with seeded.client() as admin:
        assert admin.patch("/v1/users/bob", json={"display_name": "Bob Builder"}).status_code == 200
    tab.page.fill("[data-testid=user-filter]", "Bob Builder")
    tab.page.evaluate("() => { document.body.dataset.ready = 'false'; }")
    tab.page.press("[data-testid=user-filter]", "Enter")
    tab.ready()
    assert tab.testids("user-row", "data-user") == ["bob"]
    assert "Bob Builder" in tab.text("[data-user=bob]")
    tab.go("#/users")
    tab.click("[data-user=alice] a")
    with seeded.client(seeded.keys["alice"]) as alice:
        listed = alice.get("/v1/memories").json()
    assert tab.text("[data-testid=block-total]") == str(len(listed)) == "6"
    # event-time order, one row per exchange (its two perspectives folded into one)
    assert tab.testids("block-row", "data-block") == exchange_firsts(listed)
    assert tab.text("[data-testid=block-perspectives] >> nth=0") == "user, assistant"
    assert tab.page.locator("[data-testid=key-row]").count() == 1
    tab.accessible("user")
    tab.click("[data-testid=block-link] >> nth=0")
    first = listed[0]
    assert tab.text("[data-testid=block-message]") == first["message"]
    assert tab.text("[data-testid=block-summary]") == first["summary"]
    assert first["time_annotation"] in tab.text("[data-testid=block-time]")
    assert tab.page.locator("[data-testid=delete-block]").count() == 0  # the admin holds no user's key
    tab.accessible("block")
    # A session's blocks, through the filter the block page links to.
    tab.go("#/users/alice?session=s2")
    assert tab.testids("block-row", "data-block") == exchange_firsts([b for b in listed if b["session_id"] == "s2"])


def test_a_users_blocks_are_paged_fifty_at_a_time(tab: Tab, console: Console) -> None:
    console.new_user("carol")
    for day in range(1, 31):  # 30 exchanges, 60 blocks
        console.add("carol", [f"Day {day}: I walked {day} km.", "Well done."], time=f"2023-03-{day:02d}")
    tab.sign_in(console.keys["carol"])
    assert tab.text("[data-testid=page-range]") == "1–50 of 60"
    assert tab.page.locator("[data-testid=block-row]").count() == 25  # 50 blocks, 25 exchanges
    tab.click("text=Next")
    assert tab.text("[data-testid=page-range]") == "51–60 of 60"
    with console.client(console.keys["carol"]) as carol:
        tail = carol.get("/v1/memories", params={"offset": 50}).json()
    assert tab.testids("block-row", "data-block") == exchange_firsts(tail)


def test_a_filtered_search_shows_the_apis_hits_and_why_they_ranked(tab: Tab, seeded: Console) -> None:
    tab.sign_in(seeded.keys["alice"])
    tab.go("#/users/alice/search")
    tab.page.fill("[data-testid=query]", "Where does Ana live?")
    tab.page.select_option("[data-testid=mode]", "hybrid")
    tab.page.fill("[data-testid=k]", "3")
    tab.page.fill("[data-testid=before]", "2023-06-02T00:00:00Z")
    tab.click("[data-testid=search-form] button[type=submit]")
    body = {
        "query": "Where does Ana live?",
        "k": 3,
        "mode": "hybrid",
        "before": "2023-06-02T00:00:00Z",
        "explain": True,
    }
    with seeded.client(seeded.keys["alice"]) as alice:
        hits = alice.post("/v1/search", json=body).json()
    assert len(hits) == 2 and "Ana" in hits[0]["message"]  # the hostile exchange is after `before`
    assert tab.testids("hit", "data-block") == [h["block_id"] for h in hits]
    items = tab.page.locator("[data-testid=hit]")
    for i, hit in enumerate(hits):
        item = items.nth(i)
        assert item.locator("[data-testid=hit-score]").inner_text() == f"{hit['score']:.4f} {hit['score_kind']}"
        ranks = item.locator("[data-testid=hit-rank]").all()
        shown = {el.get_attribute("data-retriever"): el.inner_text() for el in ranks}
        assert shown == {name: f"{name} rank {rank}" for name, rank in hit["ranks"].items()}
        assert item.locator("[data-testid=hit-message]").inner_text() == " ".join(hit["message"].split())
        assert_explained(item, hit)
    assert "fused score" in tab.text("[data-testid=score-kind]")
    curl = tab.page.input_value("[data-testid=curl]")
    assert curl.startswith('curl -s -X POST -H "Authorization: Bearer $MEMLANE_KEY"')
    assert f"'{seeded.base}/v1/search' -d " in curl and '"before":"2023-06-02T00:00:00Z"' in curl
    assert '"explain":true' in curl
    tab.accessible("search")
    # A bad value is the server's 422, said on the page.
    tab.go("#/users/alice/search?q=Ana&before=not-a-time")
    assert "before" in tab.text("[data-testid=search-error]")


def assert_explained(item: Any, hit: dict[str, Any]) -> None:
    """The hit's table of where its score comes from says what the API's explanation says, part by part
    (read as text: all but the first hit's table are folded until opened)."""
    e = hit["explanation"]
    rows = item.locator("[data-testid=hit-explanation] tbody tr")
    shown = {row.get_attribute("data-part"): row.locator("[data-testid=adds]").text_content() for row in rows.all()}
    want = {p["retriever"]: f"{p['margin']:.4f}" for p in e["retrievers"]}
    want["fused"] = f"{e['fused']:.4f}"
    for gain in ("session_gain", "neighbour_gain", "words_gain", "time_gain"):
        if e[gain] > 0:
            want[gain] = f"{e[gain]:.4f}"
    want["score"] = f"{hit['score']:.4f}"
    assert shown == want
    for p in e["retrievers"]:
        cells = item.locator(f"[data-testid=why-retriever][data-part={p['retriever']}] td")
        assert cells.nth(0).text_content() == str(p["rank"])
        assert (cells.nth(1).text_content() or "").startswith(f"{p['score']:.4f}")


def test_the_time_phrase_a_hit_matched_and_the_newer_version_are_shown(tab: Tab, seeded: Console) -> None:
    seeded.add(
        "alice",
        ["Now I take cello lessons with Ms. Ferreira instead.", "A new teacher!"],
        time="2023-06-10T18:30:00Z",
        session_id="s3",
    )
    tab.sign_in(seeded.keys["alice"])
    query = "Who gave me cello lessons two weeks ago?"
    tab.go("#/users/alice/search?" + urlencode({"q": query, "k": 4, "at": "2023-06-15T12:00:00Z"}))
    body = {"query": query, "k": 4, "at": "2023-06-15T12:00:00Z", "explain": True}
    with seeded.client(seeded.keys["alice"]) as alice:
        hits = alice.post("/v1/search", json=body).json()
    assert tab.testids("hit", "data-block") == [h["block_id"] for h in hits]
    cello = next(h for h in hits if h["session_id"] == "s2")
    assert cello["explanation"]["time_phrases"] == ["two weeks ago"] and cello["explanation"]["time_gain"] > 0
    item = tab.page.locator(f"[data-testid=hit][data-block='{cello['block_id']}']")
    assert_explained(item, cello)
    time_row = item.locator("[data-testid=why-gain][data-part=time_gain]")
    assert "“two weeks ago”" in (time_row.text_content() or "")
    # A question about now: the newer teacher ranks above the older one, and both say why.
    query = "Who gives me cello lessons?"
    tab.go("#/users/alice/search?" + urlencode({"q": query, "k": 4, "at": "2023-06-15T12:00:00Z"}))
    with seeded.client(seeded.keys["alice"]) as alice:
        hits = alice.post("/v1/search", json={**body, "query": query}).json()
    assert tab.testids("hit", "data-block") == [h["block_id"] for h in hits]
    newer, older = hits[0], hits[1]
    assert (newer["session_id"], older["session_id"]) == ("s3", "s2") and newer["score"] < older["score"]
    assert newer["explanation"]["supersedes"] == [older["block_id"]] and older["superseded_by"] == [newer["block_id"]]
    items = tab.page.locator("[data-testid=hit]")
    for i, hit in enumerate(hits):
        assert_explained(items.nth(i), hit)
    assert older["block_id"] in (items.nth(0).locator("[data-testid=hit-supersedes]").text_content() or "")
    assert newer["block_id"] in (items.nth(1).locator("[data-testid=hit-newer]").text_content() or "")
    tab.accessible("search-explain")


def test_deleting_a_block_asks_first_and_a_failed_delete_changes_nothing(tab: Tab, seeded: Console) -> None:
    with seeded.client(seeded.keys["alice"]) as alice:
        block = next(b for b in alice.get("/v1/memories").json() if "cello" in b["message"])
    tab.sign_in(seeded.keys["alice"])
    tab.go(f"#/users/alice/blocks/{block['block_id']}")
    tab.page.click("[data-testid=delete-block]")
    tab.page.wait_for_selector("#confirm[open]")
    tab.accessible("confirm")
    tab.page.keyboard.press("Escape")  # cancelled: nothing happens
    tab.page.wait_for_selector("#confirm:not([open])", state="hidden")
    with seeded.client(seeded.keys["alice"]) as alice:
        assert alice.get(f"/v1/memories/{block['block_id']}").status_code == 200
        # Deleted meanwhile by another client: the console's delete fails, says so and changes nothing.
        assert alice.delete(f"/v1/memories/{block['block_id']}").status_code == 204
    tab.page.click("[data-testid=delete-block]")
    tab.page.click("#confirm-ok")
    tab.page.wait_for_selector("[data-testid=action-error]")
    said = tab.text("[data-testid=action-error]")
    assert "Nothing was changed" in said and "not_found" in said
    assert tab.text("[data-testid=block-message]") == block["message"]
    # Now a block that exists: confirmed, deleted, gone from the list and from the API.
    with seeded.client(seeded.keys["alice"]) as alice:
        other = next(b for b in alice.get("/v1/memories").json() if "Ana" in b["message"])
    tab.go(f"#/users/alice/blocks/{other['block_id']}")
    tab.page.click("[data-testid=delete-block]")
    tab.page.click("#confirm-ok")
    assert tab.said("deleted") == f"Block {other['block_id']} deleted."
    # The page goes to the block's session (the deleted block's own page is no place to be), in the address too.
    assert tab.page.evaluate("location.hash") == f"#/users/alice/sessions/{other['session_id']}"
    assert tab.text("h1") == f"Session {other['session_id']}"
    assert other["block_id"] not in tab.testids("block-row", "data-block")
    tab.go("#/users/alice")
    assert other["block_id"] not in tab.testids("block-row", "data-block")
    assert tab.text("[data-testid=block-total]") == "4"
    with seeded.client(seeded.keys["alice"]) as alice:
        assert alice.get(f"/v1/memories/{other['block_id']}").status_code == 404


def test_stored_script_and_javascript_links_are_inert_text(tab: Tab, seeded: Console) -> None:
    with seeded.client(seeded.keys["alice"]) as alice:
        hostile = next(b for b in alice.get("/v1/memories").json() if "pwned" in b["message"])
    tab.sign_in(seeded.keys["alice"])
    block = f"#/users/alice/blocks/{hostile['block_id']}"
    pages = ["#/users/alice", block, "#/users/alice/search?q=pwned+javascript&k=5"]
    for hash_ in pages:
        tab.go(hash_)
        assert tab.page.evaluate("window.pwned") is None, hash_
        assert tab.page.locator("main script, main img, main iframe").count() == 0, hash_
        hrefs = tab.page.eval_on_selector_all("a", "els => els.map(a => a.getAttribute('href'))")
        assert all(h.startswith("#") for h in hrefs), (hash_, hrefs)
        assert tab.page.locator("main :text('<script>window.pwned = 1</script>')").count() >= 1, hash_
    assert tab.text("[data-testid=hit-message]").count("javascript:window.pwned") >= 1
    tab.go(f"#/users/alice/blocks/{hostile['block_id']}")
    assert tab.text("[data-testid=block-message]") == hostile["message"]


def test_a_user_key_on_another_users_address_gets_the_refusal_page(tab: Tab, seeded: Console) -> None:
    tab.sign_in(seeded.keys["bob"])
    with seeded.client(seeded.keys["alice"]) as alice:
        block_id = alice.get("/v1/memories").json()[0]["block_id"]
    for hash_ in ("#/users/alice", f"#/users/alice/blocks/{block_id}", "#/users/alice/search?q=Ana", "#/users"):
        tab.go(hash_)
        assert tab.page.locator("[data-testid=refusal]").count() == 1, hash_
        assert "Access refused" in tab.text("h1")
        assert "Ana" not in tab.text("main") and "Lisbon" not in tab.text("main")
    tab.go("#/users/alice")
    assert "alice" in tab.text("[data-testid=refusal]")
    tab.accessible("refusal")
    tab.go("#/users/bob")
    assert tab.text("[data-testid=block-total]") == "2"


def test_operations_show_the_queue_and_a_failed_extraction_is_queued_again(tab: Tab, console: Console) -> None:
    console.new_user("dave")
    console.add("dave", [FAILING_TEXT, "Oh no."], time="2023-07-01", extract="sync")
    with console.client(console.keys["dave"]) as dave:
        failed = dave.get("/v1/memories").json()
    assert {b["extraction_status"] for b in failed} == {"failed"}
    tab.sign_in(ADMIN_KEY)
    tab.go("#/ops")
    assert tab.text("[data-testid=queue-dead]") == "2"
    assert tab.text("[data-testid=health-status]") == "The service is ok."
    assert tab.page.locator("[data-testid=error-row]").count() == 2
    assert "not valid JSON" in tab.text("[data-testid=errors]")
    tab.accessible("operations")
    tab.go(f"#/users/dave/blocks/{failed[0]['block_id']}")
    assert "not valid JSON" in tab.text("[data-testid=block-failure]")
    tab.page.click("[data-testid=requeue-block]")
    tab.page.click("#confirm-ok")
    assert tab.said("queued again") == "1 job queued again."
    with console.client(console.keys["dave"]) as dave:
        assert dave.get(f"/v1/memories/{failed[0]['block_id']}").json()["extraction_status"] == "queued"
    tab.go("#/ops")
    tab.page.click("[data-testid=requeue-dead]")
    tab.page.click("#confirm-ok")
    assert tab.said("queued again") == "1 dead job queued again."


def test_admin_creates_a_key_and_deletes_a_user(tab: Tab, seeded: Console) -> None:
    tab.sign_in(ADMIN_KEY)
    tab.go("#/users/bob")
    tab.page.fill("[data-testid=key-label]", "laptop")
    tab.page.click("text=Create key")
    tab.page.click("#confirm-ok")
    tab.page.wait_for_selector("[data-testid=new-key-value]")
    key = tab.page.input_value("[data-testid=new-key-value]")
    with seeded.client(key) as bob:
        assert bob.get("/v1/whoami").json()["user"] == "bob"
    tab.page.click("[data-testid=delete-user]")
    tab.page.click("#confirm-ok")
    assert "2 blocks and 2 keys" in tab.said("deleted:")
    with seeded.client() as admin:
        assert [u["user"] for u in admin.get("/v1/users").json()] == ["alice"]


def test_readable_on_a_phone(browser: Any, seeded: Console) -> None:
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    t = Tab(context.new_page(), seeded)
    t.sign_in(seeded.keys["alice"])
    for hash_, name in (("#/users/alice", "phone-user"), ("#/users/alice/search?q=Ana", "phone-search")):
        t.go(hash_)
        # Nothing wider than the screen but the tables, which scroll inside their own box.
        assert t.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), hash_
        t.accessible(name)
    context.close()
    assert t.errors == []


def test_the_keyboard_alone_reaches_a_users_memory_and_a_block(tab: Tab, seeded: Console) -> None:
    tab.sign_in(ADMIN_KEY)

    def tab_to(selector: str) -> None:
        for _ in range(40):
            tab.page.keyboard.press("Tab")
            if tab.page.evaluate("s => document.activeElement.matches(s)", selector):
                return
        raise AssertionError(f"Tab never reached {selector}")

    tab_to("[data-user=alice] a")
    tab.page.evaluate("() => { document.body.dataset.ready = 'false'; }")
    tab.page.keyboard.press("Enter")
    tab.ready()
    assert tab.text("h1") == "alice's memory"
    assert tab.page.evaluate("document.activeElement.tagName") == "H1"  # a new page takes focus to its title
    tab_to("[data-testid=block-link]")
    tab.page.evaluate("() => { document.body.dataset.ready = 'false'; }")
    tab.page.keyboard.press("Enter")
    tab.ready()
    assert tab.page.locator("[data-testid=block-message]").count() == 1
