"""What a page walk measures of a page's layout in the browser: the page scrolling sideways,
controls squeezed below their content or sticking out of their box, a row of filters out of
line, and table scroll boxes that hide columns the page has room for or cut a row in half.
Used by tests/browser/test_widths.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Page

#: The narrowest a text, search or file field may be (in rem): "Choose F" was 70 px.
MIN_FIELD_REM = 8

#: The measures, in one pass of the page as it is now (no scrolling, nothing clicked).
LAYOUT_JS = (Path(__file__).parent / "layout.js").read_text()

#: An open dialog's empty band: the space between its box and its first or last part.
DIALOG_JS = """
(selector) => {
  const d = document.querySelector(selector);
  const box = d.getBoundingClientRect();
  const s = getComputedStyle(d);
  const first = d.firstElementChild.getBoundingClientRect();
  const last = d.lastElementChild.getBoundingClientRect();
  return {top: first.top - box.top - parseFloat(s.borderTopWidth),
          bottom: box.bottom - last.bottom - parseFloat(s.borderBottomWidth)};
}
"""


def measure_layout(page: Page) -> dict[str, Any]:
    """The page's layout faults: ``scroll`` and ``inner`` (the document's and the viewport's
    widths), ``wide`` (elements past the right edge), ``controls``, ``lines`` and ``tables``
    (each a list of what is wrong, empty when nothing is)."""
    measured: dict[str, Any] = page.evaluate(LAYOUT_JS, MIN_FIELD_REM)
    return measured


def layout_faults(measured: dict[str, Any]) -> list[str]:
    """What a person sees wrong, one line each, from ``measure_layout``."""
    faults = []
    if measured["scroll"] > measured["inner"]:
        faults.append(
            f"the page scrolls sideways: scrollWidth {measured['scroll']} > {measured['inner']};"
            f" past the right edge: {measured['wide']}"
        )
    faults += [f"control: {c}" for c in measured["controls"]]
    faults += [f"controls out of line: {c}" for c in measured["lines"]]
    faults += [f"table: {t}" for t in measured["tables"]]
    return faults


def dialog_bands(page: Page, selector: str) -> dict[str, float]:
    """The empty space (px) at the top and the foot of the open dialog ``selector``, inside
    its border: its padding plus any margin its first and last parts leave."""
    bands: dict[str, float] = page.evaluate(DIALOG_JS, selector)
    return bands
