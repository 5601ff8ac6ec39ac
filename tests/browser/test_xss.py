"""In a real browser, pages full of script payloads run none of them: no dialog opens and the
Content-Security-Policy has nothing of ours to block."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import ConsoleMessage, Dialog, Page, expect
from sqlalchemy.engine import Engine

from app.main import create_app
from app.models import Role
from app.settings import Settings
from app.web import copy
from tests.support.live import LiveServer
from tests.support.payloads import CAUSE, IMG, SCRIPT, SVG, seed
from tests.support.service import PASSWORD, Account


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_payloads_never_run_in_the_browser(
    page: Page,
    live_server: LiveServer,
    settings: Settings,
    engine: Engine,
    accounts: dict[Role, Account],
) -> None:
    with TestClient(create_app(settings, engine)) as api:
        seeded = seed(api, engine, accounts[Role.LEAD])
    dialogs: list[str] = []
    blocked: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    def on_console(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            blocked.append(message.text)

    page.on("dialog", on_dialog)
    page.on("console", on_console)
    first, second = seeded.triages
    page.goto(f"{live_server.url}/login?next=/triages/{second}/review")
    page.fill('input[name="email"]', accounts[Role.LEAD].email)
    page.fill('input[name="password"]', PASSWORD)
    page.keyboard.press("Enter")
    # The review page: the query, the document and the earlier label's note, all as text.
    expect(page.locator("#query-text")).to_have_text(f"{SCRIPT} {IMG} rate limits")
    expect(page.locator("#doc-title")).to_contain_text(SVG)
    expect(page.locator("#suggestion")).to_contain_text(SCRIPT)
    # Label with a payload cause and note through the keyboard flow's form: the next card
    # swaps in (HTMX), and the message names the cause as text.
    page.keyboard.press("o")
    page.keyboard.type(IMG)
    page.keyboard.press("Enter")
    expect(page.locator("#message")).to_contain_text("is Other")
    for url in (
        f"/triages/{first}",
        f"/triages/{first}/backlog",
        f"/misses/{seeded.misses[0]}",
        f"/golden-sets/{seeded.golden}",
        f"/runs/{seeded.runs[0]}",
        f"/golden-sets/{seeded.golden}/compare?a={seeded.runs[0]}&b={seeded.runs[1]}&depth=1",
    ):
        page.goto(f"{live_server.url}{url}")
        expect(page.locator("h1")).to_be_visible()
    # the comparison names a golden set's own cause as words (app/web/copy.py's label), as text
    expect(page.locator("body")).to_contain_text(copy.label(CAUSE))
    page.mouse.move(10, 10)  # hover handlers (onmouseover) would fire on the way
    page.mouse.move(400, 300)
    assert dialogs == []
    assert blocked == []
    assert page.evaluate("document.querySelectorAll('img, iframe, script:not([src])').length") == 0
