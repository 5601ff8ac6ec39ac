"""Double review in Chromium, as a team would run it: two reviewers in two browser contexts
label every miss of an overlap-2 triage with the keyboard, blind to each other; the miss one
of them could not tell goes to the lead's adjudication page; the dashboard's closure sentence
says what the final labels rest on."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy.engine import Engine

from app.models import Role
from app.models.triage_public import Overlap
from tests.support.fits import LAPTOP, assert_fits
from tests.support.live import LiveServer
from tests.support.service import PASSWORD, Account
from tests.support.triage import make_people, make_triage


def _log_in(browser: Browser, server: LiveServer, email: str, password: str, to: str) -> Page:
    page = browser.new_context().new_page()
    page.goto(f"{server.url}/login?next={to}")
    page.fill('input[name="email"]', email)
    page.fill('input[name="password"]', password)
    page.keyboard.press("Enter")
    expect(page.locator("#review:not(.loading), #closure").first).to_be_visible()
    return page


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_two_reviewers_blind_then_the_lead_adjudicates(
    browser: Browser,
    live_server: LiveServer,
    accounts: dict[Role, Account],
    engine: Engine,
    tmp_path: Path,
) -> None:
    _, _, triage = make_triage(
        engine, tmp_path, queries=1, per_query=2, corpus=True, overlap=Overlap(reviewers=2)
    )
    make_people(engine, ("bob", Role.REVIEWER))
    review = f"/triages/{triage.id}/review"
    ann = _log_in(browser, live_server, accounts[Role.REVIEWER].email, PASSWORD, review)
    first = ann.locator(".card").get_attribute("data-miss")
    ann.keyboard.press("1")
    expect(ann.locator("#message")).to_contain_text("It waits for another reviewer's label.")
    expect(ann.locator(".card")).not_to_have_attribute("data-miss", first or "")
    ann.keyboard.press("1")
    expect(ann.locator("#empty")).to_be_visible()  # she never sees a miss twice

    bob = _log_in(browser, live_server, "bob@example.com", "long enough", review)
    expect(bob.locator(".card")).to_have_attribute("data-miss", first or "")
    expect(bob.locator("#suggestion")).to_have_count(0)
    expect(bob.locator("#cant-tell")).to_be_visible()
    # Blind: the miss's page shows Bob none of Ann's events.
    bob.goto(f"{live_server.url}/misses/{first}")
    expect(bob.locator("#events td.empty")).to_have_text("No event yet.")
    bob.goto(f"{live_server.url}{review}")
    expect(bob.locator(".card")).to_have_attribute("data-miss", first or "")
    bob.keyboard.press("c")  # can't tell: to adjudication
    expect(bob.locator("#message")).to_have_text(
        "Saved: q0 / d0-1 is Can't tell. The labels differ: it goes to adjudication."
    )
    expect(bob.locator(".card")).not_to_have_attribute("data-miss", first or "")
    bob.keyboard.press("1")  # agrees with Ann on the second miss
    expect(bob.locator("#empty")).to_be_visible()

    lead = _log_in(
        browser, live_server, accounts[Role.LEAD].email, PASSWORD, f"/triages/{triage.id}"
    )
    lead.locator("#adjudicate").click()
    expect(lead.locator(".card")).to_have_attribute("data-miss", first or "")
    expect(lead.locator("#labels tbody tr")).to_have_count(2)
    expect(lead.locator('#labels td.cause[data-cause="cant-tell"]')).to_have_text("Can't tell")
    # the adjudication card fits a laptop screen: the labels beside the query, the evidence,
    # the keys, none under another
    lead.set_viewport_size(LAPTOP)
    assert_fits(lead, ["query", "document text", "what ranked first", "reviewers' labels"])
    lead.keyboard.press("3")
    expect(lead.locator("#message")).to_contain_text("Decided:")
    expect(lead.locator("#empty")).to_be_visible()
    lead.goto(f"{live_server.url}/triages/{triage.id}")
    expect(lead.locator("#closure")).to_have_text(
        "1 + 0 + 1 = 2 of 2 misses accounted for: the categories close; 1 agreed, 1 adjudicated; "
        "Fleiss' kappa n/a (every label is the same cause: chance agreement is 1, the "
        "coefficient is 0/0)"
    )
