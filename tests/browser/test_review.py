"""A reviewer labels with the keyboard only; the triage summary shows exactly that."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy.engine import Engine

from app.models import Role
from tests.support.live import LiveServer
from tests.support.screens import screenshot
from tests.support.service import PASSWORD, Account
from tests.support.triage import make_triage

#: Screenshots for people to look at (the review card, the dashboard's skipped list).
SHOTS = Path(os.environ.get("MISSTRIAGE_SHOTS", "/tmp/shots-b"))


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_keyboard_labelling_and_undo(
    page: Page,
    live_server: LiveServer,
    accounts: dict[Role, Account],
    engine: Engine,
    tmp_path: Path,
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=3, per_query=2, corpus=True)
    page.goto(f"{live_server.url}/login?next=/triages/{triage.id}/review")
    page.fill('input[name="email"]', accounts[Role.REVIEWER].email)
    page.fill('input[name="password"]', PASSWORD)
    page.keyboard.press("Enter")
    expect(page.locator("#query-text")).to_have_text("how do I handle api throttling limits?")
    expect(page.locator("#where")).to_have_text(
        "not retrieved: not among the run's 3 results for this query"
    )
    expect(page.locator("#doc-text mark").first).to_be_visible()
    screenshot(page, "review")

    seen = []
    for key in ("1", "2", "3"):
        seen.append(page.locator(".card").get_attribute("data-miss"))
        page.keyboard.press(key)
        expect(page.locator("#message")).to_contain_text("Saved:")
        expect(page.locator(".card")).not_to_have_attribute("data-miss", seen[-1])
    assert len(set(seen)) == 3
    page.keyboard.press("u")
    expect(page.locator("#message")).to_contain_text("Undone:")
    expect(page.locator(".card")).to_have_attribute("data-miss", seen[-1])
    expect(page.locator("#progress")).to_contain_text("final 2 of 6")

    page.keyboard.press("o")
    page.keyboard.type("judgment looks wrong")
    page.keyboard.press("Enter")
    expect(page.locator("#message")).to_contain_text("is Other")
    page.keyboard.press("?")
    expect(page.locator("dialog#help")).to_be_visible()
    page.keyboard.press("Escape")

    page.goto(f"{live_server.url}/triages/{triage.id}")
    expect(page.locator("#closure")).to_have_text(
        "1 + 1 + 0 = 2 of 6 misses in named causes: does not close: 1 other, 3 unlabelled"
    )


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_two_reviewers_never_see_the_same_miss(
    browser: Browser,
    live_server: LiveServer,
    accounts: dict[Role, Account],
    engine: Engine,
    tmp_path: Path,
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=4, per_query=2, corpus=True)
    pages = []
    for role in (Role.REVIEWER, Role.LEAD):
        page = browser.new_context().new_page()
        page.goto(f"{live_server.url}/login?next=/triages/{triage.id}/review")
        page.fill('input[name="email"]', accounts[role].email)
        page.fill('input[name="password"]', PASSWORD)
        page.keyboard.press("Enter")
        # the page claims its miss with a POST as it loads
        expect(page.locator(".card[data-miss]")).to_be_visible()
        pages.append(page)
    shown: list[set[str]] = [set(), set()]
    labels = 0
    while True:
        active = [(i, p) for i, p in enumerate(pages) if p.locator(".card[data-miss]").count()]
        if not active:
            break
        for i, page in active:
            if not page.locator(".card[data-miss]").count():
                continue  # its queue ran dry after its previous label
            miss = page.locator(".card").get_attribute("data-miss")
            assert miss is not None
            shown[i].add(miss)
            page.keyboard.press("2")
            expect(page.locator(f'.card[data-miss="{miss}"]')).to_have_count(0)
            expect(page.locator("#message")).to_contain_text("Saved:")
            labels += 1
    assert shown[0].isdisjoint(shown[1])
    assert labels == 8
    assert len(shown[0] | shown[1]) == 8
    screenshot(pages[0], "review-done")
    pages[0].goto(f"{live_server.url}/triages/{triage.id}")
    expect(pages[0].locator("#closure")).to_have_text(
        "0 + 8 + 0 = 8 of 8 misses accounted for: the categories close"
    )


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_opening_claims_by_post_and_skips_can_be_taken_back(
    browser: Browser,
    live_server: LiveServer,
    accounts: dict[Role, Account],
    engine: Engine,
    tmp_path: Path,
) -> None:
    """A reviewer alone skips every miss: the page offers to take them back, the lead's
    dashboard lists them with their reasons, and "t" brings them back."""
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=2, corpus=True)
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    page.goto(f"{live_server.url}/login?next=/triages/{triage.id}/review")
    page.fill('input[name="email"]', accounts[Role.REVIEWER].email)
    page.fill('input[name="password"]', PASSWORD)
    page.keyboard.press("Enter")
    expect(page.locator(".card[data-miss]")).to_be_visible()
    assert any(url.endswith(f"/triages/{triage.id}/review/claim") for url in posts)
    expect(page.locator("#where")).to_have_text(
        "not retrieved: not among the run's 3 results for this query"
    )
    screenshot(page, "review-card", full_page=False, folder=SHOTS)
    for reason in ("the judgment looks wrong", "cannot tell without the PDF"):
        page.keyboard.press("s")
        page.keyboard.type(reason)
        page.keyboard.press("Enter")
        expect(page.locator("#message")).to_contain_text("Skipped")
    expect(page.locator("#take-back button")).to_have_text("t take back the 2 you skipped")
    screenshot(page, "review-take-back", full_page=False, folder=SHOTS)

    lead = browser.new_context(viewport={"width": 1280, "height": 1000}).new_page()
    lead.goto(f"{live_server.url}/login?next=/triages/{triage.id}")
    lead.fill('input[name="email"]', accounts[Role.LEAD].email)
    lead.fill('input[name="password"]', PASSWORD)
    lead.keyboard.press("Enter")
    expect(lead.locator("#skipped tbody tr[data-miss]")).to_have_count(2)
    expect(lead.locator("#skipped .reason").first).to_have_text("the judgment looks wrong")
    lead.locator("#skipped").scroll_into_view_if_needed()
    screenshot(lead, "dashboard-skipped", full_page=False, folder=SHOTS)

    page.keyboard.press("t")
    expect(page.locator("#message")).to_have_text(
        "Took back 2 skipped misses: they are on your queue again."
    )
    for _ in range(2):
        miss = page.locator(".card").get_attribute("data-miss")
        page.keyboard.press("1")
        expect(page.locator(f'.card[data-miss="{miss}"]')).to_have_count(0)
    expect(page.locator("#empty")).to_be_visible()
    expect(page.locator("#take-back")).to_have_count(0)
    lead.reload()
    expect(lead.locator("#skipped tbody tr[data-miss]")).to_have_count(0)
    expect(lead.locator("#closure")).to_have_text(
        "2 + 0 + 0 = 2 of 2 misses accounted for: the categories close"
    )
