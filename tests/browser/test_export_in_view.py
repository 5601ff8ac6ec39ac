"""A push from the dashboard, in a browser: the export panel is swapped in place with HTMX, so
the sentence saying what happened is in view, the form keeps what was typed, and the issue's
links name the port the demo was started on (not 8000)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.support.browsing import log_in, prepared_demo
from tests.support.demo_site import api
from tests.support.fake_tracker import TOKEN, serve


def test_a_push_answers_in_view_with_links_on_the_demos_port(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trackers = serve()
    base, tracker = next(trackers)
    # the demo's process takes its environment from this one (tests.support.demo_site)
    monkeypatch.delenv("MISSTRIAGE_PUBLIC_URL", raising=False)
    monkeypatch.setenv("MISSTRIAGE_GITLAB_API_URL", base)
    monkeypatch.setenv("MISSTRIAGE_GITLAB_TOKEN", TOKEN)
    monkeypatch.setenv("MISSTRIAGE_ALLOW_LOCAL_NETWORK", "true")
    try:
        with prepared_demo(tmp_path, disputes=False) as site:
            # one labelled miss: one cause with a miss, so one issue to create
            with api(site.url, site.database, site.lead.email) as lead:
                miss = lead.post(f"/triages/{site.triage_id}/claim").raise_for_status().json()
                lead.post(
                    f"/misses/{miss['id']}/label",
                    json={"category": "not-indexed", "note": "", "version": miss["version"]},
                ).raise_for_status()
            context = log_in(browser, site, "lead", viewport={"width": 1280, "height": 800})
            page = context.new_page()
            page.goto(f"{site.url}/triages/{site.triage_id}")
            panel = page.locator("#export")
            panel.locator('select[name="tracker"]').select_option("gitlab")
            panel.locator('input[name="target"]').fill("acme/search")
            panel.locator('button[value="push"]').click()
            message = page.locator("#export-message")
            expect(message).to_have_text(
                re.compile(r"^Created 1 issue on GitLab acme/search, updated 0, 0 unchanged\.$")
            )
            expect(message).to_be_in_viewport()
            expect(page.locator('#export select[name="tracker"]')).to_have_value("gitlab")
            expect(page.locator('#export input[name="target"]')).to_have_value("acme/search")
            expect(page.locator("#exports tbody tr")).to_have_count(1)
            shots = Path(os.environ.get("MISSTRIAGE_SHOTS", tmp_path))
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / "export-after-push.png"))
            # the issue links back to the demo on its own port
            (body,) = [issue["description"] for issue in tracker.issues.values()]
            assert f"{site.url}/" in body
            assert "127.0.0.1:8000" not in body
            context.close()
    finally:
        trackers.close()
