"""Every page of the product, one line each: the accessibility and width tests walk this
table, and a test compares it with the app's GET page routes, so a new page without a check
fails. Each line names its route; its URL is built from the route's own path with the demo's
ids, so a route that moves keeps its check."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from fastapi.testclient import TestClient
from playwright.sync_api import Page, expect

from app.main import create_app
from tests.support.demo_site import DemoSite
from tests.support.routes import routes
from tests.support.service import make_settings

#: What HTMX is busy with: a swap is over when none of these is left.
HTMX_BUSY = ".htmx-request, .htmx-swapping, .htmx-settling, .htmx-added"


def swap(page: Page, replaced: str, action: Callable[[], None]) -> None:
    """Run ``action`` and wait until HTMX has replaced the elements ``replaced`` selects
    (marked first, so the wait ends on the new ones) and settled."""
    marked = page.evaluate(
        "s => { const found = document.querySelectorAll(s);"
        " found.forEach(e => { e.dataset.stale = '1'; }); return found.length; }",
        replaced,
    )
    assert marked, f"nothing matches {replaced!r} before the swap"
    action()
    expect(page.locator("[data-stale]")).to_have_count(0)
    expect(page.locator(HTMX_BUSY)).to_have_count(0)


def _type_search(page: Page) -> None:
    page.locator("#query-search").focus()
    swap(page, "#main > *", lambda: page.keyboard.type("rate"))
    expect(page.locator("#query-search")).to_have_value("rate")
    expect(page.locator("#query-search")).to_be_focused()


def _cluster_ks(page: Page) -> None:
    page.locator("#clusters-k").focus()
    page.keyboard.press("Control+a")
    page.keyboard.type("5,10")
    swap(page, "#main > *", lambda: page.keyboard.press("Enter"))
    expect(page.locator("#clusters-k")).to_be_focused()


def _change_with_keys(field: str) -> Callable[[Page], None]:
    """Focus the select ``field`` and move to its next option with the arrow key: the
    filter swaps the page in and the select keeps the focus."""

    def change(page: Page) -> None:
        page.locator(field).focus()
        swap(page, "#main > *", lambda: page.keyboard.press("ArrowDown"))
        expect(page.locator(field)).to_be_focused()

    return change


def _label_and_next(page: Page) -> None:
    swap(page, "#review", lambda: page.keyboard.press("1"))
    expect(page.locator("#message")).to_contain_text("Saved")


def _decide(page: Page) -> None:
    swap(page, "#review", lambda: page.keyboard.press("1"))
    expect(page.locator("#message")).to_contain_text("Decided")


@dataclass(frozen=True)
class ProductPage:
    """One page: ``route`` (its name), the ids to fill its path with (``site`` fields by
    path parameter, overridden by ``ids``), a query string, who may see it, the element
    that says it is ready, and an HTMX swap to check it after, when the page has one."""

    key: str
    route: str
    query: str = ""
    ids: dict[str, str] = field(default_factory=dict)
    lead_only: bool = False
    admin_only: bool = False
    anonymous: bool = False
    status: int = 200
    ready: str = "#main"
    swap: Callable[[Page], None] | None = None

    def path(self, site: DemoSite, route_paths: dict[str, str]) -> str:
        if self.route not in route_paths:
            raise LookupError(self.route)
        values = {
            "golden_set_id": site.golden_set_id,
            "run_id": site.run_id,
            "triage_id": site.triage_id,
            "miss_id": site.miss_id,
            "qid": site.qid,
            "doc_id": site.doc_id,
            "double_triage_id": site.double_triage_id,
            "other_run_id": site.other_run_id,
            "noted_miss_id": site.noted_miss_id,
            "detector_run_id": site.detector_run_id,
            "name": site.series,
            "carried_triage_id": site.carried_triage_id,
        }

        def fill(match: re.Match[str]) -> str:
            name = match.group(1)
            chosen = self.ids.get(name, name)
            if chosen not in values:
                raise KeyError(f"{self.route}: no demo value for the path parameter {name!r}")
            return quote(str(values[chosen]), safe="")

        path = re.sub(r"\{(\w+)(?::\w+)?\}", fill, route_paths[self.route])
        encoded = {key: quote(str(value), safe="") for key, value in values.items()}
        return f"{path}?{self.query.format(**encoded)}" if self.query else path


#: Every page: adding a page to the product is one line here.
PAGES = [
    ProductPage("golden-sets", "golden_sets_page"),
    ProductPage("golden-set", "golden_set_page", ready="#runs-table"),
    # the controls with an error message (k above depth) under one of them
    ProductPage(
        "golden-set-k-above-depth", "golden_set_page", query="k=100&depth=10", status=422,
        ready=".field-error",
    ),
    ProductPage("run", "run_page", swap=_type_search),
    ProductPage("run-clusters", "run_clusters_page", swap=_cluster_ks),
    ProductPage("series", "series_page", ready="#series-table"),
    # the same page for a name a browser would drop as a path segment (".", "..")
    ProductPage(
        "series-by-name", "series_page_by_parameter", query="name={name}", ready="#series-table"
    ),
    ProductPage("compare", "compare_page", query="a={run_id}&b={other_run_id}"),
    ProductPage("triage", "triage_page", ready="#closure"),
    # commit 3's triage: labels carried from commit 2's, and the lead's form to send them back
    ProductPage(
        "triage-carried", "triage_page", ids={"triage_id": "carried_triage_id"}, ready="#carried"
    ),
    ProductPage(
        "export-preview", "export_preview", query="tracker=github&target=acme%2Fsearch",
        lead_only=True,
    ),
    ProductPage("backlog", "backlog_page", swap=_change_with_keys("#filter-cause")),
    ProductPage(
        "backlog-filtered", "backlog_page", query="state=open&per_page=5",
        swap=_change_with_keys("#filter-sort"),
    ),
    ProductPage("miss", "miss_page"),
    # a miss whose audit trail has a long note (tests.support.demo_site.NOTE)
    ProductPage("miss-noted", "miss_page", ids={"miss_id": "noted_miss_id"}),
    ProductPage("review", "review_page", ready="#review .card[data-miss]", swap=_label_and_next),
    ProductPage(
        "adjudication", "adjudication_page", ids={"triage_id": "double_triage_id"},
        lead_only=True, ready="#review .card[data-miss]", swap=_decide,
    ),
    ProductPage("tokens", "tokens_page"),
    ProductPage("account", "account_page"),
    ProductPage("users", "users_page", admin_only=True),
    ProductPage("login", "login_page", anonymous=True),
    ProductPage("query", "query_page"),
    ProductPage("query-by-id", "query_page_by_parameter", query="qid={qid}"),
    ProductPage("document", "document_page"),
    ProductPage("document-by-id", "document_page_by_parameter", query="doc_id={doc_id}"),
    ProductPage("detector-run", "detector_run_page", ready="#thresholds"),
    ProductPage("pair-review", "pair_review_page", ready="#review"),
    # Not a route: any unknown address answers the product's 404 page.
    ProductPage("not-found", "", status=404, ready="#error"),
]  # fmt: skip

#: The GET routes of the HTML face that are not pages, and what they answer instead.
NOT_PAGES = {
    "home": 303,  # a redirect to the golden sets
    "import_progress": "text/plain",  # the upload form's status line
    # the golden-set page's jobs panel, polled while a job runs (checked on that page)
    "jobs_panel": "text/html",
    # the form after an admin's password reset; without one pending, a redirect to the account
    # page (tests/web/test_account_pages.py shows the form to a user who must use it)
    "set_password_page": 303,
}


def page_routes(tmp: Path) -> dict[str, str]:
    """The app's GET routes of its HTML face (app.web): name to full path."""
    app = create_app(make_settings(f"sqlite:///{tmp / 'routes.db'}"))
    return {
        route.name: route.path
        for route in routes(TestClient(app))
        if "GET" in route.methods and route.route.endpoint.__module__.startswith("app.web")
    }


def url_of(entry: ProductPage, site: DemoSite, route_paths: dict[str, str]) -> str:
    if not entry.route:
        return f"{site.url}/no-such-page"
    return site.url + entry.path(site, route_paths)
