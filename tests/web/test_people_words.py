"""Words for people on every error page: validation errors as sentences built from the field
and the kind of error (the API keeps pydantic's codes), an unknown page in the layout a
logged-in user sees everywhere, a run never compared with itself, one name for every
backlog download."""

from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy.engine import Engine

from app.models import Role
from tests.support.lead_runs import FIRST, HYBRID, QRELS, QUERIES
from tests.support.service import ORIGIN, Account, login
from tests.support.triage import make_triage

HTMX = {"HX-Request": "true"}


@pytest.fixture
def golden(client: TestClient, accounts: dict[Role, Account]) -> dict[str, str]:
    """A golden set with two runs, the lead logged in: its path and the runs' ids."""
    login(client, accounts[Role.LEAD].email)
    response = client.post(
        "/golden-sets",
        data={"name": "help"},
        headers=ORIGIN,
        files={"qrels": ("q.txt", QRELS), "queries": ("q.tsv", QUERIES)},
        follow_redirects=False,
    )
    url = response.headers["location"]
    ids = {"url": url}
    for name, content in (("first", FIRST), ("hybrid", HYBRID)):
        created = client.post(
            f"{url}/runs",
            data={"name": name},
            headers=ORIGIN,
            files={"run": (f"{name}.trec", content)},
            follow_redirects=False,
        )
        assert created.status_code == 303, created.text
    listing = BeautifulSoup(client.get(url).text, "html.parser")
    for tr in listing.select("#runs-table tbody tr"):
        ids[tr["data-run"]] = tr.a["href"].split("/runs/")[1].split("?")[0]
    return ids


def alert_of(response: Response, status: int, code: str) -> tuple[BeautifulSoup, str]:
    assert response.status_code == status, response.text[:300]
    assert response.headers["x-error-code"] == code
    soup = BeautifulSoup(response.text, "html.parser")
    alert = soup.select_one('[role="alert"]')
    assert alert is not None
    return soup, " ".join(alert.get_text().split())


def test_validation_errors_are_sentences_on_pages(
    client: TestClient, golden: dict[str, str]
) -> None:
    url = golden["url"]
    cases = [
        ("/runs/abc", 'The run address must end in a number (got "abc").'),
        ("/runs/0", 'The run address must end in a number of 1 or more (got "0").'),
        (f"{url}/compare?a={golden['first']}", "Choose a second run to compare with."),
        (
            f"{url}/compare?a={golden['first']}&b=x",
            'The second run must be a whole number (got "x").',
        ),
    ]
    for path, words in cases:
        for headers in ({}, HTMX):
            _, text = alert_of(client.get(path, headers=headers), 422, "validation_error")
            assert words in text, (path, text)
            assert "Input should" not in text
            assert "Field required" not in text
    # Two errors at once: a sentence each.
    soup, _ = alert_of(client.get(f"{url}/compare"), 422, "validation_error")
    lines = [li.get_text() for li in soup.select('[role="alert"] ul.details li')]
    assert lines == ["Choose a run to compare.", "Choose a second run to compare with."]
    # A form without its file.
    _, text = alert_of(
        client.post("/golden-sets", data={"name": "x"}, headers=ORIGIN), 422, "validation_error"
    )
    assert "Choose a qrels file to upload." in text


def test_the_api_keeps_its_codes(client: TestClient, accounts: dict[Role, Account]) -> None:
    response = client.get("/api/v1/runs/abc", headers=accounts[Role.LEAD].headers)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert error["message"] == "the request is not valid"
    assert error["details"][0]["type"] == "int_parsing"
    assert error["details"][0]["loc"] == ["path", "run_id"]


def test_an_unknown_page_has_the_logged_in_header(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    login(client, accounts[Role.LEAD].email)
    for path, status, code in (
        ("/no/such/page", 404, "not_found"),
        ("/runs/abc", 422, "validation_error"),
    ):
        soup, _ = alert_of(client.get(path), status, code)
        nav = [a.get_text() for a in soup.select("header.top nav a")]
        assert "API tokens" in nav, path
        assert soup.select_one("header.top form.who button").get_text() == "Log out"
        assert "lead@example.com" in soup.select_one("header.top .who").get_text()
    soup, text = alert_of(client.get("/no/such/page"), 404, "not_found")
    assert text == (
        "404 Not found. There is no page at this address: the link may be old, or mistyped."
    )
    assert "Not Found" not in text
    assert soup.title.get_text() == "404 Not found · misstriage"
    # A cookie that leads nowhere: the anonymous header, and still a page.
    client.cookies.clear()
    client.cookies.set("misstriage_session", "forged")
    soup, _ = alert_of(client.get("/no/such/page"), 404, "not_found")
    assert soup.select_one("header.top form.who") is None


def test_a_run_is_never_compared_with_itself(client: TestClient, golden: dict[str, str]) -> None:
    same = f"{golden['url']}/compare?a={golden['first']}&b={golden['first']}"
    for headers in ({}, HTMX):
        _, text = alert_of(client.get(same, headers=headers), 422, "same_run")
        assert "Run 'first' was chosen twice: choose a second, different run" in text
    other = f"{golden['url']}/compare?a={golden['first']}&b={golden['hybrid']}"
    assert client.get(other).status_code == 200


def test_every_backlog_download_has_the_same_name(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1)
    url = f"/api/v1/triages/{triage.id}/backlog"
    names = {}
    for format in ("csv", "jsonl", "json"):
        response = client.get(f"{url}?format={format}", headers=accounts[Role.REVIEWER].headers)
        assert response.status_code == 200, response.text
        names[format] = response.headers["content-disposition"]
    stem = f"misstriage-run-triage-{triage.id}-backlog"
    assert names == {
        f: f"attachment; filename=\"{stem}.{f}\"; filename*=UTF-8''{stem}.{f}" for f in names
    }
