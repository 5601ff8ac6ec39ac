"""A lead logs in, imports a golden set and a run through the forms, and creates a triage."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from app.models import Role
from tests.support.live import LiveServer
from tests.support.samples import QRELS, QUERIES, RUN
from tests.support.screens import screenshot
from tests.support.service import PASSWORD, Account


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_lead_imports_through_the_forms(
    page: Page, live_server: LiveServer, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    files = {name: tmp_path / name for name in ("qrels.txt", "queries.jsonl", "bm25.trec")}
    for path, content in zip(files.values(), (QRELS, QUERIES, RUN), strict=True):
        path.write_text(content)

    page.goto(f"{live_server.url}/golden-sets")
    expect(page).to_have_url(f"{live_server.url}/login?next=/golden-sets")  # "/" kept readable
    page.fill('input[name="email"]', accounts[Role.LEAD].email)
    page.fill('input[name="password"]', PASSWORD)
    page.click('button[type="submit"]')
    expect(page.locator("h1")).to_have_text("Golden sets")

    page.fill('input[name="name"]', "help centre")
    page.set_input_files('input[name="qrels"]', files["qrels.txt"])
    page.set_input_files('input[name="queries"]', files["queries.jsonl"])
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("h1")).to_have_text("help centre")

    page.fill('input[name="name"]', "bm25")
    page.set_input_files('input[name="run"]', files["bm25.trec"])
    page.get_by_role("button", name="Import", exact=True).click()
    row = page.locator('#runs-table tr[data-run="bm25"]')
    expect(row.locator('td[data-measure="recall_depth"]')).to_have_text("0.5000")
    expect(row.locator('td[data-measure="misses"]')).to_have_text("1")
    screenshot(page, "golden-set")

    row.locator("text=Create triage").click()
    expect(page.locator("#closure")).to_have_text(
        "0 + 0 + 0 = 0 of 1 miss in named causes: does not close: 1 unlabelled"
    )
    expect(page.locator("#residue tbody tr")).to_have_count(1)
    screenshot(page, "triage")
