"""Exports against a fake tracker on loopback: one issue per cause, updates on re-export,
retries, partial failures completed without duplicates, dry runs, no secret shown."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.clock import FrozenClock
from app.exporters import Sender
from app.models import GoldenSet, Miss, Role, Run, Triage, User
from app.services import queue
from app.settings import Settings
from tests.support.cli import run_misstriage, service_environment
from tests.support.exports import no_wait, run_export
from tests.support.fake_tracker import TOKEN, Fault, Tracker
from tests.support.queue import Desk
from tests.support.service import Account


def label_one_more(engine: Engine, labelled: tuple[GoldenSet, Run, Triage, User]) -> None:
    _, _, triage, lead = labelled
    assert triage.id is not None
    Desk(engine).claim_and_label(lead, triage.id, "chunk-boundary")


def relabel(engine: Engine, lead: User, old: str, new: str) -> None:
    """A lead moves one miss labelled ``old`` to ``new`` (two causes change)."""
    with Session(engine, expire_on_commit=False) as s:
        miss = s.exec(select(Miss).where(Miss.category == old)).first()
        assert miss is not None
        assert miss.id is not None
        queue.label(
            session=s,
            miss_id=miss.id,
            user=lead,
            category=new,
            note="",
            version=miss.version,
            now=FrozenClock().now(),
        )


def test_github_create_then_update_never_duplicate(
    engine: Engine,
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
) -> None:
    _, tracker = fake
    first = run_export(engine, tracker_settings, labelled, "github", "acme/search")
    assert [(r.category, r.action) for r in first.results] == [
        ("not-indexed", "create"),
        ("vocabulary-mismatch", "create"),
    ]
    issue = tracker.issues[f"github:acme/search#{first.results[1].external_id}"]
    assert issue["title"] == "[misstriage] 2 vocabulary-mismatch misses in run @10 (golden set g)"
    assert issue["labels"] == ["misstriage", "cause:vocabulary-mismatch"]
    assert "| Query | Document | Grade | Rank | Note | Link |" in issue["body"]
    assert "http://misstriage.test/misses/" in issue["body"]

    again = run_export(engine, tracker_settings, labelled, "github", "acme/search")
    assert [r.action for r in again.results] == ["unchanged", "unchanged"]
    label_one_more(engine, labelled)
    third = run_export(engine, tracker_settings, labelled, "github", "acme/search")
    assert [(r.category, r.action) for r in third.results] == [
        ("not-indexed", "unchanged"),
        ("vocabulary-mismatch", "unchanged"),
        ("chunk-boundary", "create"),
    ]
    methods = [(r.method, r.path) for r in tracker.requests]
    assert methods.count(("POST", "/repos/acme/search/issues")) == 3
    assert len([k for k in tracker.issues if k.startswith("github:")]) == 3


def test_updates_after_new_labels(
    engine: Engine,
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
) -> None:
    _, tracker = fake
    first = run_export(engine, tracker_settings, labelled, "github", "acme/search")
    numbers = {r.category: r.external_id for r in first.results}
    _golden, _run, _triage, lead = labelled
    # Relabel a vocabulary-mismatch miss as not-indexed: both issues change, both are updated.
    relabel(engine, lead, "vocabulary-mismatch", "not-indexed")
    second = run_export(engine, tracker_settings, labelled, "github", "acme/search")
    assert [(r.category, r.action, r.external_id) for r in second.results] == [
        ("not-indexed", "update", numbers["not-indexed"]),
        ("vocabulary-mismatch", "update", numbers["vocabulary-mismatch"]),
    ]
    patches = [r for r in tracker.requests if r.method == "PATCH"]
    assert len(patches) == 2
    assert tracker.issues[f"github:acme/search#{numbers['not-indexed']}"]["title"].startswith(
        "[misstriage] 2 not-indexed misses"
    )


def test_retries_on_429_5xx_secondary_limit_and_timeouts(
    engine: Engine,
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
) -> None:
    _, tracker = fake
    tracker.faults = [
        Fault("/repos", status=429, headers={"Retry-After": "1"}),
        Fault(
            "/repos",
            status=403,
            headers={"Retry-After": "0"},
            body="You have exceeded a secondary rate limit",
        ),
        Fault("/repos", status=502),
        Fault("/repos", status=503),
    ]
    sender = Sender(timeout=0.5, attempts=6, max_wait=1.0, sleep=no_wait)
    outcome = run_export(engine, tracker_settings, labelled, "github", "acme/search", sender=sender)
    assert [r.action for r in outcome.results] == ["create", "create"]
    assert sender.waits[0] == 1.0  # Retry-After honoured
    assert len([k for k in tracker.issues if k.startswith("github:")]) == 2


def test_timeouts_retry_updates_and_stop_creates(
    engine: Engine,
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
) -> None:
    _, tracker = fake
    # An answer slower than the 0.5 s timeout: a create may have happened; it is not repeated.
    tracker.faults = [Fault("/repos", pause=1.0)]
    first = run_export(
        engine,
        tracker_settings,
        labelled,
        "github",
        "acme/search",
        sender=Sender(timeout=0.5, attempts=3, max_wait=0.5, sleep=no_wait),
    )
    assert [r.action for r in first.results] == ["failed", "create"]
    assert "may have been created" in (first.results[0].error or "")
    assert len([r for r in tracker.requests if r.method == "POST"]) == 2  # no repeat
    # An update is safe to repeat: a timed-out PATCH is sent again and succeeds.
    label_one_more(engine, labelled)
    _golden, _run, _triage, lead = labelled
    relabel(engine, lead, "chunk-boundary", "vocabulary-mismatch")
    tracker.faults = [Fault("/repos/acme/search/issues/", pause=1.0)]
    sender = Sender(timeout=0.5, attempts=3, max_wait=0.5, sleep=no_wait)
    second = run_export(engine, tracker_settings, labelled, "github", "acme/search", sender=sender)
    actions = {r.category: r.action for r in second.results}
    assert actions["vocabulary-mismatch"] == "update"
    assert len(sender.waits) == 1


def test_partial_failure_then_rerun_completes(
    engine: Engine,
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
) -> None:
    _, tracker = fake
    # The second cause's create fails for good (422); the first is stored.
    tracker.faults = [
        Fault("/repos/acme/search/issues", status=0),
        Fault("/repos/acme/search/issues", status=422, body="labels invalid"),
    ]
    first = run_export(engine, tracker_settings, labelled, "github", "acme/search")
    assert [r.action for r in first.results] == ["create", "failed"]
    assert "422" in (first.results[1].error or "")
    assert TOKEN not in (first.results[1].error or "")
    second = run_export(engine, tracker_settings, labelled, "github", "acme/search")
    assert [r.action for r in second.results] == ["unchanged", "create"]
    assert len([k for k in tracker.issues if k.startswith("github:")]) == 2


def test_dry_run_shows_requests_without_secrets(
    engine: Engine,
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
) -> None:
    base, tracker = fake
    outcome = run_export(engine, tracker_settings, labelled, "github", "acme/search", dry_run=True)
    document = outcome.model_dump(mode="json")
    assert tracker.requests == []
    assert [r["action"] for r in document["results"]] == ["create", "create"]
    request = document["requests"][0]
    assert request["method"] == "POST"
    assert request["url"] == f"{base}/repos/acme/search/issues"
    assert request["headers"]["Authorization"] == "***"
    assert request["body"]["labels"] == ["misstriage", "cause:not-indexed"]
    assert TOKEN not in json.dumps(document)


@pytest.mark.parametrize(
    ("tracker_name", "target", "created_key"),
    [
        ("gitlab", "search/relevance", "gitlab:"),
        ("jira", "SEARCH", "jira:SEARCH-"),
        ("linear", "team-1", "linear:"),
        ("webhook", "{base}/hook", "webhook:"),
    ],
)
def test_other_trackers_create_and_update(
    engine: Engine,
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
    tracker_name: str,
    target: str,
    created_key: str,
) -> None:
    base, tracker = fake
    target = target.format(base=base)
    first = run_export(engine, tracker_settings, labelled, tracker_name, target)
    assert [r.action for r in first.results] == ["create", "create"]
    assert len([k for k in tracker.issues if k.startswith(created_key)]) == 2
    label_one_more(engine, labelled)
    # Make the existing causes change too, so every issue is updated.
    second = run_export(engine, tracker_settings, labelled, tracker_name, target)
    assert [r.action for r in second.results] == ["unchanged", "unchanged", "create"]
    assert len([k for k in tracker.issues if k.startswith(created_key)]) == 3
    if tracker_name == "jira":
        issue = next(v for k, v in tracker.issues.items() if k.startswith("jira:"))
        table = next(c for c in issue["description"]["content"] if c["type"] == "table")
        assert len(table["content"]) == 2  # header + the one not-indexed miss
    if tracker_name == "gitlab":
        issue = next(v for k, v in tracker.issues.items() if k.startswith("gitlab:"))
        assert issue["labels"] == "misstriage,cause:not-indexed"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_export_api_and_roles(
    client: TestClient,
    accounts: dict[Role, Account],
    tracker_settings: Settings,
    engine: Engine,
    labelled: tuple[GoldenSet, Run, Triage, User],
) -> None:
    client.app.state.settings = tracker_settings  # type: ignore[attr-defined]
    triage = labelled[2]
    url = f"/api/v1/triages/{triage.id}/exports"
    body = {"tracker": "github", "target": "acme/search", "dry_run": True}
    assert client.post(url, json=body, headers=accounts[Role.REVIEWER].headers).status_code == 403
    dry = client.post(url, json=body, headers=accounts[Role.LEAD].headers)
    assert dry.status_code == 200
    assert len(dry.json()["requests"]) == 2
    pushed = client.post(url, json=body | {"dry_run": False}, headers=accounts[Role.LEAD].headers)
    assert [r["action"] for r in pushed.json()["results"]] == ["create", "create"]
    assert "requests" not in pushed.json()
    bad = client.post(
        url, json={"tracker": "github", "target": "not a repo"}, headers=accounts[Role.LEAD].headers
    )
    assert (bad.status_code, bad.json()["error"]["code"]) == (422, "bad_github_target")


def test_cli_export_dry_run_and_push(
    database_url: str,
    engine: Engine,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
) -> None:
    base, tracker = fake
    env = {
        **service_environment(database_url),
        "MISSTRIAGE_GITHUB_API_URL": base,
        "MISSTRIAGE_GITHUB_TOKEN": TOKEN,
        "MISSTRIAGE_ALLOW_LOCAL_NETWORK": "true",  # the fake tracker is on 127.0.0.1
    }
    args = [
        "export",
        "--triage",
        str(labelled[2].id),
        "--tracker",
        "github",
        "--target",
        "acme/search",
    ]
    dry = run_misstriage(*args, "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert TOKEN not in dry.stdout + dry.stderr
    assert len(json.loads(dry.stdout)["requests"]) == 2
    assert tracker.requests == []
    pushed = run_misstriage(*args, env=env)
    assert pushed.returncode == 0, pushed.stderr
    assert [r["action"] for r in json.loads(pushed.stdout)["results"]] == ["create", "create"]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_export_panel_preview_and_push(
    client: TestClient,
    accounts: dict[Role, Account],
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
) -> None:
    from bs4 import BeautifulSoup

    from tests.support.service import login

    _, tracker = fake
    client.app.state.settings = tracker_settings  # type: ignore[attr-defined]
    triage = labelled[2]
    login(client, accounts[Role.LEAD].email)
    form = {"tracker": "github", "target": "acme/search"}
    origin = {"Origin": "http://testserver"}
    preview = client.post(
        f"/triages/{triage.id}/exports", data=form | {"action": "preview"}, headers=origin
    )
    assert preview.status_code == 200
    soup = BeautifulSoup(preview.text, "html.parser")
    assert soup.select_one("#export-results caption").get_text() == "Preview: nothing was sent"
    assert next(s.get_text() for s in soup.select("details.request summary")).startswith(
        "POST http://127.0.0.1:"
    )
    assert TOKEN not in preview.text
    assert tracker.requests == []
    assert preview.history[0].status_code == 303  # the dry run lives at a GET URL
    assert preview.url.path == f"/triages/{triage.id}/export-preview"
    pushed = client.post(
        f"/triages/{triage.id}/exports",
        data=form | {"action": "push"},
        headers=origin,
        follow_redirects=False,
    )
    # post/redirect/get: a reload of the page the push leads to pushes nothing again
    assert pushed.status_code == 303
    assert pushed.headers["location"] == f"/triages/{triage.id}#export"
    dashboard = client.get(pushed.headers["location"])
    soup = BeautifulSoup(dashboard.text, "html.parser")
    # the sentence is in the export panel the redirect scrolls to, not at the top
    assert soup.select_one("#flash [data-flash]") is None
    assert soup.select_one("#export #export-message").get_text() == (
        "Created 2 issues on GitHub acme/search, updated 0, 0 unchanged."
    )
    links = [a["href"] for a in soup.select("#exports a")]
    assert len(links) == 2
    assert all("/acme/search/issues/" in h for h in links)
    assert len(tracker.issues) == 2
    client.get(pushed.headers["location"])  # the reload
    assert len(tracker.issues) == 2
    assert len([r for r in tracker.requests if r.method == "POST"]) == 2
    login(client, accounts[Role.REVIEWER].email)
    reviewer_view = BeautifulSoup(client.get(f"/triages/{triage.id}").text, "html.parser")
    assert reviewer_view.select_one("#export") is None
