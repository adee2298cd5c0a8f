"""Screenshots of a `memlane bench view` page, one per view, taken in Debian's Chromium with Playwright.

    python scripts/viewer_screenshots.py VIEW.html OUT_DIR SYSTEM_A SYSTEM_B

Writes runs.png (the runs' figures), questions.png (the list filtered to A's misses), question.png (one
question: gold evidence and both systems' hits) and compare.png (the questions A gets and B misses).
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run", "--disable-sync"]  # fmt: skip


def main(view: Path, out: Path, a: str, b: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(view.resolve().as_uri())
        page.wait_for_selector("body[data-ready=true]", timeout=30_000)
        page.screenshot(path=str(out / "runs.png"))
        page.select_option("[data-testid=system-a]", a)
        page.select_option("[data-testid=outcome]", "a-miss")
        scroll = "document.querySelector('[data-testid=controls]').previousElementSibling.scrollIntoView()"
        page.evaluate(scroll)
        page.screenshot(path=str(out / "questions.png"))
        page.select_option("[data-testid=system-b]", b)
        page.select_option("[data-testid=outcome]", "a-hit-b-miss")
        page.click("[data-testid=question-row] >> nth=0")
        page.evaluate(scroll)
        page.screenshot(path=str(out / "compare.png"))
        page.locator("[data-testid=detail]").screenshot(path=str(out / "question.png"))
        browser.close()
    print(f"screenshots in {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4])
