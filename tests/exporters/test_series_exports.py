"""Trackers follow a series (issue 28, part 4): exporting a later triage of the series updates
the issues the earlier triage's export made (the same numbers and keys, PATCH/PUT, never a
second issue), with the new counts and the earlier misses the new run fixed; a run outside the
series makes its own; a dry run shows the update. Against the fake tracker on loopback.

The data (tests/support/carried.py) at depth 2: commit-1's triage labels (q1, b) vocabulary
mismatch, (q2, c) chunk boundary, (q3, d) not indexed; commit-2 misses only (q3, d) (carried):
it fixed (q1, b) and (q2, c)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.exporters import Tracker as ExportTracker
from app.models import Role
from app.models.exports import ExportOutcome
from app.services.delivery import exports
from app.settings import Settings
from tests.support.carried import carried_series, label_every_miss, make_triage
from tests.support.fake_tracker import Tracker
from tests.support.service import Account


def plain(body: str) -> str:
    """An issue body as its reader sees it: no escapes, no invisible joiners."""
    return body.replace("\u2060", "").replace("\\", "")


def _export(
    engine: Engine, settings: Settings, triage: int, tracker: str, target: str, **extra: Any
) -> ExportOutcome:
    with Session(engine, expire_on_commit=False) as session:
        return exports.export(
            session=session,
            settings=settings,
            triage_id=triage,
            tracker=ExportTracker(tracker),
            target=target,
            **extra,
        )


@pytest.fixture
def series(client: TestClient, accounts: dict[Role, Account]) -> dict[str, int]:
    lead = accounts[Role.LEAD]
    ids = carried_series(client, lead)
    ids["t2"] = make_triage(client, lead, ids["commit-2"])["id"]
    ids["alone_triage"] = make_triage(client, lead, ids["alone"])["id"]
    return ids


def test_a_later_triage_of_the_series_updates_the_same_github_issues(
    engine: Engine,
    tracker_settings: Settings,
    fake: tuple[str, Tracker],
    series: dict[str, int],
) -> None:
    _, tracker = fake
    first = _export(engine, tracker_settings, series["t1"], "github", "acme/search")
    numbers = {r.category: r.external_id for r in first.results}
    assert [r.action for r in first.results] == ["create"] * 3
    posts = len([r for r in tracker.requests if r.method == "POST"])

    second = _export(engine, tracker_settings, series["t2"], "github", "acme/search")
    assert [(r.category, r.action, r.external_id) for r in second.results] == [
        ("not-indexed", "update", numbers["not-indexed"]),
        ("vocabulary-mismatch", "update", numbers["vocabulary-mismatch"]),
        ("chunk-boundary", "update", numbers["chunk-boundary"]),
    ]
    # no issue was made: three PATCHes to the three issues
    assert len([r for r in tracker.requests if r.method == "POST"]) == posts
    patched = sorted(r.path for r in tracker.requests if r.method == "PATCH")
    assert patched == sorted(f"/repos/acme/search/issues/{n}" for n in numbers.values())
    assert len([k for k in tracker.issues if k.startswith("github:")]) == 3

    still = tracker.issues[f"github:acme/search#{numbers['not-indexed']}"]
    assert still["title"] == "[misstriage] 1 not-indexed miss in commit-2 @2 (golden set carried)"
    said = plain(still["body"])
    assert (
        f"Series main: run commit-2 (triage #{series['t2']}) follows run commit-1 "
        f"(triage #{series['t1']}); this issue is updated, not made again." in said
    )
    assert "Fixed by commit-2: none of the earlier misses of this cause." in said
    fixed = tracker.issues[f"github:acme/search#{numbers['vocabulary-mismatch']}"]
    assert fixed["title"] == (
        "[misstriage] 0 vocabulary-mismatch misses in commit-2 @2 (golden set carried)"
    )
    assert "Fixed by commit-2: 1 earlier miss of this cause, no longer missed:" in plain(
        fixed["body"]
    )
    # the cause has no miss left: its issue is closed; the one still missed stays open
    assert (fixed["state"], still["state"]) == ("closed", "open")
    fixed_lines = [line for line in fixed["body"].splitlines() if line.startswith("- ")]
    assert fixed_lines == ["- `q1` throttling errors: `b`"]
    chunk = tracker.issues[f"github:acme/search#{numbers['chunk-boundary']}"]
    assert [line for line in chunk["body"].splitlines() if line.startswith("- ")] == [
        "- `q2` sso login: `c`"
    ]

    # the later triage's own re-export: nothing changed, nothing sent
    sent = len(tracker.requests)
    again = _export(engine, tracker_settings, series["t2"], "github", "acme/search")
    assert [r.action for r in again.results] == ["unchanged"] * 3
    assert len(tracker.requests) == sent


def test_a_run_outside_the_series_makes_its_own_issues(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    tracker_settings: Settings,
    fake: tuple[str, Tracker],
    series: dict[str, int],
) -> None:
    _, tracker = fake
    first = _export(engine, tracker_settings, series["t1"], "github", "acme/search")
    # the run outside the series: its one miss labelled, as in commit-1's triage
    label_every_miss(
        client, accounts[Role.LEAD], series["alone_triage"], {("q3", "d"): "not-indexed"}
    )
    alone = _export(engine, tracker_settings, series["alone_triage"], "github", "acme/search")
    assert [(r.category, r.action) for r in alone.results] == [("not-indexed", "create")]
    assert alone.results[0].external_id not in {r.external_id for r in first.results}
    body = tracker.issues[f"github:acme/search#{alone.results[0].external_id}"]["body"]
    assert "follows" not in plain(body)
    # another target of the series: its own issues too
    other = _export(engine, tracker_settings, series["t2"], "github", "acme/other")
    assert [(r.category, r.action) for r in other.results] == [("not-indexed", "create")]
    assert len([k for k in tracker.issues if k.startswith("github:acme/other")]) == 1
    assert len([k for k in tracker.issues if k.startswith("github:acme/search")]) == 4


def test_a_dry_run_shows_the_update_of_the_earlier_issue(
    engine: Engine,
    tracker_settings: Settings,
    fake: tuple[str, Tracker],
    series: dict[str, int],
) -> None:
    _, tracker = fake
    first = _export(engine, tracker_settings, series["t1"], "github", "acme/search")
    numbers = {r.category: r.external_id for r in first.results}
    sent = len(tracker.requests)
    dry = _export(engine, tracker_settings, series["t2"], "github", "acme/search", dry_run=True)
    assert len(tracker.requests) == sent  # nothing sent
    assert [(r.category, r.action, r.external_id) for r in dry.results] == [
        (c, "update", numbers[c]) for c in ("not-indexed", "vocabulary-mismatch", "chunk-boundary")
    ]
    assert dry.requests is not None
    assert [(q.method, q.url.rsplit("/", 1)[-1]) for q in dry.requests] == [
        ("PATCH", numbers[c]) for c in ("not-indexed", "vocabulary-mismatch", "chunk-boundary")
    ]


def test_jira_issues_follow_the_series_too(
    engine: Engine,
    tracker_settings: Settings,
    fake: tuple[str, Tracker],
    series: dict[str, int],
) -> None:
    _, tracker = fake
    first = _export(engine, tracker_settings, series["t1"], "jira", "SEARCH")
    keys = {r.category: r.external_id for r in first.results}
    second = _export(engine, tracker_settings, series["t2"], "jira", "SEARCH")
    assert [(r.category, r.action, r.external_id) for r in second.results] == [
        (c, "update", keys[c]) for c in ("not-indexed", "vocabulary-mismatch", "chunk-boundary")
    ]
    assert len([k for k in tracker.issues if k.startswith("jira:")]) == 3
    puts = sorted(r.path for r in tracker.requests if r.method == "PUT")
    assert puts == sorted(f"/rest/api/3/issue/{k}" for k in keys.values())
    fields = tracker.issues[f"jira:{keys['vocabulary-mismatch']}"]
    assert fields["summary"].startswith("[misstriage] 0 vocabulary-mismatch misses in commit-2")
    lists = [n for n in fields["description"]["content"] if n["type"] == "bulletList"]
    items = [i["content"][0]["content"][0]["text"] for i in lists[0]["content"]]
    assert items == ["q1: b"]


def test_gitlab_issues_follow_the_series_and_an_emptied_cause_says_so(
    engine: Engine,
    tracker_settings: Settings,
    fake: tuple[str, Tracker],
    series: dict[str, int],
) -> None:
    _, tracker = fake
    first = _export(engine, tracker_settings, series["t1"], "gitlab", "acme/search")
    iids = {r.category: r.external_id for r in first.results}
    second = _export(engine, tracker_settings, series["t2"], "gitlab", "acme/search")
    assert [(r.category, r.action, r.external_id) for r in second.results] == [
        (c, "update", iids[c]) for c in ("not-indexed", "vocabulary-mismatch", "chunk-boundary")
    ]
    puts = sorted(r.path for r in tracker.requests if r.method == "PUT")
    assert puts == sorted(f"/api/v4/projects/acme%2Fsearch/issues/{i}" for i in iids.values())
    emptied = tracker.issues[f"gitlab:acme%2Fsearch!{iids['chunk-boundary']}"]
    assert emptied["state_event"] == "close"
    kept = tracker.issues[f"gitlab:acme%2Fsearch!{iids['not-indexed']}"]
    assert kept["state_event"] == "reopen"
    said = plain(emptied["description"])
    assert said.startswith(
        "No relevant document of golden set **carried** missing from the top 2 of run "
        "**commit-2** is labelled **chunk-boundary** now."
    )
    assert "| Query |" not in said  # no empty table
    assert [line for line in said.splitlines() if line.startswith("- ")] == [
        "- `q2` sso login: `c`"
    ]
