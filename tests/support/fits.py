"""Whether a review or adjudication card fits the screen (issue 18): each part's box inside the
viewport, none meeting the action bar's box, and the element at each part's centre the part
itself or one of its children (nothing drawn over it)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

LAPTOP = {"width": 1280, "height": 800}
#: The card's parts, by the selectors the page gives them.
PARTS = {
    "query": "#query-text",
    "document title": "#doc-title",
    "document text": "#doc-text",
    "evidence": "#hints",
    "what ranked first": "#candidates",
    "siblings": "#siblings",
    "earlier label": "#suggestion",
    "reviewers' labels": "#labels",
}

#: Each part's box, the action bar's box, and what the browser hits at the part's centre.
MEASURE = """(parts) => {
  const box = (el) => { const r = el.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  const bar = document.querySelector('#review form.actions');
  const out = {bar: box(bar), viewport: {width: innerWidth, height: innerHeight}, parts: {}};
  for (const [name, selector] of Object.entries(parts)) {
    const el = document.querySelector(selector);
    if (!el) continue;
    const b = box(el);
    const hit = document.elementFromPoint((b.left + b.right) / 2, (b.top + b.bottom) / 2);
    out.parts[name] = {...b, covered_by: hit && el.contains(hit) ? null :
      (hit ? hit.tagName.toLowerCase() + (hit.id ? '#' + hit.id : '') : 'nothing')};
  }
  out.buttons = [...bar.querySelectorAll('button[data-key]')].map((el) => {
    const b = box(el);
    const hit = document.elementFromPoint((b.left + b.right) / 2, (b.top + b.bottom) / 2);
    return {...b, key: el.dataset.key, covered_by: hit && el.contains(hit) ? null : String(hit)};
  });
  return out;
}"""


def _inside(box: dict[str, float], viewport: dict[str, float]) -> bool:
    return (
        box["top"] >= 0
        and box["left"] >= 0
        and box["bottom"] <= viewport["height"]
        and box["right"] <= viewport["width"]
    )


def _meet(a: dict[str, float], b: dict[str, float]) -> bool:
    return not (
        a["bottom"] <= b["top"]
        or a["top"] >= b["bottom"]
        or a["right"] <= b["left"]
        or a["left"] >= b["right"]
    )


def assert_fits(page: Page, required: list[str]) -> dict[str, Any]:
    """Assert that the card on ``page`` fits its viewport, with at least the ``required``
    parts (names of ``PARTS``; those absent from the card are not measured) and three cause
    keys; answers what was measured."""
    measured: dict[str, Any] = page.evaluate(MEASURE, PARTS)
    viewport, bar, parts = measured["viewport"], measured["bar"], measured["parts"]
    assert viewport == page.viewport_size
    missing = [name for name in required if name not in parts]
    assert not missing, f"the card has no {missing}"
    for name, box in parts.items():
        assert _inside(box, viewport), f"{name} is not inside the viewport: {box}"
        assert not _meet(box, bar), f"{name} {box} meets the action bar {bar}"
        assert box["covered_by"] is None, f"{name} is covered by {box['covered_by']}"
    assert _inside(bar, viewport), f"the action bar is below the fold: {bar}"
    digits = [b for b in measured["buttons"] if b["key"].isdigit()]
    assert len(digits) >= 3, measured["buttons"]  # the default three causes
    for button in measured["buttons"]:
        assert _inside(button, viewport), f"key {button['key']} is outside: {button}"
        assert button["covered_by"] is None, f"key {button['key']}: {button['covered_by']}"
    return measured
