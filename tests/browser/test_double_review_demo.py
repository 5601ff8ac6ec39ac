"""Issue 16's "done when", tried as a new user would on `misstriage demo`: the lead creates
an overlap-2 triage of the bm25 run from the golden-set page; three reviewers, each in a
browser context of their own, take turns labelling with the keyboard until no miss is left
for anyone, never shown a miss twice nor another's label; the disputed misses, and only those,
wait on the lead's adjudication page; the lead decides them with keys; the dashboard shows
Fleiss' kappa with its interval, the confusion matrix of the labels given, and a closure
sentence that says what the final labels rest on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import Browser, Page, expect

from app.web.copy import label as label_of
from tests.support.agreement_textbook import fleiss
from tests.support.screens import screenshot

VIEWPORT = {"width": 1280, "height": 900}
CANT_TELL = "cant-tell"
#: The two reviewers an admin adds to the demo's one (``misstriage create-user``).
MORE_REVIEWERS = (
    ("ravi@demo.example.com", "ravi-review-pass"),
    ("mei@demo.example.com", "mei-review-pass"),
)
CLOSURE = re.compile(
    r"(?P<terms>[\d + ]+) = (?P<named>\d+) of (?P<total>\d+) misses accounted for: "
    r"the categories close; (?P<agreed>\d+) agreed, (?P<adjudicated>\d+) adjudicated; "
    r"Fleiss' kappa (?P<kappa>-?\d\.\d\d) \[(?P<lo>-?\d\.\d\d), (?P<hi>-?\d\.\d\d)\]"
    r"( \(\d+ more covered by a duplicate, not queued\))?"
)


@dataclass
class Reviewer:
    """One reviewer's browser context and what each of their cards showed."""

    index: int
    email: str
    page: Page
    seen: list[int] = field(default_factory=list)
    done: bool = False


def _log_in(browser: Browser, url: str, email: str, password: str) -> Page:
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.goto(url)
    page.fill('input[name="email"]', email)
    page.fill('input[name="password"]', password)
    page.keyboard.press("Enter")
    return page


def _press(page: Page, key: str) -> None:
    """Press ``key`` and wait until HTMX has swapped the next card in (the old section,
    marked first, is gone)."""
    page.evaluate("document.getElementById('review').dataset.stale = '1'")
    page.keyboard.press(key)
    expect(page.locator("#review:not([data-stale]):not(.loading)")).to_be_attached()


def _choice(reviewer: Reviewer, miss: int, hint: str, causes: list[str]) -> str:
    """The cause (or "can't tell") a reviewer gives a miss, deterministic so that some pairs
    disagree: the first follows the hints; the second names the next cause on every third
    miss; the third names the previous cause on every fourth and cannot tell on their
    second card."""
    shifted = {1: 1 if miss % 3 == 0 else 0, 2: -1 if miss % 4 == 1 else 0}.get(reviewer.index, 0)
    if reviewer.index == 2 and len(reviewer.seen) == 1:
        return CANT_TELL
    return causes[(causes.index(hint) + shifted) % len(causes)]


def _key_of(page: Page, cause: str) -> str:
    if cause == CANT_TELL:
        return "c"
    key = page.locator(f'#review form.actions button[value="{cause}"][data-key]:not(#accept-hint)')
    return str(key.get_attribute("data-key"))


def _create_reviewers(tmp_path: Path) -> None:
    """As an admin would on the demo's machine: ``misstriage create-user``."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'var' / 'demo.db'}"}
    for email, password in MORE_REVIEWERS:
        command = ["create-user", "--email", email, "--password", password, "--role", "reviewer"]
        done = subprocess.run(
            [sys.executable, "-m", "app", *command], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip() == f"created reviewer {email}"


def _confusion(labels: dict[int, list[tuple[str, str]]]) -> Counter[tuple[str, str]]:
    """The matrix the dashboard documents: per miss with two causes, an agreeing pair on the
    diagonal, a disagreeing pair in both of its cells ("can't tell" is no label)."""
    cells: Counter[tuple[str, str]] = Counter()
    for given in labels.values():
        causes = [cause for _, cause in given if cause != CANT_TELL]
        if len(causes) == 2:
            a, b = causes
            cells[a, b] += 1
            if a != b:
                cells[b, a] += 1
    return cells


def test_three_reviewers_two_per_miss_then_the_lead_adjudicates_on_the_demo(
    browser: Browser, demo: tuple[str, str], tmp_path: Path
) -> None:
    url, printed = demo
    lead_account = re.search(r"lead\s+(\S+)\s+password\s+(\S+)", printed)
    reviewer_account = re.search(r"reviewer\s+(\S+)\s+password\s+(\S+)", printed)
    golden = re.search(r"(http://\S+/golden-sets/\d+)", printed)
    assert lead_account is not None, printed
    assert reviewer_account is not None, printed
    assert golden is not None, printed
    assert golden.group(1).startswith(url)
    _create_reviewers(tmp_path)

    # The lead: the demo's bm25 triage at depth 50 is single-review (k 10); a new one at
    # depth 50, k 20, with two reviewers per miss, from the golden-set page's form.
    lead = _log_in(browser, golden.group(1), *lead_account.groups())
    lead.fill('input[name="k"]', "20")
    lead.fill('input[name="depth"]', "50")
    lead.locator("form.controls button[type=submit]").click()
    row = lead.locator('#runs-table tr[data-run="bm25"]')
    expect(row.locator('select[name="reviewers"]')).to_be_visible()
    row.locator('select[name="reviewers"]').select_option("2")
    screenshot(lead, "double-review-demo-create", full_page=False)
    row.locator('button:text-is("Create triage")').click()
    expect(lead.locator("#flash")).to_contain_text(
        re.compile(r"Triage created: depth 50, k 20, \d+ misses, 2 reviewers per miss\.")
    )
    expect(lead.locator("p.facts").first).to_contain_text(
        "double review: 2 reviewers on every miss"
    )
    found = int(re.findall(r"(\d+) misses", lead.locator("#flash").inner_text())[0])
    # the misses a duplicate covers stay off the queue; the others are the work
    misses = found - int(lead.locator("#covered b").inner_text())
    assert 10 < misses < found
    dashboard = lead.url
    review_url = dashboard + "/review"

    # Three reviewers in three contexts, taking turns until none has a miss left.
    accounts = [reviewer_account.groups(), *MORE_REVIEWERS]
    reviewers = [
        Reviewer(i, email, _log_in(browser, review_url, email, password))
        for i, (email, password) in enumerate(accounts)
    ]
    causes: list[str] = []
    labels: dict[int, list[tuple[str, str]]] = defaultdict(list)
    while not all(r.done for r in reviewers):
        for reviewer in (r for r in reviewers if not r.done):
            page = reviewer.page
            section = page.locator("#review:not(.loading)")
            expect(section).to_be_attached()
            if page.locator("#empty").count():
                reviewer.done = True
                continue
            card = page.locator("#review .card[data-miss]")
            miss = int(str(card.get_attribute("data-miss")))
            assert miss not in reviewer.seen, f"{reviewer.email} was shown miss {miss} twice"
            # Blind: no other reviewer's label, no earlier label, no other reviewer's name.
            expect(card.locator("#labels")).to_have_count(0)
            expect(card.locator("#suggestion")).to_have_count(0)
            shown = card.inner_text()
            assert not [r.email for r in reviewers if r.email in shown and r is not reviewer]
            causes = causes or [
                str(b.get_attribute("value"))
                for b in card.locator("form.actions button[data-key]").all()
                if str(b.get_attribute("data-key")).isdigit()
            ]
            if not reviewer.seen and reviewer.index == 0 and not labels:
                screenshot(page, "double-review-demo-card", full_page=False)
            hint = str(card.locator("#hint").get_attribute("data-term"))
            cause = _choice(reviewer, miss, hint, causes)
            # the first reviewer accepts the hints' suggestion with "a"
            key = "a" if reviewer.index == 0 else _key_of(page, cause)
            reviewer.seen.append(miss)
            labels[miss].append((reviewer.email, cause))
            _press(page, key)
            # the label's name, then what it did: waits for the other label, final, disputed
            first = len(labels[miss]) == 1
            agreed = not first and labels[miss][0][1] == cause != CANT_TELL
            outcome = (
                "It waits for another reviewer's label."
                if first
                else "The labels agree: it is final."
                if agreed
                else "The labels differ: it goes to adjudication."
            )
            expect(page.locator("#message")).to_have_text(
                re.compile(rf"^Saved: .* is {re.escape(label_of(cause))}\. {re.escape(outcome)}$")
            )

    # Every miss has two labels from two distinct reviewers; each reviewer saw each once.
    assert len(labels) == misses
    assert all(len({email for email, _ in given}) == 2 for given in labels.values())
    assert all(r.seen for r in reviewers)
    assert sum(len(r.seen) for r in reviewers) == 2 * misses
    assert sum(cause == CANT_TELL for given in labels.values() for _, cause in given) == 1
    for reviewer in reviewers:  # nothing left for anybody, on a fresh page either
        reviewer.page.reload()
        expect(reviewer.page.locator("#empty")).to_be_visible()
    agreed = {m: g[0][1] for m, g in labels.items() if g[0][1] == g[1][1] != CANT_TELL}
    disputed = set(labels) - set(agreed)
    assert agreed
    assert disputed

    # The lead's adjudication queue holds exactly the disputed misses, each with both labels.
    lead.goto(dashboard)
    expect(lead.locator("#closure")).to_contain_text(
        f"does not close: {len(disputed)} unlabelled ({len(disputed)} awaiting adjudication)"
    )
    lead.locator("#adjudicate").click()
    expect(lead.locator("#progress")).to_contain_text(f"waiting for adjudication {len(disputed)}")
    final = dict(agreed)
    while not lead.locator("#empty").count():
        card = lead.locator("#review .card[data-miss]")
        miss = int(str(card.get_attribute("data-miss")))
        assert miss in disputed
        assert miss not in final
        # the reviewers' rows (an earlier triage's label, when there is one, is a row apart);
        # each cause by its name, the identifier in data-cause
        rows = card.locator("#labels tbody tr[data-reviewer]")
        emails = rows.locator("td:first-child").all_inner_texts()
        cells = rows.locator("td.cause")
        causes_given = [str(cells.nth(i).get_attribute("data-cause")) for i in range(cells.count())]
        given = zip(emails, causes_given, strict=True)
        assert sorted(given) == sorted(labels[miss])
        assert cells.all_inner_texts() == [label_of(c) for c in causes_given]
        if len(final) == len(agreed):
            screenshot(lead, "double-review-demo-adjudication", full_page=False)
        final[miss] = str(card.locator("#hint").get_attribute("data-term"))  # with the evidence
        _press(lead, _key_of(lead, final[miss]))
        expect(lead.locator("#message")).to_have_text(
            re.compile(rf"^Decided: .* is {re.escape(label_of(final[miss]))}\.$")
        )
    assert set(final) == set(labels)

    # The dashboard: the closure sentence, what it rests on, kappa with its interval.
    lead.goto(dashboard)
    lead.set_viewport_size({"width": 1280, "height": 1200})
    closure = CLOSURE.fullmatch(lead.locator("#closure").inner_text())
    assert closure is not None, lead.locator("#closure").inner_text()
    per_cause = Counter(final.values())
    assert closure["terms"] == " + ".join(str(per_cause[c]) for c in causes)
    assert int(closure["named"]) == int(closure["total"]) == misses
    assert (int(closure["agreed"]), int(closure["adjudicated"])) == (len(agreed), len(disputed))
    assert int(closure["agreed"]) + int(closure["adjudicated"]) == misses
    kappa, lo, hi = (float(closure[name]) for name in ("kappa", "lo", "hi"))
    assert lo <= kappa <= hi
    compared = [[c for _, c in g] for g in labels.values() if CANT_TELL not in dict(g).values()]
    expected = fleiss(compared)
    assert expected is not None
    assert closure["kappa"] == f"{float(expected):.2f}"
    interval = f"{closure['kappa']} [{closure['lo']}, {closure['hi']}]"
    expect(lead.locator("#fleiss")).to_have_text(interval)

    # The confusion matrix: the pairs of labels given, cell by cell.
    cells = _confusion(labels)
    shown_cells = {
        (str(td.get_attribute("data-row")), str(td.get_attribute("data-col"))): int(td.inner_text())
        for td in lead.locator("#confusion td[data-row]").all()
    }
    assert set(shown_cells) == {(a, b) for a in causes for b in causes}
    assert shown_cells == {cell: cells[cell] for cell in shown_cells}
    diagonal = sum(shown_cells[c, c] for c in causes)
    assert diagonal == len(agreed)
    assert sum(shown_cells.values()) == len(agreed) + 2 * (len(compared) - len(agreed))
    # Each reviewer's own labels, the same number in the agreement panel (every label on
    # the complete misses, "can't tell" included and said apart) and in the Reviewers table
    # (every label in force); the lead's adjudications are decisions, not labels.
    rows = lead.locator("#agreement-per-reviewer tbody tr")
    own = {
        str(tr.get_attribute("data-reviewer")): tr.locator("td:has(.labels)").inner_text()
        for tr in rows.all()
    }
    every_label = Counter(email for g in labels.values() for email, _ in g)
    said_cant_tell = Counter(email for g in labels.values() for email, c in g if c == CANT_TELL)
    assert own == {
        email: f"{n} ({said_cant_tell[email]} can't tell)" if said_cant_tell[email] else str(n)
        for email, n in every_label.items()
    }
    counted = {
        str(tr.get_attribute("data-reviewer")): (
            int(tr.locator(".labels").inner_text()),
            int(tr.locator("td.decisions").inner_text()),
        )
        for tr in lead.locator("#throughput tbody tr[data-reviewer]").all()
    }
    assert counted == {e: (n, 0) for e, n in every_label.items()} | {
        lead_account.group(1): (0, len(disputed))
    }
    lead.locator("#agreement").scroll_into_view_if_needed()
    screenshot(lead, "double-review-demo-dashboard-agreement", full_page=False)
    lead.evaluate("window.scrollTo(0, 0)")
    screenshot(lead, "double-review-demo-dashboard", full_page=False)
