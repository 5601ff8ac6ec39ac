"""Error answers follow the Accept header's q-values (app/http/negotiation.py): a page for a
client that prefers HTML, the JSON error body for one that prefers JSON, always JSON on the
API's paths; a malformed or huge header costs bounded work."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from app.http.negotiation import (
    HTML,
    JSON,
    MAX_RANGES,
    MediaRange,
    parse_accept,
    preferred,
    wants_json,
)
from app.models import Role
from tests.support.service import Account, login

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8"

#: (Accept, what a page path answers with): "json", or "html".
CASES = [
    (None, "html"),
    ("", "html"),
    (BROWSER, "html"),
    ("*/*", "html"),  # curl, HTMX: the service's own preference
    ("text/html", "html"),
    ("application/json", "json"),
    ("application/json, text/plain, */*", "json"),  # axios
    ("text/html;q=0, application/json", "json"),  # the probe's case: q=0 is "not acceptable"
    ("text/html; q=0.0, */*", "json"),
    ("application/json;q=0.9, text/html;q=0.8", "json"),
    ("text/html;q=0.8, application/json;q=0.9", "json"),
    ("application/json;q=0.5, text/html", "html"),
    ("application/json, text/html", "html"),  # a tie: the service's preference
    ("text/*;q=0.5, application/json;q=0.5", "json"),  # a tie in q: the more specific wins
    ("application/*", "json"),
    ("text/*", "html"),
    ("*/*;q=0.1, text/html;q=0", "json"),  # the specific range rules text/html
    ("text/html;level=1;q=0, application/json", "json"),
    ("TEXT/HTML;Q=0, Application/JSON", "json"),  # case does not matter
    ("application/json; charset=utf-8", "json"),
    ("text/html;q=high, application/json", "json"),  # an unreadable q: the range is ignored
    ("text/html;q=2, application/json;q=0.1", "json"),
    ("text/html;q=nan, application/json;q=0.1", "json"),
    ("text/html;q=, application/json;q=0.1", "json"),
    ("text/html;q=abc", "html"),  # nothing readable: as if absent
    ("garbage, ;;;, /, */json", "html"),
    ("image/png", "json"),  # neither offered type: no browser, a program
    ("text/html;q=0, application/json;q=0", "json"),
    ("*; q=.2, application/json", "json"),  # a bare * (old Java clients) is */*
]


@pytest.mark.parametrize(("accept", "answer"), CASES)
def test_the_preferred_answer(accept: str | None, answer: str) -> None:
    assert wants_json("/golden-sets/1", accept) is (answer == "json")
    # the API's paths are JSON whatever the client says
    assert wants_json("/api/v1/golden-sets/1", accept) is True


def test_ranges_and_their_quality() -> None:
    assert parse_accept("text/html;q=0.5, */*") == [
        MediaRange("text", "html", 0.5),
        MediaRange("*", "*", 1.0),
    ]
    assert preferred("text/html;q=0, application/json;q=0", (HTML, JSON)) is None
    assert preferred(None, (JSON, HTML)) == JSON


def test_a_huge_accept_header_costs_bounded_work() -> None:
    huge = "application/json, " + ", ".join(["text/html;q=0.1"] * 200_000)
    started = time.perf_counter()
    assert len(parse_accept(huge)) <= MAX_RANGES
    assert wants_json("/golden-sets", huge) is True
    assert time.perf_counter() - started < 0.5
    # what lies past the bound is not read: a text/html at the end changes nothing
    assert wants_json("/golden-sets", huge + ", text/html") is True


@given(st.text(max_size=300))
def test_any_accept_header_gives_an_answer(accept: str) -> None:
    choice = preferred(accept, (HTML, JSON))
    assert choice in (HTML, JSON, None)
    assert isinstance(wants_json("/golden-sets", accept), bool)


# --- the app's error answers ---


def test_error_answers_follow_the_q_values(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    login(client, accounts[Role.LEAD].email)
    for accept, answer in CASES:
        headers = {} if accept is None else {"Accept": accept}
        response = client.get("/golden-sets/999999", headers=headers)
        assert response.status_code == 404, accept
        kind = response.headers["content-type"].split(";")[0]
        # the answer depends on Accept: a cache must keep one per Accept
        assert "accept" in response.headers["vary"].lower().replace(" ", "").split(","), accept
        if answer == "json":
            assert kind == "application/json", accept
            assert response.json()["error"]["code"] == "golden_set_not_found", accept
        else:
            assert kind == "text/html", accept
            assert response.headers["x-error-code"] == "golden_set_not_found", accept


def test_the_api_answers_json_to_a_browser(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    lead = accounts[Role.LEAD].headers
    response = client.get("/api/v1/golden-sets/999999", headers={**lead, "Accept": BROWSER})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "golden_set_not_found"


def test_a_stranger_who_refuses_html_gets_401_not_the_login_page(client: TestClient) -> None:
    """A page without a login: the login redirect for a browser, the 401 error body for a
    client that said it takes no HTML."""
    page = client.get("/golden-sets", headers={"Accept": BROWSER}, follow_redirects=False)
    assert page.status_code == 303
    assert page.headers["location"].startswith("/login?next=")
    refuses = client.get(
        "/golden-sets",
        headers={"Accept": "text/html;q=0, application/json"},
        follow_redirects=False,
    )
    assert refuses.status_code == 401
    assert refuses.json()["error"]["code"] == "not_authenticated"
