"""Login attempts are rate-limited per email and per client address, in the database, so the
limit holds across app processes; time is moved with a frozen clock, never slept."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.api.deps import SESSION_COOKIE
from app.clock import FrozenClock
from app.db import make_engine
from app.main import create_app
from app.models import LoginAttempt, Role
from app.settings import Settings
from tests.conftest import PASSWORD, Account

ORIGIN = {"Origin": "http://testserver"}


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def app_client(settings: Settings, engine: Engine, clock: FrozenClock) -> Iterator[TestClient]:
    with TestClient(create_app(settings, engine, clock)) as client:
        yield client


def attempt(client: TestClient, email: str, password: str = "wrong password") -> int:
    client.cookies.clear()
    response = client.post(
        "/login",
        data={"email": email, "password": password},
        headers=ORIGIN,
        follow_redirects=False,
    )
    if response.status_code == 429:
        assert response.headers["x-error-code"] == "too_many_attempts"
        assert int(response.headers["retry-after"]) > 0
        error = BeautifulSoup(response.text, "html.parser").select_one(".error")
        assert error is not None
        assert "Too many failed logins" in error.get_text()
        assert SESSION_COOKIE not in response.cookies
    return response.status_code


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_five_failures_lock_the_email_until_the_window_passes(
    app_client: TestClient, accounts: dict[Role, Account], clock: FrozenClock
) -> None:
    lead = accounts[Role.LEAD].email
    assert [attempt(app_client, lead) for _ in range(5)] == [400] * 5
    # Now even the right password is refused: the limit is what stops guessing.
    assert attempt(app_client, lead, PASSWORD) == 429
    response = app_client.post(
        "/login", data={"email": lead.upper(), "password": PASSWORD}, headers=ORIGIN
    )
    assert response.status_code == 429  # the email as typed differently is the same account
    assert response.headers["retry-after"] == str(15 * 60)
    clock.advance(minutes=10)
    retry = app_client.post("/login", data={"email": lead, "password": "x"}, headers=ORIGIN)
    assert retry.headers["retry-after"] == str(5 * 60)
    # Other accounts from the same address are not locked out by it.
    assert attempt(app_client, accounts[Role.REVIEWER].email, PASSWORD) == 303
    clock.advance(minutes=5, seconds=1)
    assert attempt(app_client, lead, PASSWORD) == 303


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_successful_login_clears_the_emails_failures(
    app_client: TestClient, accounts: dict[Role, Account], engine: Engine
) -> None:
    lead = accounts[Role.LEAD].email
    assert [attempt(app_client, lead) for _ in range(4)] == [400] * 4
    assert attempt(app_client, lead, PASSWORD) == 303
    assert [attempt(app_client, lead) for _ in range(5)] == [400] * 5
    assert attempt(app_client, lead) == 429
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(LoginAttempt)).one() == 5


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_failures_from_one_address_across_emails_are_limited(
    app_client: TestClient, accounts: dict[Role, Account], settings: Settings
) -> None:
    """Guessing one password for many accounts is stopped by the address's count."""
    limit = settings.login_failures_per_address
    results = [attempt(app_client, f"user{i}@example.com") for i in range(limit)]
    assert results == [400] * limit
    assert attempt(app_client, "someone-else@example.com") == 429
    assert attempt(app_client, accounts[Role.ADMIN].email, PASSWORD) == 429


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_the_limit_holds_across_app_processes(
    settings: Settings, accounts: dict[Role, Account], clock: FrozenClock
) -> None:
    """Two apps with their own engines (as two processes behind a load balancer have) share
    one count: failures spread over both still lock the email on both."""
    engines = [make_engine(settings), make_engine(settings)]
    try:
        apps = [TestClient(create_app(settings, e, clock)) for e in engines]
        lead = accounts[Role.LEAD].email
        assert [attempt(apps[i % 2], lead) for i in range(5)] == [400] * 5
        assert [attempt(app, lead, PASSWORD) for app in apps] == [429, 429]
        clock.advance(minutes=16)
        assert attempt(apps[1], lead, PASSWORD) == 303
    finally:
        for engine in engines:
            engine.dispose()
