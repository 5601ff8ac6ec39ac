"""Focus is visible and survives HTMX swaps; saves, undos and errors are announced through
live regions (base.html's #status, polite, and #errors, assertive)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from tests.support.browsing import log_in, prepared_demo
from tests.support.demo_site import DemoSite
from tests.support.product_pages import HTMX_BUSY, swap

ACTIVE = (
    "() => { const e = document.activeElement;"
    " return e ? {tag: e.tagName.toLowerCase(), id: e.id, value: e.value ?? null} : null; }"
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoSite]:
    with prepared_demo(tmp_path_factory.mktemp("focus-demo"), disputes=False) as prepared:
        yield prepared


def _focused(page: Page) -> dict[str, str]:
    found = page.evaluate(ACTIVE)
    assert found is not None
    return dict(found)


def test_typing_in_the_run_search_keeps_focus_and_every_key(
    browser: Browser, site: DemoSite
) -> None:
    url = site.url
    context = log_in(browser, site, "lead")
    page = context.new_page()
    page.goto(f"{url}/runs/{site.run_id}")
    page.locator("#query-search").focus()
    typed = ""
    for key in "rate":  # one key at a time, each answered by a swap of #main
        swap(page, "#main > *", lambda key=key: page.keyboard.type(key))
        typed += key
        assert _focused(page) == {"tag": "input", "id": "query-search", "value": typed}
        expect(page.locator("#queries tbody tr").first).to_be_attached()
    assert page.evaluate("document.getElementById('query-search').selectionStart") == len(typed)
    assert "q=rate" in page.url
    context.close()


def test_keys_typed_while_a_search_is_out_are_kept(browser: Browser, site: DemoSite) -> None:
    """On a slow network (each request leaves 0.8 s late), keys pressed after a search has
    gone out are neither dropped by its answer nor left unsearched."""
    context = log_in(browser, site, "lead")
    context.add_init_script(
        "const send = XMLHttpRequest.prototype.send;"
        "XMLHttpRequest.prototype.send = function (body) {"
        " setTimeout(() => send.call(this, body), 800); };"
    )
    page = context.new_page()
    page.goto(f"{site.url}/runs/{site.run_id}")
    page.locator("#query-search").focus()
    page.keyboard.type("api key", delay=400)  # each pause outlasts the 300 ms debounce
    expect(page).to_have_url(re.compile(r"[?&]q=api(\+|%20)key(&|$)"), timeout=15_000)
    expect(page.locator(HTMX_BUSY)).to_have_count(0, timeout=15_000)
    assert _focused(page) == {"tag": "input", "id": "query-search", "value": "api key"}
    shown = page.locator("#queries tbody tr td:first-child").all_inner_texts()
    assert shown
    assert all("api key" in row.lower() for row in shown), shown
    context.close()


def test_keys_typed_while_a_swap_settles_are_kept(browser: Browser, site: DemoSite) -> None:
    """Keys pressed after the answer is swapped in but before it settles go into the new
    field, after the value the server rendered: they are kept, after what the old field held
    (a loaded machine stretches that moment; here htmx's settle delay is made 1 s)."""
    context = log_in(browser, site, "lead")
    page = context.new_page()
    page.goto(f"{site.url}/runs/{site.run_id}")
    page.evaluate(
        "() => { htmx.config.defaultSettleDelay = 1000; window.swapped = false;"
        " document.body.addEventListener('htmx:afterSwap', () => { window.swapped = true; }); }"
    )
    page.locator("#query-search").focus()
    page.keyboard.type("api")
    page.wait_for_function("() => window.swapped === true", timeout=15_000)
    page.keyboard.type(" key")  # while the swap settles
    expect(page).to_have_url(re.compile(r"[?&]q=api(\+|%20)key(&|$)"), timeout=15_000)
    expect(page.locator(HTMX_BUSY)).to_have_count(0, timeout=15_000)
    assert _focused(page) == {"tag": "input", "id": "query-search", "value": "api key"}
    context.close()


#: WCAG 2.2's focus appearance asks for an indicator at least 2 CSS px thick.
THINNEST_OUTLINE = 2.0


def test_focus_is_visible(browser: Browser, site: DemoSite) -> None:
    """Tabbing through a page: each link, button and field shows where the focus is, with
    an outline of at least 2 px."""
    context = log_in(browser, site, "lead")
    page = context.new_page()
    page.goto(f"{site.url}/golden-sets/{site.golden_set_id}")
    outlines = []
    for _ in range(12):
        page.keyboard.press("Tab")
        outlines.append(
            page.evaluate(
                "() => { const e = document.activeElement, s = getComputedStyle(e);"
                " return {visible: e.matches(':focus-visible'), style: s.outlineStyle,"
                " width: parseFloat(s.outlineWidth), what: e.outerHTML.slice(0, 80)}; }"
            )
        )
    context.close()
    assert all(o["visible"] for o in outlines), outlines
    thin = [o for o in outlines if o["style"] == "none" or o["width"] < THINNEST_OUTLINE]
    assert not thin, thin


def test_the_skip_link_leads_to_the_content(browser: Browser, site: DemoSite) -> None:
    context = log_in(browser, site, "lead")
    page = context.new_page()
    page.goto(f"{site.url}/golden-sets/{site.golden_set_id}")
    page.keyboard.press("Tab")
    expect(page.locator(".skip-link")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("main#main")).to_be_focused()
    page.keyboard.press("Tab")  # the next stop is inside the content, past the header
    assert page.evaluate("document.getElementById('main').contains(document.activeElement)")
    context.close()


def test_saves_undos_and_errors_are_announced(browser: Browser, site: DemoSite) -> None:
    url = site.url
    context = log_in(browser, site, "reviewer")
    page = context.new_page()
    page.goto(f"{url}/triages/{site.triage_id}/review")
    expect(page.locator("#review .card[data-miss]")).to_be_visible()
    status = page.locator("#status")
    expect(status).to_have_attribute("role", "status")
    expect(status).to_have_attribute("aria-live", "polite")
    expect(page.locator("#errors")).to_have_attribute("aria-live", "assertive")

    # "o" opens the note for "other", Esc closes it: the focus goes back to its button
    page.keyboard.press("o")
    expect(page.locator("#other-form input[name=note]")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator("#other-form")).to_be_hidden()
    expect(page.locator('[data-opens="other-form"]')).to_be_focused()

    swap(page, "#review", lambda: page.keyboard.press("1"))
    expect(status).to_have_text(page.locator("#message").inner_text())
    assert status.inner_text().startswith("Saved: ")
    swap(page, "#review", lambda: page.keyboard.press("u"))
    expect(status).to_contain_text("Undone: ")
    expect(status).to_have_text(page.locator("#message").inner_text())

    # a label that cannot reach the server is said at once, and nothing moves on
    miss = page.locator("#review .card").get_attribute("data-miss")

    def refuse(route: Route) -> None:
        route.abort()

    page.route("**/review/label", refuse)
    page.keyboard.press("2")
    expect(page.locator("#errors")).to_contain_text("NOT saved")
    expect(page.locator("#review .card")).to_have_attribute("data-miss", str(miss))
    page.unroute("**/review/label")
    swap(page, "#review", lambda: page.keyboard.press("2"))
    expect(page.locator("#errors")).to_be_empty()
    expect(status).to_contain_text("Saved: ")
    context.close()


def test_a_reloaded_review_page_puts_the_focus_on_its_card(
    browser: Browser, site: DemoSite
) -> None:
    """The miss already held (a reload) is on the page from the start, with no swap: its
    heading gets the focus as a freshly claimed card's does, not the body 5 s later."""
    context = log_in(browser, site, "reviewer")
    page = context.new_page()
    page.goto(f"{site.url}/triages/{site.triage_id}/review")
    expect(page.locator("#review .card[data-miss]")).to_be_visible()
    first = _focused(page)
    page.reload()
    expect(page.locator("#review .card[data-miss]")).to_be_visible()
    page.wait_for_function("() => document.activeElement !== document.body", timeout=1000)
    again = _focused(page)
    assert again["tag"] in ("h1", "h2")
    assert again["tag"] == first["tag"]
    context.close()
