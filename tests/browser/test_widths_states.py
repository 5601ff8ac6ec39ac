"""The width walk (tests/browser/test_widths.py) in the states the demo reaches after its
first page view, in an order that needs one demo: the triage dashboard after a refused push
(the tracker answers 403: the reason in the export panel), after a successful push (the
exported issues' table, links on the fake tracker), after a webhook push, and after every
miss of the triage is labelled (the closure report). Each state is measured at 1440 and 768
px with the same ``layout_faults`` and photographed into ``MISSTRIAGE_SHOTS`` (or a tmp dir)."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import cast

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.support.browsing import log_in, prepared_demo
from tests.support.demo_site import DemoSite, api
from tests.support.fake_tracker import SECRET, TOKEN, Fault, Tracker, serve
from tests.support.layout import layout_faults, measure_layout

WIDTHS = (1440, 768)
HEIGHT = 900


@pytest.fixture(scope="module")
def tracker_site(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[DemoSite, Tracker]]:
    trackers = cast("Generator[tuple[str, Tracker], None, None]", serve())
    base, tracker = next(trackers)
    try:
        with pytest.MonkeyPatch.context() as env:
            # the demo's process takes its environment from this one
            env.delenv("MISSTRIAGE_PUBLIC_URL", raising=False)
            env.setenv("MISSTRIAGE_GITLAB_API_URL", base)
            env.setenv("MISSTRIAGE_GITLAB_TOKEN", TOKEN)
            env.setenv("MISSTRIAGE_WEBHOOK_SECRET", SECRET)
            env.setenv("MISSTRIAGE_ALLOW_LOCAL_NETWORK", "true")
            with prepared_demo(tmp_path_factory.mktemp("widths-states")) as site:
                yield site, tracker
    finally:
        trackers.close()


@pytest.fixture(scope="module")
def lead(browser: Browser, tracker_site: tuple[DemoSite, Tracker]) -> Iterator[BrowserContext]:
    context = log_in(browser, tracker_site[0], "lead")
    yield context
    context.close()


def _shots() -> Path:
    shots = Path(os.environ.get("MISSTRIAGE_SHOTS", "/tmp/shots26"))
    shots.mkdir(parents=True, exist_ok=True)
    return shots


def _measure(page: Page, state: str) -> list[str]:
    faults = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": HEIGHT})
        page.wait_for_timeout(100)
        page.screenshot(path=str(_shots() / f"{state}-{width}.png"), full_page=True)
        faults += [f"{state} at {width} px: {f}" for f in layout_faults(measure_layout(page))]
    return faults


def _push(page: Page, site: DemoSite, tracker: str, target: str) -> None:
    page.goto(f"{site.url}/triages/{site.triage_id}")
    panel = page.locator("#export")
    panel.locator('select[name="tracker"]').select_option(tracker)
    panel.locator('input[name="target"]').fill(target)
    panel.locator('button[value="push"]').click()
    expect(page.locator("#export-message")).to_be_visible()


def test_dashboard_states_fit(tracker_site: tuple[DemoSite, Tracker], lead: BrowserContext) -> None:
    site, tracker = tracker_site
    page = lead.new_page()
    faults: list[str] = []
    try:
        # refused: the tracker answers 403, the panel says why
        tracker.faults.append(Fault(path="/api/v4/projects", status=403, body="forbidden"))
        _push(page, site, "gitlab", "acme/search-platform-with-a-long-project-name")
        faults += _measure(page, "triage-push-refused")
        # pushed: the exported issues' table with the tracker's long URLs
        _push(page, site, "gitlab", "acme/search-platform-with-a-long-project-name")
        expect(page.locator("#exports tbody tr").first).to_be_visible()
        faults += _measure(page, "triage-pushed")
        page.reload()
        expect(page.locator("#exports tbody tr").first).to_be_visible()
        faults += _measure(page, "triage-pushed-reloaded")
        # a webhook's push
        _push(page, site, "webhook", os.environ["MISSTRIAGE_GITLAB_API_URL"] + "/hook")
        faults += _measure(page, "triage-webhook-pushed")
        # every miss labelled: the closure report
        with api(site.url, site.database, site.lead.email) as client:
            while True:
                claimed = client.post(f"/triages/{site.triage_id}/claim")
                if claimed.status_code != 200:
                    break
                miss = claimed.json()
                if not miss or "id" not in miss:
                    break
                client.post(
                    f"/misses/{miss['id']}/label",
                    json={"category": "not-indexed", "note": "", "version": miss["version"]},
                ).raise_for_status()
        page.goto(f"{site.url}/triages/{site.triage_id}")
        expect(page.locator("#closure")).to_be_visible()
        faults += _measure(page, "triage-all-labelled")
        # the double-review triage's dashboard, its disputes waiting
        page.goto(f"{site.url}/triages/{site.double_triage_id}")
        faults += _measure(page, "double-triage")
    finally:
        page.close()
    assert not faults, "\n  ".join(faults)


#: A run name as long as the form takes (200), with nowhere to break.
LONG_NAME = "bm25_" + "x" * 195
EXAMPLE_RUN = Path(__file__).resolve().parents[2] / "examples" / "helpcentre" / "runs" / "bm25.trec"


def test_a_long_unbroken_name_never_widens_a_page(
    tracker_site: tuple[DemoSite, Tracker], lead: BrowserContext
) -> None:
    """A run named with 200 characters and no break (a user's name: anything the form takes)
    on every page that shows it: the golden set's (runs table, depth-curve legend, compare
    selects), the run's, its clusters, the comparison, its triage's dashboard and backlog.
    (It once widened the golden-set page to 1,904 px at 768: a select as wide as its longest
    option, the chart's legend, the breadcrumbs.)"""
    site, _ = tracker_site
    with api(site.url, site.database, site.lead.email) as client:
        run = (
            client.post(
                f"/golden-sets/{site.golden_set_id}/runs",
                data={"name": LONG_NAME},
                files={"run": ("bm25.trec", EXAMPLE_RUN.read_bytes())},
            )
            .raise_for_status()
            .json()
        )
        triage = (
            client.post(f"/runs/{run['id']}/triages", json={"depth": 50, "k": 10})
            .raise_for_status()
            .json()
        )
    page = lead.new_page()
    faults: list[str] = []
    try:
        for state, path in (
            ("long-name-golden-set", f"/golden-sets/{site.golden_set_id}"),
            ("long-name-run", f"/runs/{run['id']}"),
            ("long-name-clusters", f"/runs/{run['id']}/clusters"),
            ("long-name-compare", f"/golden-sets/{site.golden_set_id}/compare?a=1&b={run['id']}"),
            ("long-name-triage", f"/triages/{triage['id']}"),
            ("long-name-backlog", f"/triages/{triage['id']}/backlog"),
        ):
            page.goto(f"{site.url}{path}")
            expect(page.locator("main")).to_contain_text(LONG_NAME[:40])
            faults += _measure(page, state)
    finally:
        page.close()
    assert not faults, "\n  ".join(faults)
