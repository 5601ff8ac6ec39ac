"""A reviewer labels with the keyboard only; the triage summary shows exactly that."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy.engine import Engine

from app.models import Role
from tests.browser.conftest import screenshot
from tests.conftest import PASSWORD, Account
from tests.live import LiveServer
from tests.services.helpers import make_triage


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
    expect(page.locator("#where")).to_have_text("not retrieved in the top 3")
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
    expect(page.locator("#progress")).to_contain_text("labelled 2 of 6")

    page.keyboard.press("o")
    page.keyboard.type("judgment looks wrong")
    page.keyboard.press("Enter")
    expect(page.locator("#message")).to_contain_text("is other")
    page.keyboard.press("?")
    expect(page.locator("dialog#help")).to_be_visible()
    page.keyboard.press("Escape")

    page.goto(f"{live_server.url}/triages/{triage.id}")
    expect(page.locator("#closure")).to_have_text(
        "1 + 1 + 0 = 2 of 6 misses in named causes: does not close: 1 other, 3 unlabelled"
    )
