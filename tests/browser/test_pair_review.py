"""The pair-review page in a browser: a reviewer judges a detector run's sampled pairs with the
keyboard alone (1 same content, 2 different, s skip), the differences of each pair marked;
the detector run page then counts exactly those reviews. Screenshots at 1440 and 768 px
(/tmp/shots27/, or MISSTRIAGE_SHOTS): side by side on a wide screen, stacked on a narrow one,
never wider than the window."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from app.models import Role
from tests.support.dupe_corpus import make_corpus
from tests.support.live import LiveServer
from tests.support.product_pages import swap
from tests.support.screens import screenshot
from tests.support.service import PASSWORD, Account

SHOTS = Path(os.environ.get("MISSTRIAGE_SHOTS", "/tmp/shots27"))
PER_BAND = 2


def _detection(url: str, lead: Account) -> tuple[int, int, dict[str, str]]:
    """A golden set of generated copies and a detection over it: the run id, its sampled
    pairs, the truth (doc id -> group)."""
    corpus = make_corpus(60, copy_share=0.3, seed=5)
    qrels = "".join(f"q{i}\t0\t{d['_id']}\t1\n" for i, d in enumerate(corpus.docs[:3]))
    queries = "".join(json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n" for i in range(3))
    with httpx.Client(base_url=url, headers=lead.headers, timeout=60) as api:
        made = api.post(
            "/api/v1/golden-sets",
            data={"name": "copies"},
            files={
                "qrels": ("qrels.tsv", qrels),
                "queries": ("queries.jsonl", queries),
                "corpus": ("corpus.jsonl", "".join(json.dumps(d) + "\n" for d in corpus.docs)),
            },
        )
        assert made.status_code == 201, made.text
        run = api.post(
            f"/api/v1/golden-sets/{made.json()['id']}/detector-runs",
            json={"threshold": 0.8, "per_band": PER_BAND},
        )
        assert run.status_code == 201, run.text
    return int(run.json()["id"]), int(run.json()["sampled"]), corpus.truth


def _layout(page: Page) -> dict[str, float]:
    return dict(
        page.evaluate(
            """() => {
              const a = document.querySelector('#doc-a').getBoundingClientRect();
              const b = document.querySelector('#doc-b').getBoundingClientRect();
              return {a_top: a.top, b_top: b.top, a_left: a.left, b_left: b.left,
                      a_right: a.right, b_right: b.right,
                      scroll: document.documentElement.scrollWidth, width: window.innerWidth};
            }"""
        )
    )


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_pairs_judged_from_the_keyboard(
    browser: Browser, live_server: LiveServer, accounts: dict[Role, Account]
) -> None:
    run_id, sampled, truth = _detection(live_server.url, accounts[Role.LEAD])
    assert sampled >= 4
    page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    page.goto(f"{live_server.url}/login?next=/detector-runs/{run_id}/review")
    page.fill('input[name="email"]', accounts[Role.REVIEWER].email)
    page.fill('input[name="password"]', PASSWORD)
    page.keyboard.press("Enter")
    expect(page.locator("#start-review")).to_be_focused()
    swap(page, "#review", lambda: page.keyboard.press("Enter"))
    expect(page.locator("#review [data-pair]")).to_be_visible()

    # the first pair with differences, at both widths
    marked = 0
    skipped = judged = 0
    shot = False
    while not page.locator("#empty").count():
        assert judged + skipped <= sampled, "the queue never emptied"
        here = page.locator("#review [data-pair]").get_attribute("data-pair")
        marks = page.locator("#doc-a del").count() + page.locator("#doc-b ins").count()
        marked += marks
        if marks and not shot:
            shot = True
            screenshot(page, "pair-review-1440", folder=SHOTS)
            wide = _layout(page)
            assert wide["a_top"] == wide["b_top"], wide
            assert wide["a_right"] <= wide["b_left"], wide
            page.set_viewport_size({"width": 768, "height": 1000})
            screenshot(page, "pair-review-768", folder=SHOTS)
            narrow = _layout(page)
            assert narrow["b_top"] > narrow["a_top"], narrow
            assert narrow["a_left"] == narrow["b_left"], narrow
            assert narrow["scroll"] <= narrow["width"], narrow
            page.set_viewport_size({"width": 1440, "height": 900})
        if skipped == 0:
            key = "s"
        else:
            a, b = (page.locator(f"#doc-{s} a.doc-link").inner_text() for s in "ab")
            key = "1" if truth[a] == truth[b] else "2"
        swap(page, "#review", lambda key=key: page.keyboard.press(key))
        expect(page.locator("#message")).to_contain_text("Skipped:" if key == "s" else "Saved:")
        if page.locator("#review [data-pair]").count():
            expect(page.locator("#review [data-pair]")).not_to_have_attribute("data-pair", here)
        if key == "s":
            skipped += 1
        else:
            judged += 1
    assert (skipped, judged) == (1, sampled - 1)
    assert shot, "no pair showed a marked difference"
    assert marked > 0
    expect(page.locator("#empty h1")).to_have_text(f"No pair left for you: {judged} reviewed")

    page.locator("#empty a").click()
    expect(page.locator("#bands-table")).to_be_visible()
    reviewed = [
        int(c) for c in page.locator('#bands-table td[data-measure="reviewed"]').all_inner_texts()
    ]
    assert sum(reviewed) == judged
    expect(page.locator("#review-pairs a")).to_have_text("Review pairs (0 left)")
    page.context.close()
