"""In Chromium: a failed import, a bad id and a bad form value are pages of the product; a
reload after a successful post shows the page again without posting anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, Request, expect

from app.models import Role
from tests.support.live import LiveServer
from tests.support.samples import QRELS, QUERIES, RUN
from tests.support.screens import shot
from tests.support.service import PASSWORD, Account


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_errors_and_reloads_are_pages_of_the_product(
    page: Page, live_server: LiveServer, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    files = {name: tmp_path / name for name in ("qrels.txt", "queries.jsonl", "bm25.trec")}
    for path, content in zip(files.values(), (QRELS, QUERIES, RUN), strict=True):
        path.write_text(content)
    broken = tmp_path / "broken.trec"
    broken.write_text("q1 Q0 a 1 high t\n")
    posts: list[str] = []

    def note(request: Request) -> None:
        if request.method == "POST":
            posts.append(request.url)

    page.on("request", note)
    page.goto(f"{live_server.url}/login")
    page.fill('input[name="email"]', accounts[Role.LEAD].email)
    page.fill('input[name="password"]', PASSWORD)
    page.click('button[type="submit"]')
    expect(page.locator("h1")).to_have_text("Golden sets")

    # A failed golden-set import: the form again at its own URL, the line named, the name kept.
    bad_qrels = tmp_path / "bad-qrels.txt"
    bad_qrels.write_text("q1 0 a one\n")
    page.fill('input[name="name"]', "help")
    page.set_input_files('input[name="qrels"]', bad_qrels)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("#main .error")).to_contain_text("bad-qrels.txt, line 1")
    expect(page.locator('input[name="name"]')).to_have_value("help")
    expect(page.locator("header.top nav")).to_be_visible()
    assert page.url == f"{live_server.url}/golden-sets"
    shot(page, "failed-golden-set")
    page.reload()
    expect(page.locator("h1")).to_have_text("Golden sets")

    # A successful import (an HTMX upload): the golden set's page, saying what happened.
    page.fill('input[name="name"]', "help")
    page.set_input_files('input[name="qrels"]', files["qrels.txt"])
    page.set_input_files('input[name="queries"]', files["queries.jsonl"])
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("h1")).to_have_text("help")
    flash = page.locator("#flash [data-flash]")
    expect(flash).to_have_text("Golden set `help` imported: 3 queries, 4 judgments.")
    golden_url = page.url
    # Reload: the same page, no second post, the message said once.
    before = len(posts)
    page.reload()
    expect(page.locator("h1")).to_have_text("help")
    expect(flash).to_have_count(0)
    assert len(posts) == before
    assert page.url == golden_url

    # A failed run import: back on the golden set's page, the reason said, the name kept.
    page.fill('#main form[action$="/runs"] input[name="name"]', "broken")
    page.set_input_files('input[name="run"]', broken)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(flash).to_contain_text("Run not imported:")
    expect(flash).to_contain_text("broken.trec")
    assert flash.get_attribute("data-flash") == "error"
    expect(page.locator('#main form[action$="/runs"] input[name="name"]')).to_have_value("broken")
    expect(page.locator("header.top nav")).to_be_visible()
    assert page.url == golden_url
    shot(page, "failed-import")
    before = len(posts)
    page.reload()
    expect(flash).to_have_count(0)
    assert len(posts) == before

    # Then a good run, and Back and reload still land on pages.
    page.fill('#main form[action$="/runs"] input[name="name"]', "bm25")
    page.set_input_files('input[name="run"]', files["bm25.trec"])
    page.get_by_role("button", name="Import", exact=True).click()
    expect(flash).to_have_text("Run `bm25` imported: 3 queries, 6 lines.")
    shot(page, "imported-run")

    # A bad form value: the page, a message next to the field, the entered value kept.
    page.goto(f"{golden_url}?k=10&depth=0")
    expect(page.locator("#depth-error")).to_have_text("depth must be between 1 and 100000, not 0")
    expect(page.locator('form.controls input[name="depth"]')).to_have_value("0")
    expect(page.locator("#shown-values")).to_contain_text("k 10, depth 50")
    shot(page, "bad-depth")

    # A bad id, reached from a page (as a stale link would be): the product's page with the
    # message and a way on, back to that page.
    page.goto(golden_url)
    page.evaluate("url => { window.location.href = url; }", f"{live_server.url}/golden-sets/999999")
    alert = page.locator('#main [role="alert"]')
    expect(alert).to_contain_text("404 Not found.")
    expect(alert).to_contain_text("No golden set 999999.")
    expect(page.locator("header.top nav")).to_be_visible()
    shot(page, "bad-id")
    page.get_by_role("link", name="Back to the page you came from").click()
    expect(page.locator("h1")).to_have_text("help")
    page.go_back()
    expect(alert).to_contain_text("404 Not found.")
