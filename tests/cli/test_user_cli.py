"""``misstriage user``: an account's life cycle from the command line, against a real
database (both backends): a role, deactivation, reactivation and a password reset whose
temporary password is printed alone on stdout; the rules of the API hold (the last active
admin), an unknown email exits 1, and every change is in the account's audit trail."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.models import Role
from app.services.accounts import users as user_service
from tests.support.cli import service_cli as cli
from tests.support.revocation import status_once_the_check_is_due
from tests.support.service import ORIGIN, PASSWORD, Account


def _said(stderr: str) -> str:
    """The command's own line on stderr (the in-process runner may add a ``SystemExit: 0``
    traceback after it for a command that ends with exit 0)."""
    return stderr.splitlines()[0]


def _user(engine: Engine, email: str) -> tuple[str, bool, bool]:
    with Session(engine) as session:
        user = user_service.get_user_by_email(session=session, email=email)
        return user.role, user.is_active, user.must_change_password


def test_role_deactivation_and_reactivation(
    database_url: str, engine: Engine, accounts: dict[Role, Account], client: TestClient
) -> None:
    reviewer = accounts[Role.REVIEWER]
    promoted = cli(database_url, "user", "--email", "Reviewer@Example.com", "--role", "lead")
    assert promoted.returncode == 0, promoted.stderr
    assert promoted.stdout == ""
    assert _said(promoted.stderr) == "reviewer@example.com: lead, active"
    assert _user(engine, reviewer.email) == ("lead", True, False)

    assert client.get("/api/v1/me", headers=reviewer.headers).status_code == 200
    off = cli(database_url, "user", "--email", reviewer.email, "--deactivate")
    changed_at = time.monotonic()
    assert off.returncode == 0, off.stderr
    assert _said(off.stderr) == "reviewer@example.com: lead, deactivated"
    assert _user(engine, reviewer.email) == ("lead", False, False)
    # the app's process, which cached the token, refuses it once its generation check is due
    status = status_once_the_check_is_due(
        lambda: client.get("/api/v1/me", headers=reviewer.headers).status_code, changed_at
    )
    assert status == 401
    on = cli(database_url, "user", "--email", reviewer.email, "--reactivate")
    assert on.returncode == 0, on.stderr
    assert _user(engine, reviewer.email) == ("lead", True, False)

    admin = accounts[Role.ADMIN].headers
    uid = next(
        u["id"]
        for u in client.get("/api/v1/users", headers=admin).json()["items"]
        if u["email"] == reviewer.email
    )
    trail = client.get(f"/api/v1/users/{uid}/events", headers=admin).json()["items"]
    assert [(e["action"], e["via"], e["actor_id"], e["before"], e["after"]) for e in trail] == [
        ("role_changed", "cli", None, "reviewer", "lead"),
        ("deactivated", "cli", None, "active", "inactive"),
        ("reactivated", "cli", None, "inactive", "active"),
    ]


def test_reset_password_prints_the_temporary_password_alone(
    database_url: str, engine: Engine, accounts: dict[Role, Account], client: TestClient
) -> None:
    lead = accounts[Role.LEAD]
    done = cli(database_url, "user", "--email", lead.email, "--reset-password")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1
    temporary = lines[0]
    assert len(temporary) >= 16
    assert temporary not in done.stderr
    assert _user(engine, lead.email) == ("lead", True, True)
    # it logs in, to the set-password form; the old password does not
    for password, status in ((PASSWORD, 400), (temporary, 303)):
        client.cookies.clear()
        response = client.post(
            "/login",
            data={"email": lead.email, "password": password},
            headers=ORIGIN,
            follow_redirects=False,
        )
        assert response.status_code == status
    assert response.headers["location"] == "/account/set-password"


def test_reset_password_revokes_the_tokens_when_asked(
    database_url: str, accounts: dict[Role, Account], client: TestClient
) -> None:
    lead, reviewer = accounts[Role.LEAD], accounts[Role.REVIEWER]
    kept = cli(database_url, "user", "--email", reviewer.email, "--reset-password")
    assert kept.returncode == 0, kept.stderr
    assert "API tokens keep working" in _said(kept.stderr)
    assert client.get("/api/v1/me", headers=reviewer.headers).status_code == 200
    done = cli(database_url, "user", "--email", lead.email, "--reset-password", "--revoke-tokens")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1
    assert _said(done.stderr).endswith("(browser sessions ended, 1 API token revoked)")
    changed_at = time.monotonic()

    def me() -> int:
        return client.get("/api/v1/me", headers=lead.headers).status_code

    assert status_once_the_check_is_due(me, changed_at) == 401
    alone = cli(database_url, "user", "--email", lead.email, "--role", "lead", "--revoke-tokens")
    assert alone.returncode == 2
    assert "--revoke-tokens goes with --reset-password" in alone.stderr


def test_unknown_emails_the_last_admin_and_bad_usage(
    database_url: str, engine: Engine, accounts: dict[Role, Account]
) -> None:
    unknown = cli(database_url, "user", "--email", "nobody@example.com", "--deactivate")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "misstriage: error: no user with email nobody@example.com"
    assert unknown.stdout == ""
    reset = cli(database_url, "user", "--email", "nobody@example.com", "--reset-password")
    assert (reset.returncode, reset.stdout) == (1, "")

    last = cli(database_url, "user", "--email", accounts[Role.ADMIN].email, "--role", "reviewer")
    assert last.returncode == 1
    assert "last active admin" in last.stderr
    assert "Traceback" not in last.stderr
    assert _user(engine, accounts[Role.ADMIN].email) == ("admin", True, False)
    off = cli(database_url, "user", "--email", accounts[Role.ADMIN].email, "--deactivate")
    assert off.returncode == 1
    assert _user(engine, accounts[Role.ADMIN].email) == ("admin", True, False)

    for args in ((), ("--deactivate", "--reactivate"), ("--role", "lead", "--reset-password")):
        usage = cli(database_url, "user", "--email", accounts[Role.LEAD].email, *args)
        assert usage.returncode == 2, args
        assert "exactly one of" in usage.stderr
    bad_role = cli(database_url, "user", "--email", accounts[Role.LEAD].email, "--role", "owner")
    assert bad_role.returncode == 2
    assert _user(engine, accounts[Role.LEAD].email) == ("lead", True, False)
