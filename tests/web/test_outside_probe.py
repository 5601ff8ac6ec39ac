"""Classes an outside probe found after issue 13, each checked on every route it can reach:
deeply nested JSON bodies (a RecursionError, 500, on routes without a body model), form ids
beyond the database's integers (the review card's miss_id, 500 on both databases), the review
notices answered as bare fragments to a plain form post, a category echoed whole in a
message, and depths that ``str.isdigit`` accepts but ``int`` refuses or cannot hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app.models import Role
from tests.support.routes import concrete, routes
from tests.support.service import ORIGIN, Account, login
from tests.support.triage import make_triage

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)

HTML = {**ORIGIN, "Accept": "text/html"}
HTMX = {**HTML, "HX-Request": "true"}
#: Beyond a 32-bit id, a 64-bit column, and anything a driver converts.
HUGE_IDS = [str(2**31), str(2**63), str(-(2**63) - 1), str(10**30)]
REVIEW_FORMS = {
    "label": {"version": "1", "category": "other", "note": "n"},
    "skip": {"reason": "r"},
    "renew": {},
}


def _is_page(response_text: str) -> bool:
    """A page of the product: the base layout's document and navigation."""
    soup = BeautifulSoup(response_text, "html.parser")
    return soup.find("html") is not None and soup.find("main") is not None


@pytest.mark.parametrize("depth", [100, 900, 20_000])
def test_deeply_nested_json_answers_400_on_every_api_write(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path, depth: int
) -> None:
    make_triage(engine, tmp_path, queries=1, per_query=1)
    admin = {**accounts[Role.ADMIN].headers, "Content-Type": "application/json"}
    body = '{"a":' + "[" * depth + "]" * depth + "}"
    answered = 0
    for route in routes(client):
        if not route.path.startswith("/api/"):
            continue
        for method in sorted(route.methods & {"POST", "PUT", "PATCH"}):
            response = client.request(method, concrete(route.path), content=body, headers=admin)
            assert response.status_code == 400, (method, route.path, response.text[:300])
            error = response.json()["error"]
            assert error["code"] in ("json_too_deep", "bad_request"), error
            answered += 1
    assert answered > 10
    assert client.get("/api/v1/me", headers=accounts[Role.ADMIN].headers).status_code == 200


@pytest.mark.parametrize("action", sorted(REVIEW_FORMS))
@pytest.mark.parametrize("headers", [HTML, HTMX], ids=["page", "htmx"])
def test_a_miss_id_beyond_the_database_is_a_422_not_a_500(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    tmp_path: Path,
    action: str,
    headers: dict[str, str],
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1)
    login(client, accounts[Role.REVIEWER].email)
    url = f"/triages/{triage.id}/review/{action}"
    for miss_id in HUGE_IDS:
        data = {**REVIEW_FORMS[action], "miss_id": miss_id}
        response = client.post(url, data=data, headers=headers, follow_redirects=False)
        assert response.status_code == 422, (miss_id, response.text[:300])
        assert response.headers["content-type"].startswith("text/html")
        assert "Traceback" not in response.text
        if headers is HTML:
            assert _is_page(response.text)


@pytest.mark.parametrize("action", ["claim", "take-back", "label", "skip", "undo", "renew"])
def test_review_notices_are_pages_for_a_plain_post_and_fragments_for_htmx(
    client: TestClient, engine: Engine, tmp_path: Path, action: str
) -> None:
    """Logged out (an expired session): the card's HTMX swap gets the notice; a form posted
    without JavaScript gets a page of the product saying the same, never a bare fragment."""
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1)
    url = f"/triages/{triage.id}/review/{action}"
    data = {"miss_id": "1", "version": "1", "category": "other", "note": "n", "reason": "r"}
    page = client.post(url, data=data, headers=HTML, follow_redirects=False)
    assert page.status_code == 401
    assert page.headers["X-Error-Code"] == "session_expired"
    assert _is_page(page.text), page.text[:300]
    assert "session has expired" in BeautifulSoup(page.text, "html.parser").get_text()
    fragment = client.post(url, data=data, headers=HTMX, follow_redirects=False)
    assert fragment.status_code == 401
    assert not _is_page(fragment.text)
    assert "session has expired" in BeautifulSoup(fragment.text, "html.parser").get_text()


def test_a_huge_category_is_not_echoed_whole(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1)
    reviewer = accounts[Role.REVIEWER]
    claimed = client.post(f"/api/v1/triages/{triage.id}/claim", headers=reviewer.headers)
    miss = claimed.json()
    login(client, reviewer.email)
    category = "A" * 100_000
    for headers in (HTML, HTMX):
        response = client.post(
            f"/triages/{triage.id}/review/label",
            data={"miss_id": miss["id"], "version": miss["version"], "category": category},
            headers=headers,
        )
        assert response.status_code == 422, response.text[:300]
        assert "NOT saved" in response.text
        assert not re.search("A{201,}", response.text)


@pytest.mark.parametrize(
    ("depths", "words"),
    [
        ("²", "not a positive integer"),  # str.isdigit() says yes; int() refuses it
        ("10,²", "not a positive integer"),
        ("9" * 5000, "larger than 100,000"),  # int() refuses more than 4,300 digits
        (str(10**12), "larger than 100,000"),
        ("0,00", "not a positive integer"),
    ],
)
def test_depths_python_reads_differently_are_refused_in_short(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    tmp_path: Path,
    depths: str,
    words: str,
) -> None:
    _, run, _ = make_triage(engine, tmp_path, queries=1, per_query=1)
    response = client.get(
        f"/api/v1/runs/{run.id}/metrics",
        params={"depths": depths},
        headers=accounts[Role.LEAD].headers,
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_depths"
    assert words in error["message"]
    assert len(error["message"]) < 200
    fine = client.get(
        f"/api/v1/runs/{run.id}/metrics",
        params={"depths": "007,100000"},
        headers=accounts[Role.LEAD].headers,
    )
    assert fine.status_code == 200, fine.text[:300]
