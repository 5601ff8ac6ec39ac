"""The HTML UI: login, CSRF, the golden-set pages as full pages and as HTMX fragments."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.http.deps import SESSION_COOKIE
from app.models import Role
from tests.support.samples import QRELS, QUERIES, RUN
from tests.support.service import ORIGIN, PASSWORD, Account, get, login


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def lead_client(client: TestClient, accounts: dict[Role, Account]) -> Iterator[TestClient]:
    login(client, accounts[Role.LEAD].email)
    return client


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_login_sets_a_safe_cookie_and_rotates_it(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    response = client.post(
        "/login",
        data={"email": "lead@example.com", "password": PASSWORD, "next": "/tokens"},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/tokens"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=lax" in cookie
    assert "Path=/" in cookie
    first = client.cookies[SESSION_COOKIE]
    login(client, "lead@example.com")
    assert client.cookies[SESSION_COOKIE] != first
    assert client.get("/golden-sets").status_code == 200


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_wrong_password_and_offsite_next(client: TestClient, accounts: dict[Role, Account]) -> None:
    response = client.post(
        "/login", data={"email": "lead@example.com", "password": "wrong"}, headers=ORIGIN
    )
    assert response.status_code == 400
    assert response.headers["x-error-code"] == "invalid_credentials"
    assert SESSION_COOKIE not in client.cookies
    response = client.post(
        "/login",
        data={"email": "lead@example.com", "password": PASSWORD, "next": "//evil.example/"},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert response.headers["location"] == "/"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_csrf_refuses_cross_site_cookie_writes(lead_client: TestClient) -> None:
    url = "/golden-sets"
    files = {"qrels": ("qrels.txt", QRELS)}
    for headers in ({}, {"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        response = lead_client.post(
            url, data={"name": "x"}, files=files, headers=headers, follow_redirects=False
        )
        assert response.status_code == 403, headers
        assert response.headers["x-error-code"] == "csrf_failed"
        page = BeautifulSoup(response.text, "html.parser")
        assert page.select_one("header.top") is not None
        assert "cross-site request refused" in page.select_one('[role="alert"]').get_text()
    ok = lead_client.post(
        url,
        data={"name": "x"},
        files=files,
        headers={"Sec-Fetch-Site": "same-origin"},
        follow_redirects=False,
    )
    assert ok.status_code == 303


def test_golden_set_pages(lead_client: TestClient, mode: str) -> None:
    response = lead_client.post(
        "/golden-sets",
        data={"name": "help <b>centre</b>"},
        headers=ORIGIN,
        files={"qrels": ("qrels.txt", QRELS), "queries": ("queries.jsonl", QUERIES)},
        follow_redirects=False,
    )
    assert response.status_code == 303
    golden_url = response.headers["location"]
    response = lead_client.post(
        f"{golden_url}/runs",
        data={"name": "bm25"},
        files={"run": ("bm25.trec", RUN)},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert response.status_code == 303

    listing = get(lead_client, "/golden-sets", mode)
    links = [a for a in listing.select("table.data a")]
    assert [a.get_text() for a in links] == ["help <b>centre</b>"]  # escaped, not markup
    page = get(lead_client, f"{golden_url}?k=2&depth=10", mode)
    assert page.find("h1").get_text() == "help <b>centre</b>"
    header = [th.get_text() for th in page.select("#runs-table thead th")]
    assert header[:6] == ["Run", "R@2", "R@10", "nDCG@2", "micro R@10", "misses@10"]
    row = page.select_one('#runs-table tr[data-run="bm25"]')
    cells = {td["data-measure"]: td.get_text() for td in row.select("td[data-measure]")}
    assert cells == {
        "recall_k": "0.2500",
        "recall_depth": "0.5000",
        "ndcg_k": "0.4131",
        "micro_depth": "0.6667",
        "misses": "1",
    }


def test_bad_upload_rerenders_the_form_with_the_line(lead_client: TestClient) -> None:
    response = lead_client.post(
        "/golden-sets",
        data={"name": "g"},
        files={"qrels": ("mine.qrels", "q1 0 a one\n")},
        headers=ORIGIN,
    )
    assert response.status_code == 400
    assert response.headers["x-error-code"] == "bad_input"
    soup = BeautifulSoup(response.text, "html.parser")
    assert (
        soup.select_one(".error").get_text() == "mine.qrels, line 1: grade 'one' is not an integer."
    )
    assert soup.select_one('input[name="name"]')["value"] == "g"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_reviewer_sees_no_import_forms(client: TestClient, accounts: dict[Role, Account]) -> None:
    login(client, accounts[Role.REVIEWER].email)
    soup = BeautifulSoup(client.get("/golden-sets").text, "html.parser")
    assert soup.select('form[enctype="multipart/form-data"]') == []
    response = client.post(
        "/golden-sets", data={"name": "x"}, headers=ORIGIN, files={"qrels": ("q", QRELS)}
    )
    assert response.status_code == 403


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_token_page_shows_the_secret_once(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    login(client, accounts[Role.REVIEWER].email)
    response = client.post("/tokens", data={"name": "laptop"}, headers=ORIGIN)
    assert response.status_code == 201
    secret = BeautifulSoup(response.text, "html.parser").select_one("code.secret").get_text()
    assert secret.startswith("mt_")
    assert (
        client.get("/api/v1/me", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
    )
    again = client.get("/tokens").text
    assert secret not in again
    token_id = client.get("/api/v1/tokens", headers={"Authorization": f"Bearer {secret}"}).json()[
        "items"
    ][-1]["id"]
    client.post(f"/tokens/{token_id}/revoke", headers=ORIGIN)
    assert (
        client.get("/api/v1/me", headers={"Authorization": f"Bearer {secret}"}).status_code == 401
    )


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_logout_ends_the_session(client: TestClient, accounts: dict[Role, Account]) -> None:
    login(client, accounts[Role.LEAD].email)
    cookie = client.cookies[SESSION_COOKIE]
    assert client.post("/logout", headers=ORIGIN, follow_redirects=False).status_code == 303
    client.cookies.set(SESSION_COOKIE, cookie)  # replaying the old cookie gets nothing
    assert client.get("/golden-sets", follow_redirects=False).status_code == 303


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_security_headers(client: TestClient) -> None:
    headers = client.get("/login").headers
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "unsafe-inline" not in headers["content-security-policy"]
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "same-origin"
