"""Errors a person sees are pages: every HTML error status in the product's layout (or, for an
HTMX request, an alert retargeted to the page's error region); the JSON body for /api/v1 and for
clients that ask for JSON."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup
from fastapi import FastAPI
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy import text
from sqlalchemy.engine import Engine

from app.db import make_engine
from app.main import create_app
from app.models import Role
from tests.support.lead_runs import QRELS
from tests.support.live import free_port
from tests.support.service import ORIGIN, Account, login, make_settings

SQLITE = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
HTMX = {"HX-Request": "true"}


def error_page(response: Response, status: int, code: str, words: str) -> BeautifulSoup:
    """The full error page: the layout (header, brand, nav), the message, a way home."""
    assert response.status_code == status, response.text[:300]
    assert response.headers["x-error-code"] == code
    assert response.headers["content-type"].startswith("text/html")
    soup = BeautifulSoup(response.text, "html.parser")
    assert soup.find("html") is not None
    assert soup.select_one("header.top a.brand") is not None
    assert soup.select_one("header.top nav a") is not None
    alert = soup.select_one('#main [role="alert"]')
    assert alert is not None
    assert alert["data-status"] == str(status)
    assert words in alert.get_text()
    home = soup.select_one(".way-on a[href$='/golden-sets']")
    assert home is not None
    return soup


def error_fragment(response: Response, status: int, code: str, words: str) -> BeautifulSoup:
    """For HTMX: the alert alone, retargeted to the error region every page has."""
    assert response.status_code == status, response.text[:300]
    assert response.headers["x-error-code"] == code
    assert response.headers["hx-retarget"] == "#errors"
    assert response.headers["hx-reswap"] == "innerHTML"
    soup = BeautifulSoup(response.text, "html.parser")
    assert soup.find("html") is None
    assert soup.find("header") is None
    alert = soup.select_one('[role="alert"]')
    assert alert is not None
    assert words in alert.get_text()
    return soup


def golden_set(client: TestClient) -> str:
    response = client.post(
        "/golden-sets",
        data={"name": "help"},
        headers=ORIGIN,
        files={"qrels": ("q.txt", QRELS)},
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    return urlsplit(response.headers["location"]).path


@SQLITE
def test_every_status_is_a_page_and_an_htmx_fragment(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    login(client, accounts[Role.LEAD].email)
    url = golden_set(client)
    cases = [
        ("GET", "/golden-sets/999999", None, 404, "golden_set_not_found", "999999"),
        ("GET", "/no/such/page", None, 404, "not_found", "There is no page at this address"),
        ("GET", "/runs/1/triages", None, 405, "method_not_allowed", "does not answer a GET"),
        ("GET", "/golden-sets/0", None, 422, "validation_error", "a number of 1 or more"),
        ("POST", "/golden-sets", {"name": "x"}, 422, "validation_error", "Choose a qrels file"),
        ("POST", "/runs/999999/triages", {"k": "1", "depth": "5"}, 404, "run_not_found", "999999"),
    ]
    for method, path, data, status, code, words in cases:
        page = client.request(method, path, data=data, headers=ORIGIN)
        error_page(page, status, code, words)
        fragment = client.request(method, path, data=data, headers={**ORIGIN, **HTMX})
        error_fragment(fragment, status, code, words)
    # 405 keeps its Allow header; a 409 (the same golden-set name) is the form page again.
    assert client.get("/runs/1/triages").headers["allow"] == "POST"
    again = client.post(
        "/golden-sets", data={"name": "help"}, headers=ORIGIN, files={"qrels": ("q", QRELS)}
    )
    assert again.status_code == 409
    assert again.headers["x-error-code"] == "name_taken"
    soup = BeautifulSoup(again.text, "html.parser")
    assert soup.select_one("header.top nav") is not None
    assert soup.select_one('form input[name="name"]')["value"] == "help"
    # 403: a reviewer on a lead's form.
    login(client, accounts[Role.REVIEWER].email)
    for headers, check in ((ORIGIN, error_page), ({**ORIGIN, **HTMX}, error_fragment)):
        refused = client.post(f"{url}/settings", data={"causes": "a"}, headers=headers)
        check(refused, 403, "forbidden", "lead role")
    # The way back: the page the request came from, when it is ours.
    came_from = client.get("/golden-sets/999999", headers={"Referer": f"http://testserver{url}"})
    back = BeautifulSoup(came_from.text, "html.parser").select_one('.way-on a[rel="prev"]')
    assert back is not None
    assert back["href"] == url
    elsewhere = client.get("/golden-sets/999999", headers={"Referer": "https://evil.example/x"})
    assert BeautifulSoup(elsewhere.text, "html.parser").select_one('a[rel="prev"]') is None


@SQLITE
def test_json_for_the_api_and_for_clients_that_ask_for_it(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    lead = accounts[Role.LEAD]
    api = client.get("/api/v1/golden-sets/999999", headers=lead.headers)
    assert api.status_code == 404
    assert api.json()["error"]["code"] == "golden_set_not_found"
    login(client, lead.email)
    wants_json = client.get("/golden-sets/999999", headers={"Accept": "application/json"})
    assert wants_json.status_code == 404
    assert wants_json.json()["error"] == {
        "code": "golden_set_not_found",
        "message": "no golden set 999999",
        "details": None,
    }
    # A browser's Accept names both: it gets the page.
    browser = client.get(
        "/golden-sets/999999", headers={"Accept": "text/html,application/json;q=0.9"}
    )
    error_page(browser, 404, "golden_set_not_found", "999999")
    method = client.get("/runs/1/triages", headers={"Accept": "application/json"})
    assert method.json()["error"]["code"] == "method_not_allowed"
    # Without a login, a page route sends the browser to the login page, the API says 401.
    client.cookies.clear()
    assert client.get("/golden-sets/1", follow_redirects=False).status_code == 303
    assert client.get("/api/v1/golden-sets/1").json()["error"]["code"] == "not_authenticated"


def _boom() -> None:
    raise RuntimeError("secret-internal-detail")


@SQLITE
def test_500_is_a_page_without_the_traceback(
    settings: object, engine: Engine, accounts: dict[Role, Account]
) -> None:
    app = create_app(settings, engine)  # type: ignore[arg-type]
    assert isinstance(app, FastAPI)
    # A route that fails the way a bug would: the handler is what is under test.
    app.add_api_route("/boom", _boom, methods=["GET"])
    app.add_api_route("/api/v1/boom", _boom, methods=["GET"])
    with TestClient(app, raise_server_exceptions=False) as client:
        page = client.get("/boom", headers={"X-Request-ID": "req-boom"})
        soup = error_page(page, 500, "internal_error", "unexpected error")
        assert "secret-internal-detail" not in page.text
        assert "Traceback" not in page.text
        assert "req-boom" in soup.select_one('[role="alert"]').get_text()
        error_fragment(client.get("/boom", headers=HTMX), 500, "internal_error", "unexpected")
        api = client.get("/api/v1/boom")
        assert api.status_code == 500
        assert api.json()["error"]["code"] == "internal_error"


@pytest.mark.tracebacks_expected  # the division by zero: a bug's 500, logged with its traceback
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_value_the_database_refuses_is_bad_input_not_a_500(
    settings: object, engine: Engine, accounts: dict[Role, Account]
) -> None:
    """A value no check caught and PostgreSQL refuses (a NUL byte in text, a number out of
    its range): 400 bad_input, a page for a browser and the JSON body for a program. Another
    DataError (a division by zero the code made) stays a bug: a 500."""

    def run(sql: str, value: object) -> None:
        with engine.begin() as connection:  # the real driver's and server's refusals
            connection.execute(text(sql), {"value": value})

    def nul() -> None:
        run("SELECT CAST(:value AS text)", "a\x00b")

    def out_of_range() -> None:
        run("SELECT CAST(:value AS integer)", "99999999999")

    def divided_by_zero() -> None:
        run("SELECT 1 / CAST(:value AS integer)", "0")

    app = create_app(settings, engine)  # type: ignore[arg-type]
    assert isinstance(app, FastAPI)
    for name, route in (("nul", nul), ("range", out_of_range), ("zero", divided_by_zero)):
        app.add_api_route(f"/{name}", route, methods=["GET"])
        app.add_api_route(f"/api/v1/{name}", route, methods=["GET"])
    with TestClient(app, raise_server_exceptions=False) as client:
        for name in ("nul", "range"):
            page = client.get(f"/{name}")
            error_page(page, 400, "bad_input", "refused a value")
            assert "Traceback" not in page.text
            api = client.get(f"/api/v1/{name}")
            assert api.status_code == 400
            assert api.json()["error"]["code"] == "bad_input"
        error_page(client.get("/zero"), 500, "internal_error", "unexpected error")
        assert client.get("/api/v1/zero").json()["error"]["code"] == "internal_error"


def test_503_is_a_page_when_the_database_is_down() -> None:
    port = free_port()  # nothing listens there
    settings = make_settings(f"postgresql://misstriage:pw@127.0.0.1:{port}/misstriage")
    engine = make_engine(settings)
    form = {"email": "a@example.com", "password": "long enough", "next": "/"}
    try:
        with TestClient(create_app(settings, engine), raise_server_exceptions=False) as client:
            page = client.post("/login", data=form, headers=ORIGIN)
            error_page(page, 503, "database_unavailable", "The database is unavailable")
            assert page.headers["retry-after"] == "2"
            fragment = client.post("/login", data=form, headers={**ORIGIN, **HTMX})
            error_fragment(fragment, 503, "database_unavailable", "unavailable")
    finally:
        engine.dispose()


@SQLITE
def test_413_on_a_form_upload_is_a_page(
    settings: object, engine: Engine, accounts: dict[Role, Account]
) -> None:
    small = settings.model_copy(update={"upload_max_bytes": 1000})  # type: ignore[attr-defined]
    with TestClient(create_app(small, engine)) as client:
        login(client, accounts[Role.LEAD].email)
        files = {"qrels": ("q.txt", "q1 0 a 1\n" * 500)}
        page = client.post("/golden-sets", data={"name": "big"}, files=files, headers=ORIGIN)
        error_page(page, 413, "too_large", "larger than 1000 bytes")
        fragment = client.post(
            "/golden-sets", data={"name": "big"}, files=files, headers={**ORIGIN, **HTMX}
        )
        error_fragment(fragment, 413, "too_large", "larger than 1000 bytes")
        api = client.post(
            "/api/v1/golden-sets",
            data={"name": "big"},
            files=files,
            headers=accounts[Role.LEAD].headers,
        )
        assert api.status_code == 413
        assert api.json()["error"]["details"] == {"max_bytes": 1000}
