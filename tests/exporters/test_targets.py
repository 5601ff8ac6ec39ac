"""A tracker target is checked by its tracker's rule before anything is planned: a refused
one answers 422 with a code naming the rule (the API's error body, the export panel's page,
``misstriage export``'s exit 2) and sends nothing. A target, or an issue id a tracker gave,
never changes a request's path beyond its own segments: the fake tracker on 127.0.0.1 shows
the path each request arrived with."""

from __future__ import annotations

import contextlib
import re

import httpx
import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.exporters import Draft, Request, Sender, TrackerError
from app.exporters.base import TargetRefused
from app.exporters.github import GitHubExporter
from app.exporters.gitlab import GitLabExporter
from app.exporters.jira import JiraExporter
from app.models import Export, GoldenSet, Role, Run, Triage, User
from app.services.errors import Invalid
from app.settings import Settings
from tests.support.cli import run_misstriage, service_environment
from tests.support.exports import run_export
from tests.support.fake_tracker import JIRA_EMAIL, TOKEN, Tracker
from tests.support.service import HTMX, ORIGIN, Account, login

REFUSED = [
    ("github", "../x"),
    ("github", "acme/.."),
    ("github", "./search"),
    ("github", "acme/search/../../x"),
    ("github", "acme/../../user/repos"),
    ("github", "acme/search?x=1"),
    ("github", "acme/search#1"),
    ("github", "acme%2F..%2Fx/search"),
    ("github", "acme"),
    ("github", "-acme/search"),
    ("github", "acme/" + "r" * 101),
    ("gitlab", "../x"),
    ("gitlab", "acme/../x"),
    ("gitlab", "acme/./x"),
    ("gitlab", "acme/"),
    ("gitlab", "/acme/x"),
    ("gitlab", "acme//x"),
    ("gitlab", "acme/x.git"),
    ("gitlab", "acme/x?y"),
    ("gitlab", "0"),
    ("jira", "../x"),
    ("jira", "search"),
    ("jira", "SE/ARCH"),
    ("linear", "../x"),
    ("linear", "team 1"),
    ("linear", "team/1"),
    ("webhook", "../x"),
    ("webhook", "ftp://example.com/hook"),
]
ACCEPTED = [
    ("github", "acme/search"),
    ("github", "Acme-Corp/.github"),
    ("github", "a_b/search.v2_x-y"),
    ("gitlab", "acme/search"),
    ("gitlab", "acme/sub.group/_search-2"),
    ("gitlab", "12345"),
    ("jira", "SEARCH"),
    ("jira", "S2_X"),
    ("linear", "TEAM"),
    ("linear", "team-1"),
    ("linear", "9cfb482a-81e3-4154-b5b9-2c805e70a02d"),
]


TITLES = {"github": "GitHub", "gitlab": "GitLab", "jira": "Jira"}


def code_of(tracker: str) -> str:
    return f"bad_{tracker}_target"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("tracker", "target"), REFUSED)
def test_a_target_against_its_trackers_rule_is_refused_before_anything_is_sent(
    engine: Engine,
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
    tracker: str,
    target: str,
) -> None:
    for dry_run in (True, False):
        with pytest.raises(Invalid) as refused:
            run_export(engine, tracker_settings, labelled, tracker, target, dry_run=dry_run)
        assert (refused.value.status, refused.value.code) == (422, code_of(tracker))
        assert refused.value.details == {"tracker": tracker}
    assert fake[1].requests == []


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("tracker", "target"), ACCEPTED)
def test_targets_of_each_trackers_form_are_planned(
    engine: Engine,
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    tracker: str,
    target: str,
) -> None:
    outcome = run_export(engine, tracker_settings, labelled, tracker, target, dry_run=True)
    assert outcome.requests
    if tracker == "github":
        for request in outcome.requests:
            assert httpx.URL(request.url).raw_path.decode() == f"/repos/{target}/issues"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("tracker", "target"), [("github", "../x"), ("gitlab", "acme/../x"), ("jira", "../x")]
)
def test_the_api_answers_422_with_the_rules_code(
    client: TestClient,
    accounts: dict[Role, Account],
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
    tracker: str,
    target: str,
) -> None:
    client.app.state.settings = tracker_settings  # type: ignore[attr-defined]
    url = f"/api/v1/triages/{labelled[2].id}/exports"
    for dry_run in (True, False):
        answer = client.post(
            url,
            json={"tracker": tracker, "target": target, "dry_run": dry_run},
            headers=accounts[Role.LEAD].headers,
        )
        assert answer.status_code == 422
        error = answer.json()["error"]
        assert set(error) == {"code", "message", "details"}
        assert error["code"] == code_of(tracker)
        assert error["details"] == {"tracker": tracker}
        assert error["message"].startswith(f"a {TITLES[tracker]} target is ")
    assert fake[1].requests == []


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("mode", ["page", "fragment"])
def test_the_export_panel_shows_the_rule(
    client: TestClient,
    accounts: dict[Role, Account],
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
    mode: str,
) -> None:
    client.app.state.settings = tracker_settings  # type: ignore[attr-defined]
    triage_id = labelled[2].id
    login(client, accounts[Role.LEAD].email)
    headers = HTMX if mode == "fragment" else ORIGIN
    preview = client.get(
        f"/triages/{triage_id}/export-preview",
        params={"tracker": "github", "target": "../x"},
        headers={"HX-Request": "true"} if mode == "fragment" else {},
    )
    pushed = client.post(
        f"/triages/{triage_id}/exports",
        data={"tracker": "github", "target": "../x", "action": "push"},
        headers=headers,
    )
    for answer in (preview, pushed):
        assert (answer.status_code, answer.headers["x-error-code"]) == (422, "bad_github_target")
        soup = BeautifulSoup(answer.text, "html.parser")
        assert (soup.find("html") is not None) == (mode == "page")
        error = soup.select_one("section#export #export-error")
        assert error is not None
        assert "owner/repository" in error.get_text()
        assert soup.select_one("section#export input[name=target]")["value"] == "../x"
        assert soup.select_one("#export-results") is None
    assert fake[1].requests == []


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_cli_exits_2_naming_the_rule(
    database_url: str,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
) -> None:
    base, tracker = fake
    env = {
        **service_environment(database_url),
        "MISSTRIAGE_GITHUB_API_URL": base,
        "MISSTRIAGE_GITHUB_TOKEN": TOKEN,
        "MISSTRIAGE_ALLOW_LOCAL_NETWORK": "true",
    }
    args = ["export", "--triage", str(labelled[2].id), "--tracker", "github", "--target", "../x"]
    for extra in (["--dry-run"], []):
        done = run_misstriage(*args, *extra, env=env)
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""
        assert "owner/repository" in done.stderr
        assert "Traceback" not in done.stderr
    assert tracker.requests == []


DRAFT = Draft(triage_id=1, category="c", title="t", body="b", labels=["x"], count=1)
#: Issue ids as a tracker might answer them (one that lies, or one that is compromised).
HOSTILE_IDS = ["../../user", "1/../../../x", "1?admin=1", "1#x", "%2e%2e", "1;x", "a b"]


def _send(request_url: str, method: str, fake: tuple[str, Tracker], **kwargs: object) -> str:
    """Send ``request`` to the fake tracker and answer the path it arrived with."""
    _, tracker = fake
    before = len(tracker.requests)
    sender = Sender(attempts=1)
    # the fake answers 401 or 404 to these: the path is what counts here
    with httpx.Client() as client, contextlib.suppress(TrackerError):
        sender.send(client, Request(method, request_url, {}, **kwargs))  # type: ignore[arg-type]
    assert len(tracker.requests) == before + 1
    return tracker.requests[-1].path


@pytest.mark.parametrize(
    "target", ["../x", "acme/..", "./.", "acme/search/../../x", "acme/search/..", "a/b/c"]
)
def test_a_github_request_never_leaves_its_repository(
    fake: tuple[str, Tracker], target: str
) -> None:
    """Asked directly (the service checks first), the exporter refuses a target that is not
    one owner and one repository: nothing it plans leaves /repos/{owner}/{repo}/."""
    exporter = GitHubExporter(fake[0], TOKEN)
    with pytest.raises(TargetRefused):
        exporter.create(target, DRAFT)
    with pytest.raises(TargetRefused):
        exporter.update(target, "1", DRAFT)
    assert fake[1].requests == []


@pytest.mark.parametrize("external_id", HOSTILE_IDS)
def test_an_issue_id_stays_one_segment_of_the_path(
    fake: tuple[str, Tracker], external_id: str
) -> None:
    base = fake[0]
    plans = [
        (GitHubExporter(base, TOKEN), "acme/search", r"/repos/acme/search/issues/([^/?#]+)"),
        (GitLabExporter(base, TOKEN), "acme/search", r"/api/v4/projects/acme%2Fsearch/issues/"
         r"([^/?#]+)"),
        (JiraExporter(base, JIRA_EMAIL, TOKEN), "SEARCH", r"/rest/api/3/issue/([^/?#]+)"),
    ]  # fmt: skip
    for exporter, target, shape in plans:
        try:
            request = exporter.update(target, external_id, DRAFT)
        except TargetRefused:
            continue  # refused outright: nothing is sent (dot segments)
        path = _send(request.url, request.method, fake, json=request.json)
        match = re.fullmatch(shape, path)
        assert match is not None, (type(exporter).__name__, path)
        assert httpx.URL(f"http://h/{match.group(1)}").path.removeprefix("/") == external_id


@pytest.mark.parametrize("target", ["acme/search", "Acme-Corp/.github", "a_b/x.y-z"])
def test_a_github_request_arrives_under_its_repository(
    fake: tuple[str, Tracker], target: str
) -> None:
    request = GitHubExporter(fake[0], TOKEN).create(target, DRAFT)
    path = _send(request.url, request.method, fake, json=request.json)
    assert path == f"/repos/{target}/issues"


def test_a_gitlab_project_path_is_one_segment(fake: tuple[str, Tracker]) -> None:
    request = GitLabExporter(fake[0], TOKEN).create("acme/sub/search", DRAFT)
    path = _send(request.url, request.method, fake, json=request.json)
    assert path == "/api/v4/projects/acme%2Fsub%2Fsearch/issues"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_stored_issue_id_that_is_no_path_segment_fails_its_cause_only(
    engine: Engine,
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
) -> None:
    """An issue id a tracker once answered (kept in Export) that a path would resolve away
    fails its own cause's update, sends nothing for it, and the other causes go on."""
    first = run_export(engine, tracker_settings, labelled, "github", "acme/search")
    assert [r.action for r in first.results] == ["create", "create"]
    with Session(engine) as s:
        row = s.exec(select(Export).where(Export.category == "not-indexed")).one()
        row.external_id, row.payload_hash = "..", "changed"
        s.add(row)
        other = s.exec(select(Export).where(Export.category == "vocabulary-mismatch")).one()
        other.payload_hash = "changed"
        s.add(other)
        s.commit()
    sent = len(fake[1].requests)
    again = run_export(engine, tracker_settings, labelled, "github", "acme/search")
    assert [(r.category, r.action) for r in again.results] == [
        ("not-indexed", "failed"),
        ("vocabulary-mismatch", "update"),
    ]
    assert "not a path segment" in (again.results[0].error or "")
    assert [(r.method, r.path) for r in fake[1].requests[sent:]] == [
        ("PATCH", f"/repos/acme/search/issues/{first.results[1].external_id}")
    ]
