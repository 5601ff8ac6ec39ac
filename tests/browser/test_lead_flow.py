"""A lead imports a golden set and two runs through the forms, creates a triage, sees the runs
table and the chart; after misses are labelled through the API the closure sentence changes
from "does not close" to "close"."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from app.models import Role
from tests.support.lead_runs import FIRST, HYBRID, QRELS, QUERIES
from tests.support.live import LiveServer
from tests.support.screens import screenshot
from tests.support.service import PASSWORD, Account


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_lead_flow_until_the_categories_close(
    page: Page, live_server: LiveServer, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    files = {"qrels.txt": QRELS, "queries.tsv": QUERIES, "first.trec": FIRST, "hybrid.trec": HYBRID}
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    page.goto(f"{live_server.url}/login")
    page.fill('input[name="email"]', accounts[Role.LEAD].email)
    page.fill('input[name="password"]', PASSWORD)
    page.keyboard.press("Enter")
    page.fill('input[name="name"]', "help centre")
    page.set_input_files('input[name="qrels"]', tmp_path / "qrels.txt")
    page.set_input_files('input[name="queries"]', tmp_path / "queries.tsv")
    page.get_by_role("button", name="Import", exact=True).click()
    # The import is an HTMX upload (with a progress bar): wait for the page it leads to.
    expect(page.locator("h1")).to_have_text("help centre")
    for run in ("first", "hybrid"):
        page.fill('input[name="name"]', run)
        page.set_input_files('input[name="run"]', tmp_path / f"{run}.trec")
        page.get_by_role("button", name="Import", exact=True).click()
        expect(page.locator(f'#runs-table tr[data-run="{run}"]')).to_be_visible()
    expect(page.locator("svg#depth-curve g.series")).to_have_count(2)
    screenshot(page, "lead-golden-set")
    # The depth advisor, as a lead asks for it: the cost options opened (they wait behind a
    # disclosure so the runs table leads), a reranking cost typed into the field.
    expect(page.locator('input[name="cost_ms"]')).to_be_hidden()
    page.get_by_text("Cost and averaging options").click()
    page.fill('input[name="cost_ms"]', "3.1")
    page.get_by_role("button", name="Show").click()
    expect(page.locator('#curve-cost td[data-measure="cost"]')).to_have_text(
        ["31", "62", "155", "310", "620", "3100"]
    )
    expect(page.locator('#depth-advice li[data-run="first"] .advice')).to_contain_text(
        "depth stops paying at 10"
    )
    screenshot(page, "lead-depth-advisor")

    page.locator('#runs-table tr[data-run="first"]').get_by_role(
        "button", name="Create triage"
    ).click()
    expect(page.locator("#closure")).to_contain_text("does not close: 1 unlabelled")
    triage_url = page.url
    triage_id = triage_url.rstrip("/").rsplit("/", 1)[1]

    lead = {"Authorization": f"Bearer {accounts[Role.LEAD].token}"}
    with httpx.Client(base_url=live_server.url, headers=lead, timeout=10) as api:
        for cause in ("vocabulary-mismatch",):
            miss = api.post(f"/api/v1/triages/{triage_id}/claim").json()
            api.post(
                f"/api/v1/misses/{miss['id']}/label",
                json={"category": cause, "version": miss["version"]},
            ).raise_for_status()
    page.reload()
    expect(page.locator("#closure")).to_have_text(
        "0 + 1 + 0 = 1 of 1 miss accounted for: the categories close"
    )
    screenshot(page, "dashboard")
