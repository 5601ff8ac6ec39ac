"""`misstriage demo` on a free port in a temporary folder: log in with the printed
credentials in Chromium, as the lead and as the reviewer, and label every miss."""

from __future__ import annotations

import re

from playwright.sync_api import Browser, Page, expect

from tests.support.screens import screenshot


def _log_in(page: Page, url: str, email: str, password: str) -> None:
    page.goto(url)
    page.fill('input[name="email"]', email)
    page.fill('input[name="password"]', password)
    page.keyboard.press("Enter")


def test_demo_as_a_new_user_until_the_categories_close(
    page: Page, browser: Browser, demo: tuple[str, str]
) -> None:
    """The issue's "done when": runs table and chart, a dashboard that does not close, the
    reviewer's page with real context, every miss labelled, the categories close."""
    url, printed = demo
    lead = re.search(r"lead\s+(\S+)\s+password\s+(\S+)", printed)
    reviewer = re.search(r"reviewer\s+(\S+)\s+password\s+(\S+)", printed)
    golden = re.search(r"(http://\S+/golden-sets/\d+)", printed)
    review = re.search(r"(http://\S+/review)", printed)
    assert lead is not None, printed
    assert reviewer is not None, printed
    assert golden is not None, printed
    assert review is not None, printed
    assert golden.group(1).startswith(url)

    # the lead: three runs, the depth curve, the triage that does not close yet
    _log_in(page, golden.group(1), *lead.groups())
    expect(page.locator("#runs-table tbody tr")).to_have_count(3)
    expect(page.locator("svg#depth-curve g.series")).to_have_count(3)
    screenshot(page, "demo-golden-set")
    page.locator('#runs-table a:text-is("bm25")').click()
    expect(page.locator("#clusters")).to_contain_text("unique-clusters@10 median 9")
    page.go_back()
    page.goto(review.group(1).removesuffix("/review"))
    expect(page.locator("#closure")).to_contain_text("does not close: 23 unlabelled")
    expect(page.locator("#covered b")).to_have_text("5")

    # the reviewer, in a browser context of their own: real context, then every miss
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    reviewer_page = context.new_page()
    _log_in(reviewer_page, review.group(1), *reviewer.groups())
    expect(reviewer_page.locator("#query-text")).to_be_visible()
    expect(reviewer_page.locator("#doc-text")).not_to_be_empty()
    expect(reviewer_page.locator("#candidates li")).to_have_count(10)
    expect(reviewer_page.locator("#hints li.fired")).not_to_have_count(0)
    screenshot(reviewer_page, "demo-review", full_page=False)
    for labelled in range(1, 24):
        expect(reviewer_page.locator("#progress")).to_contain_text(f"yours {labelled - 1}")
        # "a" accepts the hints' suggestion; every demo miss has one
        expect(reviewer_page.locator("#accept-hint")).to_be_visible()
        reviewer_page.keyboard.press("a")
        expect(reviewer_page.locator("#progress")).to_contain_text(f"yours {labelled}")
    expect(reviewer_page.locator("#empty")).to_be_visible()
    context.close()

    page.reload()
    expect(page.locator("#closure")).to_have_text(
        "6 + 10 + 7 = 23 of 23 misses accounted for: the categories close "
        "(5 more covered by a duplicate, not queued)"
    )
    expect(page.locator("#acceptance")).to_contain_text("100% (23/23)")
    page.set_viewport_size({"width": 1280, "height": 1200})
    screenshot(page, "demo-dashboard", full_page=False)

    # the backlog downloads are links on the dashboard
    for link, kind in (("#download-csv", "text/csv"), ("#download-json", "application/json")):
        href = page.locator(link).get_attribute("href")
        assert href is not None
        download = page.request.get(href if href.startswith("http") else url + href)
        assert download.status == 200
        assert download.headers["content-type"].startswith(kind)
    # the demo has no tracker credentials: the preview (a dry run) works anyway, the page
    # says what a push needs, and a push is refused in the page
    expect(page.locator('#credentials li[data-tracker="github"]')).to_have_text(
        "a push to GitHub needs MISSTRIAGE_GITHUB_TOKEN (not set)"
    )
    page.fill('#export input[name="target"]', "acme/search")
    page.locator('#export button[value="preview"]').click()
    expect(page.locator("#export-results caption")).to_have_text("Preview: nothing was sent")
    expect(page.locator("#export-results tbody tr")).to_have_count(3)
    page.locator("#export").scroll_into_view_if_needed()
    screenshot(page, "demo-export-preview", full_page=False)
    page.fill('#export input[name="target"]', "acme/search")
    page.locator('#export button[value="push"]').click()
    expect(page.locator("#export-error")).to_have_text(
        "Nothing was sent: a push to GitHub needs MISSTRIAGE_GITHUB_TOKEN in the server's "
        "settings. The preview works without."
    )
