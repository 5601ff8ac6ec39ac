"""The demo played through with the keyboard alone: a reviewer logs in and labels every miss
of the demo's triage with the cause keys, then the lead logs in and reads that the categories
close. Nothing is clicked or filled; after every swap the focus is on an element of the page,
never lost to <body>."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.support.browsing import prepared_demo
from tests.support.demo_site import Account
from tests.support.product_pages import swap

VIEWPORT = {"width": 1280, "height": 800}
#: The demo's triage queues 23 misses; a bound, so a queue that never empties fails.
MOST_CARDS = 40


def _focus_kept(page: Page) -> str:
    """What has the focus once the swap has settled (app.js places it on htmx:afterSettle,
    a moment after the new card is visible); fails when nothing has it within 5 s (the focus
    fell back to <body>)."""
    focused = (
        "() => { const e = document.activeElement;"
        " return !e || e === document.body ? null : e.tagName.toLowerCase() + '#' + e.id; }"
    )
    try:
        page.wait_for_function(focused, timeout=5_000)
    except PlaywrightTimeout:
        raise AssertionError(f"the focus was lost on {page.url}") from None
    return str(page.evaluate(focused))


def _tab_to(page: Page, selector: str) -> None:
    """Press Tab until the element ``selector`` has the focus (as a keyboard user would)."""
    for _ in range(30):
        if page.evaluate("s => document.activeElement?.matches(s) ?? false", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector} on {page.url}")


def _log_in(page: Page, url: str, account: Account) -> None:
    page.goto(url)
    _tab_to(page, 'input[name="email"]')
    page.keyboard.type(account.email)
    _tab_to(page, 'input[name="password"]')
    page.keyboard.type(account.password)
    page.keyboard.press("Enter")


def test_the_demo_closes_with_the_keyboard_alone(browser: Browser, tmp_path: Path) -> None:
    with prepared_demo(tmp_path, disputes=False) as site:
        reviewer = browser.new_context(viewport=VIEWPORT).new_page()
        _log_in(reviewer, f"{site.url}/login?next=/triages/{site.triage_id}/review", site.reviewer)
        expect(reviewer.locator("#review .card[data-miss]")).to_be_visible()
        _focus_kept(reviewer)  # the card arrived by a swap, and the focus is on it
        keys = {
            str(button.get_attribute("value")): str(button.get_attribute("data-key"))
            for button in reviewer.locator("#review form.actions button[data-key]").all()
            if str(button.get_attribute("data-key")).isdigit()
        }
        assert len(keys) == 3, keys
        labelled = 0
        while not reviewer.locator("#empty").count():
            assert labelled < MOST_CARDS, "the queue never emptied"
            # the cause the evidence points to, by its own key (the demo's misses all have one)
            # (its identifier: data-term where the cause is shown by its human name)
            shown = reviewer.locator("#review #hint")
            hint = shown.get_attribute("data-term") or shown.inner_text()
            swap(reviewer, "#review", lambda key=keys[hint]: reviewer.keyboard.press(key))
            expect(reviewer.locator("#message")).to_contain_text("Saved: ")
            _focus_kept(reviewer)
            labelled += 1
        assert labelled == 23
        expect(reviewer.locator("#empty h1")).to_be_focused()
        reviewer.context.close()

        lead = browser.new_context(viewport=VIEWPORT).new_page()
        _log_in(lead, f"{site.url}/login?next=/triages/{site.triage_id}", site.lead)
        expect(lead.locator("#closure")).to_contain_text(
            f"{labelled} of {labelled} misses accounted for: the categories close"
        )
        lead.context.close()
