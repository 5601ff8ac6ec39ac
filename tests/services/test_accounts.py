"""Accounts as the service creates them: the password policy (NIST SP 800-63B: length and a
bundled list of common passwords), validated emails on every way in (service, API, CLI), and
expired browser sessions deleted, never authenticating."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select, update

from app.cli.demo import LEAD, REVIEWER
from app.models import Role, User, UserSession, utcnow
from app.services.accounts import passwords
from app.services.accounts import users as user_service
from app.services.errors import Invalid
from tests.support.cli import service_cli as cli
from tests.support.service import PASSWORD, Account

COMMON = ["password1", "PassWord1", " qwertyuiop ", "iloveyou", "12345678"]


def user_count(engine: Engine) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(User)).one()


def test_the_bundled_list_is_small_and_real() -> None:
    assert passwords.COMMON_PASSWORDS.stat().st_size < 2 * 1024**2
    common = passwords.common_passwords()
    assert len(common) > 10_000
    assert {"password", "123456", "qwerty", "letmein"} <= common


@pytest.mark.parametrize("password", COMMON)
def test_common_passwords_are_refused_whatever_their_case(password: str) -> None:
    with pytest.raises(Invalid, match="common passwords") as refused:
        passwords.check_new_password(password)
    assert refused.value.code == "weak_password"


@pytest.mark.parametrize("password", ["", "short", "7 chars"])
def test_short_passwords_are_refused(password: str) -> None:
    with pytest.raises(Invalid, match="at least 8 characters"):
        passwords.check_new_password(password)


def test_the_demo_and_test_accounts_comply() -> None:
    for email, password in (LEAD, REVIEWER):
        passwords.check_new_password(password)
        assert user_service.validated_email(email) == email
    passwords.check_new_password(PASSWORD)


@pytest.mark.parametrize(
    ("email", "valid"),
    [
        ("x@example.com", True),
        ("  Lead.Name+tag@Example.COM ", True),
        ("a@b", False),
        ("no-at-sign.example.com", False),
        ("two@@example.com", False),
        ("space in@example.com", False),
        ("x@localhost", False),
        ("x@" + "a" * 400 + ".com", False),
    ],
)
def test_emails_are_validated(email: str, valid: bool) -> None:
    if valid:
        assert user_service.validated_email(email) == email.strip().lower()
        return
    with pytest.raises(Invalid) as refused:
        user_service.validated_email(email)
    assert refused.value.code == "invalid_email"
    assert len(refused.value.message) < 300


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_api_refuses_weak_passwords_and_bad_emails(
    client: TestClient, accounts: dict[Role, Account], engine: Engine
) -> None:
    admin = accounts[Role.ADMIN].headers
    before = user_count(engine)
    for body, code in (
        (
            {"email": "new@example.com", "password": "Password1", "role": "reviewer"},
            "weak_password",
        ),
        ({"email": "new@example.com", "password": "short", "role": "reviewer"}, "weak_password"),
        ({"email": "a@b", "password": PASSWORD, "role": "reviewer"}, "invalid_email"),
    ):
        response = client.post("/api/v1/users", json=body, headers=admin)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == code
    assert user_count(engine) == before
    made = client.post(
        "/api/v1/users",
        json={"email": "New@Example.com", "password": "a less common phrase", "role": "reviewer"},
        headers=admin,
    )
    assert made.status_code == 201, made.text
    assert made.json()["email"] == "new@example.com"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_cli_refuses_weak_passwords_and_bad_emails(database_url: str) -> None:
    for email, password, says in (
        ("lead@example.com", "iloveyou", "common passwords"),
        ("lead@example.com", "abc", "at least 8 characters"),
        ("lead@invalid", PASSWORD, "is not an email address"),
    ):
        result = cli(
            database_url, "create-user", "--email", email, "--password", password, "--role", "lead"
        )
        assert result.returncode == 2  # bad input
        assert says in result.stderr
        assert "Traceback" not in result.stderr


def test_expired_sessions_never_authenticate_and_are_purged_at_login(
    engine: Engine, accounts: dict[Role, Account]
) -> None:
    with Session(engine, expire_on_commit=False) as session:
        reviewer = user_service.get_user_by_email(session=session, email="reviewer@example.com")
        lead = user_service.get_user_by_email(session=session, email="lead@example.com")
        stale = user_service.start_session(session=session, user=reviewer, hours=1)
        live = user_service.start_session(session=session, user=reviewer, hours=1)
        assert user_service.user_for_session(session=session, session_id=stale) is not None
        session.exec(
            update(UserSession)
            .where(col(UserSession.token_hash) == user_service.security.digest(stale))
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
        session.commit()
        assert user_service.user_for_session(session=session, session_id=stale) is None
        assert session.exec(select(func.count()).select_from(UserSession)).one() == 2
        # Anyone's login sweeps the expired rows away; live sessions stay.
        user_service.start_session(session=session, user=lead, hours=1)
        hashes = set(session.exec(select(UserSession.token_hash)))
        assert user_service.security.digest(stale) not in hashes
        assert user_service.security.digest(live) in hashes
        assert len(hashes) == 2
        assert user_service.user_for_session(session=session, session_id=stale) is None
