"""A password change or reset ends every browser session made with the old password, logins
in flight included, on both databases:

- at the service: a login that checked the old password before a reset committed starts no
  session after it (``credentials_changed``), and a session row of the old credential
  generation, however it got there, is not live;
- against a real server with two worker processes: logins with the old password released
  together with an admin's reset (and with the user's own change) leave no session that gets
  in, and none that may set a password;
- the set-password form of a session a reset ended meanwhile refuses (409);
- a reset may revoke the user's API tokens too (API, page, command line), else they work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app import security
from app.models import AccountEvent, AccountVia, ApiToken, Role, User, UserSession, utcnow
from app.services.accounts import life_cycle, logins
from app.services.accounts import users as user_service
from tests.support.concurrency import at_once_n
from tests.support.live import LiveServer
from tests.support.service import ORIGIN, PASSWORD, TEST_SECRET, Account, login

NEW_PASSWORD = "a brand new passphrase"
INTRUDER = "a password of the intruder"
LOGINS = 12
ROUNDS = 2


@pytest.fixture
def server(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LiveServer]:
    # The old password's logins refused after the change count as failed logins: the
    # rounds stay below the limit, so every answer is the credentials' own.
    for limit in ("EMAIL_AND_ADDRESS", "EMAIL", "ADDRESS"):
        monkeypatch.setenv(f"MISSTRIAGE_LOGIN_FAILURES_PER_{limit}", "1000")
    live = LiveServer(database_url, tmp_path, secret=TEST_SECRET, workers=2)
    yield live
    live.stop()


def _user(engine: Engine, email: str) -> User:
    with Session(engine, expire_on_commit=False) as session:
        return user_service.get_user_by_email(session=session, email=email)


def test_a_login_that_checked_the_old_password_starts_no_session_after_a_reset(
    engine: Engine, accounts: dict[Role, Account]
) -> None:
    email = accounts[Role.LEAD].email
    with Session(engine, expire_on_commit=False) as login:
        checked = user_service.authenticate(session=login, email=email, password=PASSWORD)
        assert checked is not None
        # the admin's reset commits while the login is between its check and its session
        with Session(engine, expire_on_commit=False) as admin:
            life_cycle.reset_password(
                session=admin, actor=None, user_id=checked.user.id or 0, via=AccountVia.CLI
            )
        with pytest.raises(user_service.CredentialsChanged) as refused:
            user_service.start_session(
                session=login,
                user=checked.user,
                hours=1,
                credential_generation=checked.credential_generation,
            )
        assert refused.value.code == "credentials_changed"
    with Session(engine) as session:
        assert session.exec(select(UserSession)).all() == []


def test_a_session_of_an_older_credential_generation_is_not_live(
    engine: Engine, accounts: dict[Role, Account]
) -> None:
    email = accounts[Role.REVIEWER].email
    with Session(engine, expire_on_commit=False) as session:
        user = user_service.get_user_by_email(session=session, email=email)
        before = user.credential_generation
        life_cycle.reset_password(
            session=session, actor=None, user_id=user.id or 0, via=AccountVia.CLI
        )
        after = user_service.get_user(session=session, user_id=user.id or 0)
        assert after.credential_generation == before + 1
        # A login's insert that committed just after the reset deleted the user's sessions:
        # the row is there, of the generation its password had.
        late, live = security.new_session_id(), security.new_session_id()
        for session_id, generation in ((late, before), (live, before + 1)):
            session.add(
                UserSession(
                    user_id=user.id or 0,
                    token_hash=security.digest(session_id),
                    expires_at=utcnow() + timedelta(hours=1),
                    credential_generation=generation,
                )
            )
        session.commit()
        assert user_service.session_user(session=session, session_id=late) is None
        found = user_service.session_user(session=session, session_id=live)
        assert found is not None
        assert found.email == email


def _log_in(url: str, email: str, password: str) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=60) as http:
        return http.post(
            "/login",
            data={"email": email, "password": password, "next": "/"},
            headers={"Origin": url},
            follow_redirects=False,
        )


def _gets_in(url: str, cookies: httpx.Cookies) -> bool:
    """Whether a browser with these cookies is logged in (the API-token page answers)."""
    with httpx.Client(base_url=url, cookies=cookies, timeout=60) as http:
        return http.get("/tokens", follow_redirects=False).status_code == 200


def _sets_a_password(url: str, cookies: httpx.Cookies) -> httpx.Response:
    """The set-password form's answer to a browser with these cookies."""
    with httpx.Client(base_url=url, cookies=cookies, timeout=60) as http:
        return http.post(
            "/account/set-password",
            data={"new": INTRUDER, "confirm": INTRUDER},
            headers={"Origin": url},
            follow_redirects=False,
        )


def _race_logins(
    server: LiveServer, email: str, password: str, change: Callable[[], httpx.Response]
) -> tuple[list[httpx.Response], httpx.Response]:
    """LOGINS logins with ``password`` and ``change`` released together."""
    answers = at_once_n(
        LOGINS + 1, lambda i: change() if i == 0 else _log_in(server.url, email, password)
    )
    return answers[1:], answers[0]


def _sets_a_password_to(url: str, cookies: httpx.Cookies, password: str) -> int:
    with httpx.Client(base_url=url, cookies=cookies, timeout=60) as http:
        return http.post(
            "/account/set-password",
            data={"new": password, "confirm": password},
            headers={"Origin": url},
            follow_redirects=False,
        ).status_code


def test_logins_in_flight_with_the_old_password_never_outlive_a_change_or_a_reset(
    engine: Engine, server: LiveServer, accounts: dict[Role, Account]
) -> None:
    """One server for both: the reviewer changes their own password while logins with the
    old one are in flight; an admin resets the lead's likewise."""
    reviewer, admin, lead = accounts[Role.REVIEWER], accounts[Role.ADMIN], accounts[Role.LEAD]
    password = PASSWORD
    for round_ in range(ROUNDS):
        new = f"{NEW_PASSWORD} {round_}"

        def change(current: str = password, new: str = new) -> httpx.Response:
            return httpx.post(
                f"{server.url}/api/v1/me/password",
                headers=reviewer.headers,
                json={"current": current, "new": new},
                timeout=60,
            )

        logins, answer = _race_logins(server, reviewer.email, password, change)
        assert answer.status_code == 200, answer.text
        assert {r.status_code for r in logins} <= {303, 400, 429}
        survivors = [r for r in logins if r.status_code == 303 and _gets_in(server.url, r.cookies)]
        assert survivors == []
        password = new
    fresh = _log_in(server.url, reviewer.email, password)
    assert fresh.status_code == 303
    assert _gets_in(server.url, fresh.cookies)

    user_id = _user(engine, lead.email).id
    password = PASSWORD
    for round_ in range(ROUNDS):

        def reset() -> httpx.Response:
            return httpx.post(
                f"{server.url}/api/v1/users/{user_id}/password-reset",
                headers=admin.headers,
                timeout=60,
            )

        logins, answer = _race_logins(server, lead.email, password, reset)
        assert answer.status_code == 200, answer.text
        assert {r.status_code for r in logins} <= {303, 400, 429}
        survivors = [r for r in logins if r.status_code == 303 and _gets_in(server.url, r.cookies)]
        assert survivors == []
        # none of the old password's sessions may choose the account's next password
        for late in (r for r in logins if r.status_code == 303):
            refused = _sets_a_password(server.url, late.cookies)
            assert refused.headers.get("location", "").startswith("/login"), refused.text
        assert _log_in(server.url, lead.email, INTRUDER).status_code == 400
        # the temporary password logs in and must choose a new one; then the next round
        temporary = answer.json()["temporary_password"]
        first = _log_in(server.url, lead.email, temporary)
        assert first.status_code == 303
        assert first.headers["location"].startswith("/account/set-password")
        password = f"{NEW_PASSWORD} {round_}"
        assert _sets_a_password_to(server.url, first.cookies, password) == 303


def test_the_set_password_form_of_a_session_a_reset_ended_meanwhile_refuses(
    engine: Engine, accounts: dict[Role, Account]
) -> None:
    email = accounts[Role.LEAD].email
    user_id = _user(engine, email).id or 0
    with Session(engine, expire_on_commit=False) as session:
        life_cycle.reset_password(session=session, actor=None, user_id=user_id, via=AccountVia.CLI)
        pending = user_service.start_session(session=session, user=_user(engine, email), hours=1)
        # the request is past its authentication when a second reset commits
        life_cycle.reset_password(session=session, actor=None, user_id=user_id, via=AccountVia.CLI)
        with pytest.raises(user_service.CredentialsChanged):
            life_cycle.set_required_password(
                session=session, user_id=user_id, new=NEW_PASSWORD, keep_session=pending
            )
        assert user_service.get_user(session=session, user_id=user_id).must_change_password


def test_a_password_change_keeps_the_callers_session_and_ends_the_others(
    engine: Engine, accounts: dict[Role, Account]
) -> None:
    email = accounts[Role.REVIEWER].email
    user = _user(engine, email)
    with Session(engine, expire_on_commit=False) as session:
        mine = user_service.start_session(session=session, user=user, hours=1)
        other = user_service.start_session(session=session, user=user, hours=1)
        ended = life_cycle.change_password(
            session=session,
            user_id=user.id or 0,
            current=PASSWORD,
            new=NEW_PASSWORD,
            keep_session=mine,
            via=AccountVia.API,
            address="127.0.0.1",
            now=utcnow(),
            policy=logins.LoginPolicy(
                per_email_and_address=5, per_email=50, per_address=20, window=timedelta(minutes=15)
            ),
        )
        assert ended == 1
        assert user_service.session_user(session=session, session_id=mine) is not None
        assert user_service.session_user(session=session, session_id=other) is None


def _token_works(client: TestClient, token: str) -> int:
    return client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"}).status_code


@pytest.mark.parametrize("revoke", [False, True], ids=["tokens-kept", "tokens-revoked"])
def test_a_reset_revokes_the_users_api_tokens_when_asked(
    engine: Engine, client: TestClient, accounts: dict[Role, Account], revoke: bool
) -> None:
    admin, lead = accounts[Role.ADMIN], accounts[Role.LEAD]
    user_id = _user(engine, lead.email).id
    assert _token_works(client, lead.token) == 200
    answer = client.post(
        f"/api/v1/users/{user_id}/password-reset",
        headers=admin.headers,
        json={"revoke_tokens": revoke},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["tokens_revoked"] == (1 if revoke else 0)
    assert _token_works(client, lead.token) == (401 if revoke else 200)
    assert _token_works(client, admin.token) == 200
    with Session(engine) as session:
        tokens = session.exec(select(ApiToken).where(col(ApiToken.user_id) == user_id)).all()
        assert [t.revoked_at is not None for t in tokens] == [revoke]
        event = session.exec(select(AccountEvent).where(col(AccountEvent.user_id) == user_id)).one()
        assert (event.action, event.tokens_revoked) == ("password_reset", 1 if revoke else 0)
    events = client.get(f"/api/v1/users/{user_id}/events", headers=admin.headers).json()
    assert [e["tokens_revoked"] for e in events["items"]] == [1 if revoke else 0]


def test_a_reset_without_a_body_keeps_the_tokens(
    engine: Engine, client: TestClient, accounts: dict[Role, Account]
) -> None:
    admin, lead = accounts[Role.ADMIN], accounts[Role.LEAD]
    user_id = _user(engine, lead.email).id
    answer = client.post(f"/api/v1/users/{user_id}/password-reset", headers=admin.headers)
    assert (answer.status_code, answer.json()["tokens_revoked"]) == (200, 0)
    assert _token_works(client, lead.token) == 200


def test_the_users_page_resets_with_or_without_the_tokens(
    engine: Engine, client: TestClient, accounts: dict[Role, Account]
) -> None:
    login(client, accounts[Role.ADMIN].email)
    lead = accounts[Role.LEAD]
    user_id = _user(engine, lead.email).id
    page = BeautifulSoup(client.get("/users").text, "html.parser")
    row = page.select_one(f'tr[data-user-id="{user_id}"]')
    assert row is not None
    assert row.select_one('form input[type=checkbox][name="revoke_tokens"]') is not None
    kept = client.post(f"/users/{user_id}/password-reset", headers=ORIGIN)
    assert kept.status_code == 200
    notice = BeautifulSoup(kept.text, "html.parser").select_one("#temporary-password")
    assert notice is not None
    assert "API tokens keep working" in notice.get_text(" ", strip=True)
    assert _token_works(client, lead.token) == 200
    revoked = client.post(
        f"/users/{user_id}/password-reset", data={"revoke_tokens": "true"}, headers=ORIGIN
    )
    notice = BeautifulSoup(revoked.text, "html.parser").select_one("#temporary-password")
    assert notice is not None
    assert "1 API token was revoked" in notice.get_text(" ", strip=True)
    assert _token_works(client, lead.token) == 401
