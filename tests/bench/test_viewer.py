"""``memlane bench view``: the page's data, and the page itself clicked through in a real browser.

The browser test drives Debian's Chromium with Playwright (no browser download): it skips, saying why, where
either is missing; CI installs both.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memlane.bench.reports.viewer import build_model
from memlane.interfaces.cli.app import cli, register_all

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def memlane(*args: str) -> str:
    register_all()
    res = CliRunner().invoke(cli, [*args])
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Two retrieval runs (different modes) and a QA run on the first 30 LoCoMo questions."""
    root = tmp_path_factory.mktemp("view")
    common = ["--embedder", "hashing", "--cache-dir", str(root / "cache"), "--limit", "30", "--quiet"]
    memlane("bench", "retrieval", "locomo", "--mode", "vector", "--mode", "keyword", "--out", str(root / "a"), *common)
    memlane("bench", "retrieval", "locomo", "--mode", "hybrid", "--out", str(root / "b"), *common)
    memlane("bench", "qa", "locomo", "--llm", "scripted", "--judge", "scripted", "--out", str(root / "qa"), *common)
    return root / "a", root / "b", root / "qa"


def page_model(html: str) -> dict[str, Any]:
    data = re.search(r'<script id="data" type="application/octet-stream">([^<]*)</script>', html)
    assert data is not None
    return json.loads(gzip.decompress(base64.b64decode(data.group(1))))  # type: ignore[no-any-return]


def test_the_model_holds_what_the_page_shows(runs: tuple[Path, Path, Path]) -> None:
    a, b, qa = runs
    model = build_model([a, b, qa])
    assert [s for r in model["runs"] for s in r["systems"]] == ["a/vector", "a/keyword", "b/hybrid", "qa/qa"]
    assert len(model["questions"]) == 30 and model["notes"] == []
    q = model["questions"]["conv-26:0"]
    assert q["q"] == "When did Caroline go to the LGBTQ support group?" and q["et"] == ["D1:3"]
    assert model["turns"]["conv-26|D1:3"][0] == "Caroline"  # evidence texts come from the data set
    metrics = model["metrics"]
    for rec in model["results"]["a/vector"].values():
        assert len(rec["t"]) <= 10 and len(rec["s"]) <= 10
        assert rec["m"] is None or len(rec["m"]) == len(metrics)
        for tid in rec["t"]:
            assert f"conv-26|{tid}" in model["turns"]
    assert "session/recall_all@5" in metrics
    verdicts = {r["ok"] for r in model["results"]["qa/qa"].values()}
    assert verdicts <= {True, False, None} and all("reply" in r for r in model["results"]["qa/qa"].values())


def test_the_page_is_self_contained(runs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    a, b, _ = runs
    out = tmp_path / "view.html"
    assert "wrote" in memlane("bench", "view", str(a), str(b), "--out", str(out))
    html = out.read_text(encoding="utf-8")
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=\"(https?:)?//", html)  # no CDN, no network
    assert page_model(html)["runs"][0]["name"] == "a"


def outcome(model: dict[str, Any], system: str, qid: str, metric: str) -> bool | None:
    rec = model["results"][system].get(qid)
    if rec is None or rec["m"] is None:
        return None
    value = rec["m"][model["metrics"].index(metric)]
    return None if value is None else value >= 0.999


@pytest.fixture
def page(runs: tuple[Path, Path, Path], tmp_path: Path) -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip("no Chromium at /usr/bin/chromium (Debian's package chromium): the browser test needs it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (make venv installs it)")
    a, b, qa = runs
    out = tmp_path / "view.html"
    memlane("bench", "view", str(a), str(b), str(qa), "--out", str(out))
    flags = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
             "--no-first-run", "--disable-sync"]  # fmt: skip
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=flags)
        tab = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.goto(out.as_uri())
        tab.wait_for_selector("body[data-ready=true]", timeout=20_000)
        tab.model = page_model(out.read_text(encoding="utf-8"))
        tab.shots = tmp_path
        yield tab
        browser.close()
        assert errors == []


def test_filter_then_question_then_hits_in_a_browser(page: Any) -> None:
    model = page.model
    page.screenshot(path=str(page.shots / "runs.png"), full_page=True)
    assert page.locator("[data-testid=run]").count() == 3
    assert page.inner_text("[data-testid=count]").startswith("30 shown")
    # Filter: category, then misses of system A under the chosen metric.
    page.select_option("[data-testid=category]", "multi-hop")
    chosen = [qid for qid, q in model["questions"].items() if q["cat"] == "multi-hop"]
    assert page.locator("[data-testid=question-row]").count() == len(chosen)
    page.select_option("[data-testid=outcome]", "a-miss")
    misses = [qid for qid in chosen if outcome(model, "a/vector", qid, "session/recall_all@5") is False]
    rows = page.locator("[data-testid=question-row]")
    assert [rows.nth(i).get_attribute("data-qid") for i in range(rows.count())] == misses
    page.select_option("[data-testid=outcome]", "all")
    page.select_option("[data-testid=category]", "")
    page.fill("[data-testid=text]", "LGBTQ support group")
    assert page.locator("[data-testid=question-row]").count() == 1
    # Question: its gold answer and evidence, then each system's hits with the evidence marked.
    page.click("[data-testid=question-row] >> nth=0")
    detail = page.locator("[data-testid=detail]")
    assert "7 May 2023" in page.inner_text("[data-testid=gold]")
    assert "D1:3" in page.inner_text("[data-testid=gold-evidence]")
    hits = detail.locator("[data-testid=system] [data-testid=hit]")
    shown = model["results"]["a/vector"]["conv-26:0"]["t"]
    assert hits.count() == len(shown) > 0
    marked = [hits.nth(i).get_attribute("data-evidence") == "true" for i in range(hits.count())]
    assert marked == [tid == "D1:3" for tid in shown]
    assert detail.locator("mark").count() > 0  # the question's words, highlighted
    page.screenshot(path=str(page.shots / "question.png"), full_page=True)


def test_two_systems_show_what_one_gets_and_the_other_misses(page: Any) -> None:
    model = page.model
    page.select_option("[data-testid=system-a]", "b/hybrid")
    page.select_option("[data-testid=system-b]", "a/vector")
    page.select_option("[data-testid=metric]", "turn/recall_all@10")
    page.select_option("[data-testid=outcome]", "differ")
    shared = set(model["results"]["b/hybrid"]) & set(model["results"]["a/vector"])
    expected = []
    for qid in model["results"]["b/hybrid"]:
        if qid in shared:
            x, y = (outcome(model, s, qid, "turn/recall_all@10") for s in ("b/hybrid", "a/vector"))
            if x is not None and y is not None and x != y:
                expected.append(qid)
    rows = page.locator("[data-testid=question-row]")
    assert [rows.nth(i).get_attribute("data-qid") for i in range(rows.count())] == expected
    assert "n B = 30" in page.inner_text("[data-testid=count]")
    # The QA system: answer, verdict and the judge's raw reply.
    page.select_option("[data-testid=system-a]", "qa/qa")
    page.select_option("[data-testid=system-b]", "")
    page.click("[data-testid=question-row] >> nth=0")
    assert page.locator("[data-testid=answer]").count() == 1
    assert page.locator("[data-testid=judge-reply]").inner_text(timeout=2000) is not None
    page.screenshot(path=str(page.shots / "compare.png"), full_page=True)


def report_tables(report: str) -> dict[str, list[dict[str, str]]]:
    """The per-mode tables of a retrieval run's report.md: mode -> rows of {column label: cell}."""
    out: dict[str, list[dict[str, str]]] = {}
    for mode, body in re.findall(r"^## (\w[\w-]*)\n\n(\|.*?)\n\n", report, flags=re.M | re.S):
        lines = [[c.strip() for c in line.strip("|").split("|")] for line in body.splitlines()]
        if lines[0][0] != "group":
            continue
        out[mode] = [dict(zip(lines[0], row, strict=True)) for row in lines[2:]]
    return out


def test_the_tables_show_the_figures_of_report_md(page: Any, runs: tuple[Path, Path, Path]) -> None:
    """Every figure of the run tables reads as in the run's report.md, to the last digit (the 16 temporal
    questions of run a give means such as 5/16 = 0.3125, which the report writes 0.312)."""
    a, _, _ = runs
    report = report_tables((a / "report.md").read_text(encoding="utf-8"))
    assert set(report) == {"vector", "keyword"}
    cells = "ts => ts.map(t => [...t.rows].map(r => [...r.cells].map(c => c.textContent.trim())))"
    shown = page.eval_on_selector_all("[data-testid=metric-table]", cells)
    compared = 0
    for table, mode in zip(shown[:2], ("vector", "keyword"), strict=True):
        head, rows = table[0], table[1:]
        assert len(rows) == len(report[mode])
        for row, want in zip(rows, report[mode], strict=True):
            for label, cell in zip(head[2:], row[2:], strict=True):
                assert cell == want[label], (mode, row[0], label)
                compared += 1
    assert compared >= 40
    assert any(row["session R_all@5"] == "0.312" for row in report["vector"])  # the tie is in the fixture


def test_the_controls_never_cover_the_question_brought_into_view(page: Any) -> None:
    """The bar of controls stays at the top of the window; a question's detail scrolled into view (as a
    screenshot of it does) starts below the bar, its title readable."""
    page.click("[data-testid=question-row] >> nth=0")
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    page.locator("[data-testid=detail]").evaluate("e => e.scrollIntoView()")
    bar = page.locator("[data-testid=controls]").bounding_box()
    title = page.locator("[data-testid=detail-question]").bounding_box()
    assert bar is not None and title is not None
    assert title["y"] >= bar["y"] + bar["height"], (bar, title)
