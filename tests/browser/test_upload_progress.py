"""In Chromium: a long run import shows its upload progress, then the server's own account of
its reading, then the page saying what was imported."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, Request, Response, expect

from app.models import Role
from tests.support.live import LiveServer
from tests.support.screens import shot
from tests.support.service import PASSWORD, Account

QUERIES, PER_QUERY = 200, 3000  # a 19 MB run: long enough to watch
SENTENCE = re.compile(
    r"The server (is reading the file: [\d.,]+ MB of [\d.,]+ MB \(\d+%\) so far"
    r"|has read the file; ranking and saving it|has finished with the file)\."
)
#: What the server says before its reading starts (the upload is complete, the form's
#: multipart body is still being parsed and saved): true, and no account of progress yet.
NOT_YET = "The server is importing the file."


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_long_import_shows_the_server_progress(
    page: Page, live_server: LiveServer, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"q{i} 0 d{i}_7 1\n" for i in range(QUERIES)))
    run = tmp_path / "big.trec"
    with run.open("w") as out:
        for q in range(QUERIES):
            out.writelines(
                f"q{q} Q0 d{q}_{r} {r + 1} {10000 - r}.5 big\n" for r in range(PER_QUERY)
            )
    page.goto(f"{live_server.url}/login")
    page.fill('input[name="email"]', accounts[Role.LEAD].email)
    page.fill('input[name="password"]', PASSWORD)
    page.click('button[type="submit"]')
    page.fill('input[name="name"]', "long")
    page.set_input_files('input[name="qrels"]', qrels)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("h1")).to_have_text("long")

    # What the server says of its progress, as the page receives it (the page itself is
    # replaced by the next one when the import ends, so the answers are collected here).
    # The questions are counted as the page sends them: an answer still on its way when
    # the import's own answer replaces the page is dropped with it (a fast import).
    said: list[str] = []
    questions: list[str] = []

    def is_progress(url: str) -> bool:
        return "/imports/" in url and url.endswith("/progress")

    def ask(request: Request) -> None:
        if is_progress(request.url):
            questions.append(request.url)

    def collect(response: Response) -> None:
        if is_progress(response.url):
            said.append(response.text())

    page.on("request", ask)
    page.on("response", collect)
    progress_url = page.locator('#main form[action$="/runs"] [data-upload-progress]').get_attribute(
        "data-progress-url"
    )
    assert progress_url
    page.fill('#main form[action$="/runs"] input[name="name"]', "big")
    page.set_input_files('input[name="run"]', run)
    page.get_by_role("button", name="Import", exact=True).click()
    progress = page.locator("[data-upload-progress]")
    expect(progress).to_be_visible()
    expect(progress.locator(".upload-status")).to_contain_text("Uploaded 18.4 MB.", timeout=60_000)
    shot(page, "progress-server")
    expect(page.locator("#flash [data-flash]")).to_have_text(
        f"Run `big` imported: {QUERIES} queries, {QUERIES * PER_QUERY:,} lines.", timeout=60_000
    )
    expect(progress).to_be_hidden()
    assert questions, "the page never asked the server how far it was"
    assert all(url.endswith(progress_url) for url in questions), questions
    # Every answer is true; which ones the page saw depends on timing (it asks once a second,
    # and a fast server reads and saves the file between two questions).
    assert all(SENTENCE.fullmatch(text) or text == NOT_YET for text in said), said
    # The server tracked this very import (the form's id reached it): asked now, it has an
    # account of it, which it only has for an import it read.
    asked = page.request.get(live_server.url + progress_url)
    assert asked.text() == "The server has finished with the file."
