"""Browser helpers for the page-walking tests: a demo site prepared for every page, logged-in
browser contexts per role, opening a page of the table and running axe-core on it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize, expect

from tests.support.demo_site import (
    DemoProcess,
    DemoSite,
    add_disputes,
    add_noted_miss,
    describe,
)
from tests.support.product_pages import HTMX_BUSY, ProductPage, url_of

ROLES = ("lead", "reviewer")
#: axe-core impacts that fail a page (minor and moderate ones are reported by axe, not here).
BLOCKING = ("serious", "critical")


@contextmanager
def prepared_demo(
    folder: Path, *, disputes: bool = True, noted: bool | None = None
) -> Iterator[DemoSite]:
    """The demo, with a disputed double-review triage unless ``disputes`` is False, and a miss
    labelled with a long note unless ``noted`` is False (by default: as ``disputes``, so the
    page walks have both and a test of the demo's own queue neither; tests.support.demo_site)."""
    demo = DemoProcess(folder)
    try:
        site = describe(demo)
        if disputes:
            add_disputes(site)
        if disputes if noted is None else noted:
            add_noted_miss(site)
        yield site
    finally:
        demo.stop()


def log_in(browser: Browser, site: DemoSite, role: str, **options: Any) -> BrowserContext:
    """A browser context of its own, logged in as the demo's ``role`` (or nobody)."""
    context = browser.new_context(**options)
    if role == "anonymous":
        return context
    account = {"lead": site.lead, "reviewer": site.reviewer, "admin": site.admin}[role]
    assert account is not None
    page = context.new_page()
    page.goto(f"{site.url}/login")
    page.fill('input[name="email"]', account.email)
    page.fill('input[name="password"]', account.password)
    page.keyboard.press("Enter")
    expect(page.locator("header.top form.who")).to_contain_text(account.email)
    page.close()
    return context


def roles_of(entry: ProductPage) -> tuple[str, ...]:
    """Who opens the page in the walks: nobody for the login page, an admin and a lead (who
    must get the 403 page) for an admin's page, else the lead and the reviewer."""
    if entry.anonymous:
        return ("anonymous",)
    return ("admin", "lead") if entry.admin_only else ROLES


def expected_status(entry: ProductPage, role: str) -> int:
    if entry.admin_only and role != "admin":
        return 403
    return 403 if entry.lead_only and role == "reviewer" else entry.status


def open_page(
    context: BrowserContext,
    entry: ProductPage,
    role: str,
    site: DemoSite,
    paths: dict[str, str],
    *,
    viewport: ViewportSize | None = None,
) -> Page:
    """Open the page as ``role`` (at ``viewport``) and wait until it is ready and HTMX is
    idle; a page the role may not see must be the product's 403 page (a page shown with an
    error status of its own, such as a form's 422, is ready as its entry says)."""
    page = context.new_page()
    if viewport is not None:
        page.set_viewport_size(viewport)
    response = page.goto(url_of(entry, site, paths))
    assert response is not None
    status = expected_status(entry, role)
    assert response.status == status, f"{entry.key} as {role}: {response.status}"
    if status == entry.status:
        expect(page.locator(entry.ready).first).to_be_attached()
    else:
        expect(page.locator(f'#error[data-status="{status}"]')).to_be_visible()
    expect(page.locator(HTMX_BUSY)).to_have_count(0)
    return page


def blocking_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's violations of impact serious or critical on the page as it is now."""
    results = Axe().run(page)
    return [v for v in results.response["violations"] if v["impact"] in BLOCKING]


def describe_violations(violations: list[dict[str, Any]]) -> str:
    """What to fix: each rule with its impact, help and the elements it found."""
    lines = []
    for v in violations:
        lines.append(f"{v['id']} ({v['impact']}): {v['help']} [{v['helpUrl']}]")
        for node in v["nodes"][:10]:
            target = " ".join(str(t) for t in node["target"])
            lines.append(f"    {target}: {node.get('failureSummary', '').replace(chr(10), ' ')}")
            lines.append(f"      {node['html'][:200]}")
        if len(v["nodes"]) > 10:
            lines.append(f"    ... and {len(v['nodes']) - 10} more")
    return "\n".join(lines)
