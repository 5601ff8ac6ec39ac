"""``next`` after a login (and after the set-password form) is followed only when it is a
plain path of this site. Browsers drop tabs and newlines inside URLs, so ``/\\t/evil.example``
is ``//evil.example`` to them (another site); a CR or LF in a header is a header injection
(an HTMX login with ``next=/\\r\\n/...`` ended in a 500 with a traceback). Every way the
value comes back (the form's redirect, HTMX's HX-Redirect, the login page's redirect of a
logged-in user, the form's hidden field) falls back to ``/``."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.models import Role
from tests.support.service import HTMX, ORIGIN, PASSWORD, Account, login

#: Values that must never be followed: each leads off-site, breaks a header, or hides what
#: it is (the first ones were let through before).
REFUSED = [
    "/\t/evil.example",
    "/\r\n/evil.example",
    "/\n/evil.example",
    "/\r/evil.example",
    "/ /evil.example",
    "/\x0b/evil.example",
    "/\x7f/evil.example",
    "/\u00a0/evil.example",  # no-break space
    "/\u2028/evil.example",  # line separator
    "/\u3000/evil.example",  # ideographic space
    "/\u200b/evil.example",  # zero-width space
    "/\u202e/evil.example",  # right-to-left override
    "/\ufeff/evil.example",
    " /evil.example",
    "\t//evil.example",
    "/golden-sets\r\nSet-Cookie: planted=1",
    "/" + "a" * 5000,
    # refused before as well, kept in the sweep
    "//evil.example",
    "/\\evil.example",
    "/golden-sets\\..\\..",
    "https://evil.example/",
    "javascript:alert(1)",
    "evil.example",
]
#: Plain paths of this site, followed as they are (non-ASCII percent-encoded).
KEPT = {
    "/golden-sets": "/golden-sets",
    "/golden-sets/1?tab=runs&k=10#depth": "/golden-sets/1?tab=runs&k=10#depth",
    "/a/%2F%2Fstill-here": "/a/%2F%2Fstill-here",
    "/recherche/é": "/recherche/%C3%A9",
}


def _login(
    client: TestClient,
    email: str,
    next_value: str,
    headers: dict[str, str],
    password: str = PASSWORD,
) -> str:
    client.cookies.clear()
    response = client.post(
        "/login",
        data={"email": email, "password": password, "next": next_value},
        headers=headers,
        follow_redirects=False,
    )
    assert response.status_code in (204, 303), (next_value, response.status_code)
    assert "Traceback" not in response.text
    if headers.get("HX-Request"):
        assert response.status_code == 204
        return response.headers["hx-redirect"]
    return response.headers["location"]


@pytest.mark.parametrize("how", ["form", "htmx"])
def test_a_login_never_follows_next_off_the_site(
    client: TestClient, accounts: dict[Role, Account], how: str
) -> None:
    headers = HTMX if how == "htmx" else ORIGIN
    email = accounts[Role.REVIEWER].email
    followed = {value: _login(client, email, value, headers) for value in REFUSED}
    assert followed == dict.fromkeys(REFUSED, "/")
    kept = {value: _login(client, email, value, headers) for value in KEPT}
    assert kept == KEPT


def test_the_login_page_of_a_logged_in_user_never_follows_next_off_the_site(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    login(client, accounts[Role.LEAD].email)
    followed = {}
    for value in REFUSED:
        response = client.get(f"/login?next={quote(value, safe='')}", follow_redirects=False)
        assert response.status_code == 303
        followed[value] = response.headers["location"]
    assert followed == dict.fromkeys(REFUSED, "/")


def test_the_login_form_carries_only_a_plain_path(client: TestClient) -> None:
    carried = {}
    for value in [*REFUSED, *KEPT]:
        response = client.get(f"/login?next={quote(value, safe='')}")
        assert response.status_code == 200
        field = BeautifulSoup(response.text, "lxml").select_one("form input[name=next]")
        assert field is not None
        carried[value] = field["value"]
    assert carried == {**dict.fromkeys(REFUSED, "/"), **KEPT}


@pytest.mark.parametrize("how", ["form", "htmx"])
def test_the_set_password_form_never_follows_next_off_the_site(
    client: TestClient, accounts: dict[Role, Account], how: str
) -> None:
    """After an admin's reset, the login leads to the set-password form with ``next``;
    the form's redirect follows the same rule."""
    admin, reviewer = accounts[Role.ADMIN], accounts[Role.REVIEWER]
    users = client.get("/api/v1/users", headers=admin.headers).json()["items"]
    uid = next(u["id"] for u in users if u["email"] == reviewer.email)
    headers = HTMX if how == "htmx" else ORIGIN
    followed = {}
    for n, value in enumerate(["/\t/evil.example", "/\r\n/evil.example", "//evil.example"]):
        temporary = client.post(
            f"/api/v1/users/{uid}/password-reset", headers=admin.headers
        ).json()["temporary_password"]
        went = _login(client, reviewer.email, value, headers, password=temporary)
        assert went == "/account/set-password"
        new = f"a brand new passphrase {n}"
        response = client.post(
            "/account/set-password",
            data={"new": new, "confirm": new, "next": value},
            headers=headers,
            follow_redirects=False,
        )
        followed[value] = response.headers["hx-redirect" if how == "htmx" else "location"]
    assert set(followed.values()) == {"/"}


def test_local_path_is_the_one_rule() -> None:
    from app.web.render import MAX_NEXT_CHARS, local_path

    # (a NUL never reaches it over HTTP: the app answers 422 nul_character first)
    refused = [*REFUSED, "/\x00/evil.example", "/\ud800", "/\ue000", "/\U0010ffff"]
    assert [local_path(v) for v in refused] == ["/"] * len(refused)
    assert {v: local_path(v) for v in KEPT} == KEPT
    assert local_path(None) == "/"
    assert local_path("") == "/"
    longest = "/" + "a" * (MAX_NEXT_CHARS - 1)
    assert local_path(longest) == longest
    assert local_path(longest + "a") == "/"


def test_after_a_wrong_password_the_focus_is_on_the_password(client: TestClient) -> None:
    """The email the user typed is kept, so the field to type again is the password."""
    first = BeautifulSoup(client.get("/login").text, "lxml")
    assert first.select("input[autofocus]")[0]["name"] == "email"
    wrong = client.post(
        "/login",
        data={"email": "someone@example.com", "password": "not the one"},
        headers={"Origin": "http://testserver"},
    )
    assert wrong.status_code == 400
    page = BeautifulSoup(wrong.text, "lxml")
    assert [i["name"] for i in page.select("input[autofocus]")] == ["password"]
    assert page.select_one("input[name=email]")["value"] == "someone@example.com"  # type: ignore[index]
