"""axe-core (axe-playwright-python, which bundles it) on every page of the product, as the
lead and as a reviewer, as the page loads and after its HTMX swap: no serious or critical
violation. A page a reviewer may not see is checked as the 403 page it answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext

from tests.support.browsing import (
    ROLES,
    blocking_violations,
    describe_violations,
    expected_status,
    log_in,
    open_page,
    prepared_demo,
    roles_of,
)
from tests.support.demo_site import DemoSite
from tests.support.product_pages import NOT_PAGES, PAGES, ProductPage, page_routes

#: Known violations that live in files another branch of issue 18 restyles (app.css, the
#: review templates): (page key, role, mode) -> why. Remove a line once the restyle is in.
KNOWN: dict[tuple[str, str, str], str] = {}


def _checks() -> Iterator[object]:
    for entry in PAGES:
        for role in roles_of(entry):
            modes = ["full"]
            if entry.swap is not None and expected_status(entry, role) == 200:
                modes.append("swap")
            for mode in modes:
                reason = KNOWN.get((entry.key, role, mode))
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                yield pytest.param(entry, role, mode, id=f"{entry.key}-{role}-{mode}", marks=marks)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoSite]:
    with prepared_demo(tmp_path_factory.mktemp("a11y-demo")) as prepared:
        yield prepared


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return page_routes(tmp_path_factory.mktemp("a11y-routes"))


@pytest.fixture(scope="module")
def contexts(browser: Browser, site: DemoSite) -> Iterator[dict[str, BrowserContext]]:
    made = {role: log_in(browser, site, role) for role in (*ROLES, "admin", "anonymous")}
    yield made
    for context in made.values():
        context.close()


@pytest.mark.parametrize(("entry", "role", "mode"), list(_checks()))
def test_no_serious_or_critical_violation(
    entry: ProductPage,
    role: str,
    mode: str,
    site: DemoSite,
    paths: dict[str, str],
    contexts: dict[str, BrowserContext],
) -> None:
    page = open_page(contexts[role], entry, role, site, paths)
    try:
        if mode == "swap":
            assert entry.swap is not None
            entry.swap(page)
        violations = blocking_violations(page)
        assert not violations, (
            f"{entry.key} as {role} ({mode}, {page.url}):\n{describe_violations(violations)}"
        )
    finally:
        page.close()


def test_every_page_route_is_checked(tmp_path: Path) -> None:
    """A GET route of the HTML face is a page of the table or a named non-page; a page of
    the table names a route that exists."""
    routes = page_routes(tmp_path)
    checked = {entry.route for entry in PAGES if entry.route}
    unchecked = set(routes) - checked - set(NOT_PAGES)
    assert not unchecked, f"pages without an accessibility and width check: {sorted(unchecked)}"
    gone = {e.route for e in PAGES if e.route} - set(routes)
    assert not gone, f"the table names routes the app does not have: {sorted(gone)}"
    assert set(NOT_PAGES) <= set(routes)


def test_what_is_not_a_page_answers_no_page(
    site: DemoSite, paths: dict[str, str], contexts: dict[str, BrowserContext]
) -> None:
    """The non-pages of NOT_PAGES really answer a redirect, plain text or a fragment of a
    page (the golden set's jobs panel: no page of its own)."""
    request = contexts["lead"].request
    for name, answer in NOT_PAGES.items():
        path = paths[name].replace("{import_id}", "nothing").replace("{golden_set_id}", "1")
        response = request.get(site.url + path, max_redirects=0)
        if isinstance(answer, int):
            assert response.status == answer, name
        else:
            assert response.status == httpx.codes.OK, name
            assert response.headers["content-type"].startswith(answer), name
            if answer == "text/html":
                assert "<html" not in response.text(), f"{name} answers a whole page"
