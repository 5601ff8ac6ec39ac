"""A detection over a large corpus from the golden-set page in a browser: the lead's "Find
duplicates" queues a background job, the page's jobs panel shows its step and progress as
the service runs it (polled, nothing reloaded by hand), then links the detector run it
made. Screenshots under var/screenshots/ (or MISSTRIAGE_SHOTS)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.models import Role
from app.services.imports import golden_sets
from tests.support.dupe_corpus import make_corpus
from tests.support.live import LiveServer
from tests.support.screens import screenshot
from tests.support.service import PASSWORD, TEST_SECRET, Account

SHOTS = Path(os.environ["MISSTRIAGE_SHOTS"]) if "MISSTRIAGE_SHOTS" in os.environ else None
DOCUMENTS = 12_000


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    live = LiveServer(
        database_url,
        tmp_path,
        secret=TEST_SECRET,
        env={"MISSTRIAGE_JOB_DOCUMENTS": "1000"},
    )
    yield live
    live.stop()


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_detection_job_shows_its_progress_and_its_run(
    browser: Browser,
    engine: Engine,
    server: LiveServer,
    accounts: dict[Role, Account],
    tmp_path: Path,
) -> None:
    docs = make_corpus(DOCUMENTS, copy_share=0.05, seed=9, words=60).docs[:DOCUMENTS]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (tmp_path / "qrels.tsv").write_text(f"q1\t0\t{docs[0]['_id']}\t1\n")
    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(
            session=session,
            name="large",
            qrels=tmp_path / "qrels.tsv",
            corpus=tmp_path / "corpus.jsonl",
        )
    page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.goto(f"{server.url}/login?next=/golden-sets/{golden.id}")
    page.fill('input[name="email"]', accounts[Role.LEAD].email)
    page.fill('input[name="password"]', PASSWORD)
    page.keyboard.press("Enter")
    page.locator("#find-duplicates button[type=submit]").click()
    expect(page.locator(".flash, [role=status]").first).to_contain_text("in the background")
    row = page.locator("#jobs-table tr[data-job]").first
    expect(row).to_be_visible()
    # running (on a busy machine, maybe done by the page's first look)
    expect(row).to_have_attribute("data-state", re.compile("running|done"), timeout=30_000)
    screenshot(page, "detection-job-running", folder=SHOTS)
    # the panel polls: the run's link appears without a reload
    expect(row).to_have_attribute("data-state", "done", timeout=120_000)
    expect(row).to_contain_text(re.compile(r"writing the pairs: [\d,]+ of [\d,]+"))
    link = row.locator("a", has_text="detector run #")
    expect(link).to_be_visible()
    screenshot(page, "detection-job-done", folder=SHOTS)
    link.click()
    expect(page.locator("h1")).to_contain_text("Detector run")
