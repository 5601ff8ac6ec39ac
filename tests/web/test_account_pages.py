"""The account pages, on both databases: the admins' Users page (its table, its forms and
their refusals, a reset's temporary password shown once), the Account page (one's own
password) and the set-password page a user meets after an admin's reset."""

from __future__ import annotations

import httpx
import pytest
from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app.main import create_app
from app.models import Role
from app.settings import Settings
from tests.support.service import HTMX, ORIGIN, PASSWORD, Account, get, login

NEW_PASSWORD = "a brand new passphrase"


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def users_table(soup: BeautifulSoup) -> dict[str, dict[str, str]]:
    """The Users table as data: email -> the row's role, state and flags."""
    table = soup.select_one("table#users")
    assert table is not None
    rows: dict[str, dict[str, str]] = {}
    for row in table.select("tbody tr"):
        chosen = row.select_one("select[name=role] option[selected]")
        assert chosen is not None
        rows[str(row["data-email"])] = {
            "id": str(row["data-user-id"]),
            "role": str(row["data-role"]),
            "selected_role": str(chosen["value"]),
            "active": str(row["data-active"]),
            "adjudicator": str(row["data-adjudicator"]),
            "must_change_password": str(row["data-must-change-password"]),
            "buttons": ",".join(b.get_text(strip=True) for b in row.select("button")),
        }
    return rows


def soup_of(text: str) -> BeautifulSoup:
    return BeautifulSoup(text, "lxml")


def nav_links(soup: BeautifulSoup) -> list[str]:
    nav = soup.select_one("nav[aria-label=Main]")
    assert isinstance(nav, Tag)
    return [a.get_text(strip=True) for a in nav.select("a")]


def post(client: TestClient, url: str, data: dict[str, str] | None = None) -> httpx.Response:
    return client.post(url, data=data or {}, headers=ORIGIN, follow_redirects=False)


def test_the_users_page_lists_every_account_for_admins_only(
    client: TestClient, accounts: dict[Role, Account], mode: str
) -> None:
    login(client, accounts[Role.ADMIN].email)
    soup = get(client, "/users", mode)
    rows = users_table(soup)
    assert {email: (r["role"], r["selected_role"], r["active"]) for email, r in rows.items()} == {
        f"{role.value}@example.com": (role.value, role.value, "true") for role in Role
    }
    # no deactivate button on one's own row
    assert "Deactivate" not in rows["admin@example.com"]["buttons"].split(",")
    assert "Deactivate" in rows["lead@example.com"]["buttons"].split(",")
    if mode == "page":
        assert nav_links(soup) == ["Golden sets", "API tokens", "Account", "Users"]
    client.cookies.clear()
    login(client, accounts[Role.LEAD].email)
    refused = client.get("/users")
    assert (refused.status_code, refused.headers["x-error-code"]) == (403, "forbidden")
    page = get(client, "/tokens", "page")
    assert nav_links(page) == ["Golden sets", "API tokens", "Account"]


def test_the_users_forms_change_roles_activity_and_flags(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    login(client, accounts[Role.ADMIN].email)
    rows = users_table(get(client, "/users", "page"))
    reviewer = rows["reviewer@example.com"]["id"]
    changed = post(client, f"/users/{reviewer}/role", {"role": "lead"})
    assert (changed.status_code, changed.headers["location"]) == (303, "/users")
    shown = get(client, "/users", "page")
    flash = shown.select_one("[data-flash]")
    assert flash is not None
    assert flash.get_text(strip=True) == "reviewer@example.com is now lead."
    assert users_table(shown)["reviewer@example.com"]["role"] == "lead"
    assert (
        post(client, f"/users/{reviewer}/adjudicator", {"adjudicator": "true"}).status_code == 303
    )
    assert post(client, f"/users/{reviewer}/deactivate").status_code == 303
    row = users_table(get(client, "/users", "page"))["reviewer@example.com"]
    assert (row["adjudicator"], row["active"]) == ("true", "false")
    assert "Reactivate" in row["buttons"].split(",")
    # the change is in the latest account changes, newest first
    events = get(client, "/users", "page").select("table#account-events tbody tr")
    assert [e["data-action"] for e in events] == [
        "deactivated",
        "adjudicator_changed",
        "role_changed",
    ]
    assert post(client, f"/users/{reviewer}/reactivate").status_code == 303
    assert users_table(get(client, "/users", "page"))["reviewer@example.com"]["active"] == "true"
    # HTMX: the same answer as a redirect header
    response = client.post(f"/users/{reviewer}/role", data={"role": "reviewer"}, headers=HTMX)
    assert (response.status_code, response.headers["hx-redirect"]) == (204, "/users")


@pytest.mark.parametrize(
    ("action", "data", "status", "code"),
    [
        ("role", {"role": "lead"}, 409, "last_admin"),
        ("deactivate", {}, 409, "cannot_deactivate_self"),
        ("role", {"role": "owner"}, 422, "invalid_role"),
    ],
)
def test_a_refused_change_shows_the_page_with_its_reason(
    client: TestClient,
    accounts: dict[Role, Account],
    action: str,
    data: dict[str, str],
    status: int,
    code: str,
) -> None:
    login(client, accounts[Role.ADMIN].email)
    me = users_table(get(client, "/users", "page"))["admin@example.com"]["id"]
    response = client.post(f"/users/{me}/{action}", data=data, headers=ORIGIN)
    assert (response.status_code, response.headers["x-error-code"]) == (status, code)
    soup = soup_of(response.text)
    error = soup.select_one("p.error[role=alert]")
    assert error is not None
    assert error.get_text(strip=True)
    assert users_table(soup)["admin@example.com"]["role"] == "admin"
    assert soup.select("table#account-events tbody tr[data-event-id]") == []


def test_a_reset_shows_the_temporary_password_once_and_it_leads_to_set_password(
    client: TestClient, accounts: dict[Role, Account], settings: Settings, engine: Engine
) -> None:
    login(client, accounts[Role.ADMIN].email)
    lead = users_table(get(client, "/users", "page"))["lead@example.com"]["id"]
    response = client.post(f"/users/{lead}/password-reset", headers=ORIGIN)
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    soup = soup_of(response.text)
    secret = soup.select_one("#temporary-password code.secret")
    assert secret is not None
    assert secret["data-email"] == "lead@example.com"
    temporary = secret.get_text(strip=True)
    assert users_table(soup)["lead@example.com"]["must_change_password"] == "true"
    # shown once: the page again does not have it
    assert temporary not in client.get("/users").text
    with TestClient(create_app(settings, engine), base_url="http://testserver") as browser:
        logged_in = browser.post(
            "/login",
            data={"email": "lead@example.com", "password": temporary, "next": "/tokens"},
            headers=HTMX,
        )
        assert logged_in.headers["hx-redirect"] == "/account/set-password?next=%2Ftokens"
        # any other page leads to the form until the new password is set, and comes back
        held = browser.get("/golden-sets?page=2", follow_redirects=False)
        assert (held.status_code, held.headers["location"]) == (
            303,
            "/account/set-password?next=/golden-sets%3Fpage%3D2",
        )
        fragment = browser.get("/golden-sets", headers=HTMX, follow_redirects=False)
        assert (fragment.status_code, fragment.headers["hx-redirect"]) == (
            403,
            "/account/set-password",
        )
        # a program (the API, or JSON asked for) gets the refusal and its code
        api = browser.get("/api/v1/golden-sets")
        assert (api.status_code, api.json()["error"]["code"]) == (403, "password_change_required")
        # the login page sends the session on to the form, with where it was going
        again = browser.get("/login?next=/tokens", follow_redirects=False)
        assert again.headers["location"] == "/account/set-password?next=%2Ftokens"
        form = soup_of(browser.get("/account/set-password?next=/tokens").text)
        assert form.select_one("#set-password")["data-email"] == "lead@example.com"  # type: ignore[index]
        hidden = form.select_one("input[name=next]")
        assert hidden is not None
        assert hidden["value"] == "/tokens"
        assert form.select_one("nav[aria-label=Main]") is None  # no links it may not follow
        for data, status, code in (
            ({"new": NEW_PASSWORD, "confirm": "something else"}, 400, "passwords_differ"),
            ({"new": "password1", "confirm": "password1"}, 422, "weak_password"),
            ({"new": temporary, "confirm": temporary}, 422, "same_password"),
        ):
            refused = browser.post(
                "/account/set-password", data={**data, "next": "/tokens"}, headers=ORIGIN
            )
            assert (refused.status_code, refused.headers["x-error-code"]) == (status, code)
            assert soup_of(refused.text).select_one("#set-password p.error") is not None
        done = browser.post(
            "/account/set-password",
            data={"new": NEW_PASSWORD, "confirm": NEW_PASSWORD, "next": "/tokens"},
            headers=ORIGIN,
            follow_redirects=False,
        )
        assert (done.status_code, done.headers["location"]) == (303, "/tokens")
        assert browser.get("/golden-sets").status_code == 200
        # nothing pending any more: the form leads to the account page
        moved = browser.get("/account/set-password", follow_redirects=False)
        assert (moved.status_code, moved.headers["location"]) == (303, "/account")
    rows = users_table(get(client, "/users", "page"))
    assert rows["lead@example.com"]["must_change_password"] == "false"


def test_a_session_that_must_set_a_password_may_log_out_and_is_held_to_csrf(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    admin = accounts[Role.ADMIN]
    reviewer_id = next(
        u["id"]
        for u in client.get("/api/v1/users", headers=admin.headers).json()["items"]
        if u["email"] == accounts[Role.REVIEWER].email
    )
    temporary = client.post(
        f"/api/v1/users/{reviewer_id}/password-reset", headers=admin.headers
    ).json()["temporary_password"]
    login(client, accounts[Role.REVIEWER].email, temporary)
    cross = client.post(
        "/account/set-password",
        data={"new": NEW_PASSWORD, "confirm": NEW_PASSWORD},
        headers={"Origin": "https://evil.example"},
    )
    assert (cross.status_code, cross.headers["x-error-code"]) == (403, "csrf_failed")
    out = client.post("/logout", headers=ORIGIN, follow_redirects=False)
    assert (out.status_code, out.headers["location"]) == (303, "/login")
    assert client.get("/account/set-password", follow_redirects=False).status_code == 303
    # the new password was not set: the temporary one still logs in
    login(client, accounts[Role.REVIEWER].email, temporary)


def test_the_account_page_changes_ones_own_password(
    client: TestClient,
    accounts: dict[Role, Account],
    settings: Settings,
    engine: Engine,
    mode: str,
) -> None:
    reviewer = accounts[Role.REVIEWER]
    login(client, reviewer.email)
    soup = get(client, "/account", mode)
    account = soup.select_one("#account")
    assert account is not None
    assert (account["data-email"], account["data-role"]) == (reviewer.email, "reviewer")
    assert [i["name"] for i in soup.select("form#change-password input")] == [
        "current",
        "new",
        "confirm",
    ]
    with TestClient(create_app(settings, engine), base_url="http://testserver") as other:
        login(other, reviewer.email)
        new, weak = NEW_PASSWORD, "qwertyuiop"
        for data, status, code in (
            ({"current": PASSWORD, "new": new, "confirm": "x"}, 400, "passwords_differ"),
            ({"current": "wrong", "new": new, "confirm": new}, 400, "wrong_password"),
            ({"current": PASSWORD, "new": weak, "confirm": weak}, 422, "weak_password"),
        ):
            refused = client.post("/account/password", data=data, headers=ORIGIN)
            assert (refused.status_code, refused.headers["x-error-code"]) == (status, code)
            assert soup_of(refused.text).select_one("p.error[role=alert]") is not None
        done = client.post(
            "/account/password",
            data={"current": PASSWORD, "new": NEW_PASSWORD, "confirm": NEW_PASSWORD},
            headers=ORIGIN,
            follow_redirects=False,
        )
        assert (done.status_code, done.headers["location"]) == (303, "/account")
        flash = get(client, "/account", "page").select_one("[data-flash]")
        assert flash is not None
        assert flash.get_text(strip=True) == "Password changed: 1 other session ended."
        # this session stays; the other browser's ended
        assert client.get("/api/v1/me").status_code == 200
        assert other.get("/api/v1/me").status_code == 401
    client.cookies.clear()
    login(client, reviewer.email, NEW_PASSWORD)


def test_the_create_user_form(client: TestClient, accounts: dict[Role, Account]) -> None:
    login(client, accounts[Role.ADMIN].email)
    weak = client.post(
        "/users",
        data={"email": "new@example.com", "password": "password1", "role": "lead"},
        headers=ORIGIN,
    )
    assert (weak.status_code, weak.headers["x-error-code"]) == (422, "weak_password")
    soup = soup_of(weak.text)
    email = soup.select_one("#new-user-email")
    assert email is not None
    assert email["value"] == "new@example.com"  # kept; the password never is
    assert soup.select_one("#new-user-password").get("value") is None  # type: ignore[union-attr]
    made = post(
        client,
        "/users",
        {"email": "New@Example.com", "password": NEW_PASSWORD, "role": "lead", "adjudicator": "on"},
    )
    assert made.status_code == 303
    row = users_table(get(client, "/users", "page"))["new@example.com"]
    assert (row["role"], row["adjudicator"]) == ("lead", "true")
    taken = client.post(
        "/users",
        data={"email": "new@example.com", "password": NEW_PASSWORD, "role": "lead"},
        headers=ORIGIN,
    )
    assert (taken.status_code, taken.headers["x-error-code"]) == (409, "user_exists")
