"""The dashboard's export panel without tracker credentials (as in the demo): the preview is
a dry run that works anyway, the page says which setting a push needs, and a push refused for
want of it is a page; the backlog downloads are links on the dashboard."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app.models import Role
from tests.support.service import ORIGIN, Account, get, login
from tests.support.triage import make_triage


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def labelled_triage(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp: Path
) -> int:
    _, _, triage = make_triage(engine, tmp, queries=1, per_query=2)
    lead = accounts[Role.LEAD].headers
    for category in ("not-indexed", "chunk-boundary"):
        miss = client.post(f"/api/v1/triages/{triage.id}/claim", headers=lead).json()
        answer = client.post(
            f"/api/v1/misses/{miss['id']}/label",
            headers=lead,
            json={"category": category, "version": 1},
        )
        assert answer.status_code == 200
    assert triage.id is not None
    return triage.id


@pytest.mark.parametrize("tracker", ["github", "gitlab", "jira", "linear", "webhook"])
def test_preview_works_without_credentials(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    tmp_path: Path,
    tracker: str,
) -> None:
    triage_id = labelled_triage(client, accounts, engine, tmp_path)
    login(client, accounts[Role.LEAD].email)
    target = {
        "github": "acme/search",
        "gitlab": "acme/search",
        "jira": "SEARCH",
        "linear": "TEAM",
        "webhook": "https://hooks.example.com/misstriage",
    }[tracker]
    # the form's Preview: without JavaScript a POST answered by the dry run (a GET of its
    # own, which a reload shows again, for every tracker but a webhook: its URL stays out of
    # the address)
    form = BeautifulSoup(client.get(f"/triages/{triage_id}").text, "html.parser")
    action = form.select_one("#export form")["action"]
    assert form.select_one("#export form")["method"] == "post"
    response = client.post(
        action,
        data={"tracker": tracker, "target": target, "action": "preview"},
        headers={**ORIGIN, "Accept": "text/html"},
    )
    assert [r.status_code for r in response.history] == ([] if tracker == "webhook" else [303])
    assert response.status_code == 200, response.text[:500]
    soup = BeautifulSoup(response.text, "html.parser")
    assert soup.select_one("#export-error") is None
    assert soup.select_one("#export-results caption").get_text() == "Preview: nothing was sent"
    assert [tr["data-cause"] for tr in soup.select("#export-results tbody tr")] == [
        "not-indexed",
        "chunk-boundary",
    ]
    assert len(soup.select("details.request")) == 2
    needed = soup.select_one(f'#credentials li[data-tracker="{tracker}"]').get_text(" ")
    assert "(not set" in needed
    # the same dry run posted (the API's way, and older pages) answers the same
    posted = client.post(
        f"/triages/{triage_id}/exports",
        data={"tracker": tracker, "target": target, "action": "preview"},
        headers=ORIGIN,
    )
    assert posted.status_code == 200
    again = BeautifulSoup(posted.text, "html.parser")
    assert [s.get_text() for s in again.select("details.request summary")] == [
        s.get_text() for s in soup.select("details.request summary")
    ]


def test_the_page_names_the_credential_and_refuses_a_push_as_a_page(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    triage_id = labelled_triage(client, accounts, engine, tmp_path)
    login(client, accounts[Role.LEAD].email)
    soup = get(client, f"/triages/{triage_id}", "page")
    needs = {
        li["data-tracker"]: li.get_text(" ", strip=True) for li in soup.select("#credentials li")
    }
    assert needs["github"] == "a push to GitHub needs MISSTRIAGE_GITHUB_TOKEN (not set)"
    assert needs["jira"] == (
        "a push to Jira needs MISSTRIAGE_JIRA_API_URL and MISSTRIAGE_JIRA_EMAIL and "
        "MISSTRIAGE_JIRA_TOKEN (not set)"
    )
    form = soup.select_one("#export form")
    assert form["method"] == "post"
    pushed = client.post(
        form["action"],
        data={"tracker": "github", "target": "acme/search", "action": "push"},
        headers={**ORIGIN, "Accept": "text/html"},
    )
    assert pushed.status_code == 400
    assert pushed.headers["content-type"].startswith("text/html")
    assert pushed.headers["x-error-code"] == "credentials_missing"
    page = BeautifulSoup(pushed.text, "html.parser")
    assert page.find("html") is not None
    assert page.select_one("#export-error").get_text() == (
        "Nothing was sent: a push to GitHub needs MISSTRIAGE_GITHUB_TOKEN in the server's "
        "settings. The preview works without."
    )
    assert page.select_one("#export-results") is None


def test_the_dashboard_and_the_backlog_link_the_downloads(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path, mode: str
) -> None:
    triage_id = labelled_triage(client, accounts, engine, tmp_path)
    login(client, accounts[Role.REVIEWER].email)
    for url in (f"/triages/{triage_id}", f"/triages/{triage_id}/backlog"):
        soup = get(client, url, mode)
        as_csv = client.get(soup.select_one("#download-csv")["href"])
        assert as_csv.status_code == 200, url
        assert as_csv.headers["content-type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(as_csv.content.decode("utf-8-sig"))))
        assert sorted(r["cause"] for r in rows) == ["chunk-boundary", "not-indexed"]
        as_json = client.get(soup.select_one("#download-json")["href"])
        assert as_json.status_code == 200, url
        assert json.loads(as_json.text)["misses"] == 2
