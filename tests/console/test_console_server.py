"""The console as the server ships it: its files, their headers, the read routes it calls, and where
`memlane serve` says it is. No browser here (test_console_browser.py drives one)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from console_support import ADMIN_KEY, Console

from memlane.interfaces.http.apidocs import DOCS_CONTENT_SECURITY_POLICY
from memlane.interfaces.http.console import STATIC_DIR
from memlane.interfaces.http.console.mount import CONTENT_SECURITY_POLICY
from memlane.interfaces.http.server import console_url

CLI = "from memlane.interfaces.cli import main; main()"  # what the installed `memlane` runs
DOC = Path(__file__).parents[2] / "docs" / "console.md"
ASSETS = sorted(p.relative_to(STATIC_DIR).as_posix() for p in STATIC_DIR.rglob("*") if p.is_file())


def test_every_file_is_served_with_its_type_the_csp_and_the_security_headers(console: Console) -> None:
    assert {"index.html", "console.css", "js/main.js", "js/api.js", "js/dom.js"} <= set(ASSETS)
    types = {".html": "text/html", ".css": "text/css", ".js": "text/javascript"}
    with console.client(None) as c:
        for name in ASSETS:
            res = c.get(f"/ui/{name}")
            assert res.status_code == 200, name
            assert res.headers["content-type"].startswith(types[Path(name).suffix]), name
            assert res.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            assert res.headers["x-content-type-options"] == "nosniff"
            assert res.headers["x-frame-options"] == "DENY"
            assert res.headers["referrer-policy"] == "no-referrer"
        page = c.get("/ui/")
        assert page.status_code == 200 and "<title>memlane console</title>" in page.text
        redirect = c.get("/ui", follow_redirects=False)
        assert redirect.status_code == 308 and redirect.headers["location"] == "/ui/"
        assert c.get("/ui/nothing-here.js").status_code == 404
        assert c.get("/ui/../pyproject.toml").status_code == 404
        # The API's answers carry the same security headers, without the console's CSP.
        api = c.get("/healthz")
        assert api.headers["x-content-type-options"] == "nosniff" and "content-security-policy" not in api.headers
    policy = dict(part.split(" ", 1) for part in CONTENT_SECURITY_POLICY.split("; "))
    assert policy["default-src"] == "'self'" and policy["script-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'" and policy["object-src"] == "'none'"


def test_the_files_fetch_nothing_elsewhere_and_never_parse_markup() -> None:
    """No CDN, no inline script or style (the CSP would refuse them), and no API that turns text into
    markup: memory text reaches the page as text only."""
    for name in ASSETS:
        text = (STATIC_DIR / name).read_text(encoding="utf-8")
        assert not re.search(r"https?://", text), name
        markup = r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function"
        assert not re.search(markup, text), name
        if name.endswith(".html"):
            assert not re.search(r"<script(?![^>]*\bsrc=)", text), name  # every script is a file
            assert "<style" not in text and " style=" not in text, name


def test_whoami_says_who_a_key_is_and_refuses_a_bad_one(console: Console) -> None:
    key = console.new_user("alice")
    with console.client() as admin:
        assert admin.get("/v1/whoami").json() == {"admin": True, "user": None, "key_id": None}
    with console.client(key) as alice:
        me = alice.get("/v1/whoami").json()
        assert me["admin"] is False and me["user"] == "alice" and key.startswith(f"mlk_{me['key_id']}_")
    with console.client("mlk_nothing_wrong") as stranger:
        res = stranger.get("/v1/whoami")
        assert res.status_code == 401 and res.json()["error"]["code"] == "unauthorized"
    with console.client() as admin:
        assert admin.delete(f"/v1/users/alice/keys/{me['key_id']}").status_code == 204
    with console.client(key) as revoked:
        assert revoked.get("/v1/whoami").status_code == 401


def test_a_users_memory_reads_for_the_admin_and_that_user_only(console: Console) -> None:
    alice, bob = console.new_user("alice"), console.new_user("bob")
    ids = console.add("alice", ["My sister Ana moved to Lisbon.", "Nice!", "I play the cello.", "Since when?"],
                      time="2023-05-08")  # fmt: skip
    console.add("bob", ["Bob's secret is pistachio ice cream.", "Noted."])
    with console.client() as admin, console.client(alice) as a, console.client(bob) as b:
        page = admin.get("/v1/users/alice/memories", params={"limit": 3, "offset": 1}).json()
        assert page["total"] == 4 and page["limit"] == 3 and page["offset"] == 1
        listed = a.get("/v1/memories", params={"limit": 3, "offset": 1}).json()
        assert page["items"] == listed  # the admin's page is the user's own list
        assert a.get("/v1/users/alice/memories").json()["total"] == 4
        one = admin.get(f"/v1/users/alice/memories/{ids[0]}")
        # The block as the user's own route answers it, with the other perspective of its exchange (dual).
        block = one.json()
        mates = block.pop("other_perspectives")
        assert one.status_code == 200 and block == a.get(f"/v1/memories/{ids[0]}").json()
        assert [m["block_id"] for m in mates] == [ids[1]] and mates[0]["perspective"] == "assistant"
        query = {"query": "Where does Ana live?", "k": 3, "mode": "hybrid"}
        assert admin.post("/v1/users/alice/search", json=query).json() == a.post("/v1/search", json=query).json()
        filtered = {**query, "sessions": ["default"], "kinds": ["exchange"]}
        assert admin.post("/v1/users/alice/search", json=filtered).json() == a.post("/v1/search", json=filtered).json()
        sessions = admin.get("/v1/users/alice/sessions").json()
        assert sessions["items"] == a.get("/v1/sessions", params={"limit": 20}).json()["items"]
        assert [s["session_id"] for s in sessions["items"]] == ["default"] and sessions["total"] == 1
        assert admin.get("/v1/users/alice/sessions/default").json() == a.get("/v1/sessions/default").json()
        assert admin.get("/v1/users/alice/sessions/nope").status_code == 404
        # Another user's key: refused, whether the block or the user exists or not.
        for res in (b.get("/v1/users/alice/memories"), b.get(f"/v1/users/alice/memories/{ids[0]}"),
                    b.post("/v1/users/alice/search", json=query), b.get("/v1/users/nobody/memories"),
                    b.get("/v1/users/alice/sessions"), b.get("/v1/users/alice/sessions/default")):  # fmt: skip
            assert res.status_code == 403 and res.json()["error"]["code"] == "forbidden"
        assert "Ana" not in b.get("/v1/users/alice/memories").text
        assert admin.get(f"/v1/users/bob/memories/{ids[0]}").status_code == 404  # alice's block, asked as bob's
        assert admin.get("/v1/users/nobody/memories").json()["total"] == 0
        bad = admin.get("/v1/users/alice/memories", params={"limit": 0})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "limit"
        bad = admin.post("/v1/users/alice/search", json={"query": "x", "k": "3"})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "k"


def test_console_url_names_loopback_for_a_wildcard() -> None:
    assert console_url(("127.0.0.1", 8420)) == "http://127.0.0.1:8420/ui/"
    assert console_url(("0.0.0.0", 80)) == "http://127.0.0.1:80/ui/"
    assert console_url(("::", 8420, 0, 0)) == "http://[::1]:8420/ui/"
    assert console_url(("10.0.0.5", 9000)) == "http://10.0.0.5:9000/ui/"


def test_serve_prints_the_consoles_address_and_serves_it(tmp_path: Path) -> None:
    env = {**os.environ, "MEMLANE_ADMIN_KEY": ADMIN_KEY, "MEMLANE_STORE": str(tmp_path / "served.db"),
           "MEMLANE_EMBEDDER": "hashing"}  # fmt: skip
    cmd = [sys.executable, "-c", CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--workers", "0"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            found = re.search(r"memory console at (http://127\.0\.0\.1:\d+/ui/)", line)
            if found:
                break
        assert found, "".join(lines)
        # docs/console.md shows the line as the server prints it (only the port differs).
        shown = re.search(r"```text\n(.*memory console at .*)\n```", DOC.read_text(encoding="utf-8"))
        assert shown and shown.group(1) == line.strip().replace(found.group(1), "http://127.0.0.1:8420/ui/")
        page = httpx.get(found.group(1), timeout=10)
        assert page.status_code == 200 and "memlane console" in page.text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_root_opens_the_console_and_docs_come_from_the_server_itself(console: Console) -> None:
    with console.client(None) as c:
        root = c.get("/", follow_redirects=False)
        assert root.status_code == 307 and root.headers["location"] == "/ui/"
        assert c.get("/redoc").status_code == 404  # FastAPI's ReDoc page loads a CDN: not served
        page = c.get("/docs")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert page.headers["content-security-policy"] == DOCS_CONTENT_SECURITY_POLICY
        assert not re.search(r"https?://", page.text)  # nothing from another origin
        assert not re.search(r"<script(?![^>]*\bsrc=)", page.text)  # every script a file: the CSP allows no other
        sources = re.findall(r'(?:src|href)="(docs/[^"]+)"', page.text)
        assert {"docs/assets/swagger-ui-bundle.js", "docs/assets/swagger-ui.css", "docs/init.js"} <= set(sources)
        for source in sources:
            res = c.get(f"/{source}")
            assert res.status_code == 200 and len(res.content) > 0, source
            assert res.headers["content-security-policy"] == DOCS_CONTENT_SECURITY_POLICY
        assert "openapi.json" in c.get("/docs/init.js").text
