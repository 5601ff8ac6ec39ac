"""Every page of the product at 1440 and 768 px, as a new user sees it (tests.support.layout):
no page scrolls sideways (``scrollWidth`` of the document within the viewport); no field is
squeezed under 8rem, no button clips its text, no control sticks out of its panel or card; a
row of filters keeps its controls in line (a field's error message included); a table's own
scroll box neither hides columns the page has room for nor cuts a row in half. The help
dialogs have no empty band. The lead sees every page (the login page is seen logged out)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.support.browsing import log_in, open_page, prepared_demo, roles_of
from tests.support.demo_site import DemoSite
from tests.support.layout import dialog_bands, layout_faults, measure_layout
from tests.support.product_pages import PAGES, ProductPage, page_routes

WIDTHS = (1440, 768)
HEIGHT = 900
#: The most empty space (px) a dialog may leave inside its border above its heading or under
#: its last button: its padding, not a margin on top of it.
DIALOG_BAND = 20


def _checks() -> Iterator[object]:
    for entry in PAGES:
        for width in WIDTHS:
            yield pytest.param(entry, width, id=f"{entry.key}-{width}")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoSite]:
    with prepared_demo(tmp_path_factory.mktemp("widths-demo")) as prepared:
        yield prepared


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return page_routes(tmp_path_factory.mktemp("widths-routes"))


@pytest.fixture(scope="module")
def contexts(browser: Browser, site: DemoSite) -> Iterator[dict[str, BrowserContext]]:
    made = {role: log_in(browser, site, role) for role in ("lead", "admin", "anonymous")}
    yield made
    for context in made.values():
        context.close()


@pytest.mark.parametrize(("entry", "width"), list(_checks()))
def test_layout_fits(
    entry: ProductPage,
    width: int,
    site: DemoSite,
    paths: dict[str, str],
    contexts: dict[str, BrowserContext],
) -> None:
    role = roles_of(entry)[0]
    page = open_page(
        contexts[role], entry, role, site, paths, viewport={"width": width, "height": HEIGHT}
    )
    try:
        faults = layout_faults(measure_layout(page))
        assert not faults, f"{entry.key} at {width} px:\n  " + "\n  ".join(faults)
    finally:
        page.close()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("key", ["review", "adjudication"])
def test_help_dialog_has_no_empty_band(
    key: str,
    width: int,
    site: DemoSite,
    paths: dict[str, str],
    contexts: dict[str, BrowserContext],
) -> None:
    entry = next(e for e in PAGES if e.key == key)
    page = open_page(
        contexts["lead"], entry, "lead", site, paths, viewport={"width": width, "height": HEIGHT}
    )
    try:
        page.locator('[data-opens="help"]').click()
        expect(page.locator("dialog#help")).to_be_visible()
        bands = dialog_bands(page, "dialog#help")
        said = f"{key} at {width} px: the help dialog leaves {bands} px empty at its top and foot"
        assert bands["top"] <= DIALOG_BAND, said
        assert bands["bottom"] <= DIALOG_BAND, said
    finally:
        page.close()


#: The most space (px) between the adjudication card's query and the document under it, and
#: the least between the reviewers' labels and what the run ranked first under them.
UNDER_QUERY = 24
UNDER_LABELS = 8


def test_adjudication_card_has_no_blank_band(
    site: DemoSite, paths: dict[str, str], contexts: dict[str, BrowserContext]
) -> None:
    """At 1440 px the reviewers' labels sit beside the query, above what the run ranked
    first: the document follows the query closely (no blank band the height of the labels),
    and what ranked first keeps its distance from the labels' table."""
    entry = next(e for e in PAGES if e.key == "adjudication")
    page = open_page(
        contexts["lead"], entry, "lead", site, paths, viewport={"width": 1440, "height": HEIGHT}
    )
    try:
        card = page.locator("#review .review-card")
        boxes = [
            card.locator(part).bounding_box()
            for part in (".card-head .query", ".document", "#labels", ".candidates")
        ]
        assert None not in boxes, boxes
        query, document, labels, candidates = (box for box in boxes if box is not None)
        below_query = document["y"] - (query["y"] + query["height"])
        assert below_query <= UNDER_QUERY, f"{below_query} px blank between query and document"
        below_labels = candidates["y"] - (labels["y"] + labels["height"])
        assert below_labels >= UNDER_LABELS, f"what ranked first {below_labels} px under labels"
        assert candidates["x"] >= document["x"] + document["width"], "side by side at 1440 px"
    finally:
        page.close()
