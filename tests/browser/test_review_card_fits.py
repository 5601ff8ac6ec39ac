"""Issue 18: the review card fits one laptop screen. At 1280x800 the query, the document with
its marks, the evidence, what ranked first, the sibling chunks, the earlier triage's label and
the cause buttons are each inside the viewport, and none of them is under the action bar: their
boxes do not meet the bar's, and the element at each part's centre is the part itself (or one
of its children), not something drawn over it. Played on `misstriage demo`, with a second
triage of the same run so that the card carries an earlier label."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import Browser, Page, expect

from tests.support.fits import LAPTOP, assert_fits
from tests.support.screens import screenshot

VIEWPORT = LAPTOP


def _log_in(browser: Browser, url: str, email: str, password: str) -> Page:
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.goto(url)
    page.fill('input[name="email"]', email)
    page.fill('input[name="password"]', password)
    page.keyboard.press("Enter")
    return page


def _second_triage(tmp_path: Path) -> int:
    """As a lead would with the CLI on the demo's machine: another triage of the bm25 run
    (k 20), whose misses were already labelled in the first one."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'var' / 'demo.db'}"}
    command = ["triage", "--run", "1", "--depth", "50", "--k", "20", "--format", "json"]
    done = subprocess.run(
        [sys.executable, "-m", "app", *command], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout)["id"])


def test_the_review_card_fits_a_laptop_screen_with_nothing_under_the_bar(
    browser: Browser, demo: tuple[str, str], tmp_path: Path
) -> None:
    url, printed = demo
    account = re.search(r"reviewer\s+(\S+)\s+password\s+(\S+)", printed)
    assert account is not None, printed

    # The demo's triage: the reviewer's first card, labelled with a key.
    page = _log_in(browser, f"{url}/login?next=/triages/1/review", *account.groups())
    card = page.locator("#review .card[data-miss]")
    expect(card).to_be_visible()
    first = (
        page.locator("#query-text").inner_text(),
        page.locator("#doc-title small").inner_text(),
    )
    assert_fits(page, ["query", "document text", "evidence", "what ranked first"])
    page.keyboard.press("2")
    expect(page.locator("#message")).to_contain_text("Saved:")

    # A second triage of the same run: the same pair comes first, with the earlier label at
    # the top of the card.
    second = _second_triage(tmp_path)
    page.goto(f"{url}/triages/{second}/review")
    expect(page.locator("#review .card[data-miss]")).to_be_visible()
    shown = (
        page.locator("#query-text").inner_text(),
        page.locator("#doc-title small").inner_text(),
    )
    assert shown == first
    suggestion = page.locator("#suggestion")
    expect(suggestion).to_be_visible()
    expect(suggestion.locator(".term")).to_have_attribute("data-term", "vocabulary-mismatch")
    required = [
        "query",
        "document text",
        "evidence",
        "what ranked first",
        "siblings",
        "earlier label",
    ]
    measured = assert_fits(page, required)
    # the earlier label sits in the card's head, above the document
    assert (
        measured["parts"]["earlier label"]["bottom"] <= measured["parts"]["document title"]["top"]
    )
    screenshot(page, "review-card-1280x800", full_page=False)

    # What ranked first: a count, and a list that scrolls visibly (styled scrollbar, a cue).
    count = page.locator("#candidates-count").inner_text()
    match = re.fullmatch(r"showing (\d+) of (\d+)", count)
    assert match is not None, count
    shown_n, returned = int(match.group(1)), int(match.group(2))
    assert shown_n == page.locator("#candidates li").count()
    assert 0 < shown_n <= returned
    style = page.locator("#candidates").evaluate(
        "el => ({overflow: getComputedStyle(el).overflowY,"
        " color: getComputedStyle(el).scrollbarColor,"
        " scrolls: el.scrollHeight > el.clientHeight})"
    )
    assert style["overflow"] == "auto"
    assert style["color"] not in ("", "auto")
    if style["scrolls"]:
        expect(page.locator(".more-cue")).to_be_visible()
        expect(page.locator(".more-cue")).to_contain_text("scroll")

    # The next card, under the "Saved" banner, still fits.
    page.keyboard.press("1")
    expect(page.locator("#message")).to_contain_text("Saved:")
    assert_fits(page, ["query", "document text", "evidence", "what ranked first"])
