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

from app.clock import FrozenClock
from app.db import make_engine
from app.http.deps import SESSION_COOKIE
from app.main import create_app
from app.models import LoginAttempt, Role
from app.settings import Settings
from tests.support.service import PASSWORD, Account, make_settings

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


# --- who is counted: (email, address) first, the email across addresses higher ---

STRANGER = ("198.51.100.66", 40000)
COLLEAGUE = ("203.0.113.5", 40000)


def client_at(app: object, address: tuple[str, int]) -> TestClient:
    return TestClient(app, client=address)  # type: ignore[arg-type]


def recorded_addresses(engine: Engine) -> set[str]:
    with Session(engine) as session:
        return set(session.exec(select(LoginAttempt.address)))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_a_stranger_cannot_keep_a_user_out(
    settings: Settings, engine: Engine, accounts: dict[Role, Account], clock: FrozenClock
) -> None:
    """Failing on purpose with a colleague's email locks out the stranger's address only."""
    app = create_app(settings, engine, clock)
    lead = accounts[Role.LEAD].email
    with client_at(app, STRANGER) as stranger, client_at(app, COLLEAGUE) as colleague:
        assert [attempt(stranger, lead) for _ in range(5)] == [400] * 5
        assert attempt(stranger, lead, PASSWORD) == 429
        assert attempt(colleague, lead, PASSWORD) == 303
        # The colleague's success does not clear the stranger's failures.
        assert attempt(stranger, lead, PASSWORD) == 429
    assert recorded_addresses(engine) == {STRANGER[0]}


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_failures_spread_over_addresses_lock_the_email_at_the_higher_limit(
    database_url: str, engine: Engine, accounts: dict[Role, Account], clock: FrozenClock
) -> None:
    settings = make_settings(database_url, login_failures_per_email=8)
    app = create_app(settings, engine, clock)
    lead = accounts[Role.LEAD].email
    results = []
    for i in range(4):
        with client_at(app, (f"198.51.100.{i + 1}", 40000)) as guesser:
            results += [attempt(guesser, lead) for _ in range(2)]
    assert results == [400] * 8
    with client_at(app, COLLEAGUE) as colleague:
        assert attempt(colleague, lead, PASSWORD) == 429
        clock.advance(minutes=16)
        assert attempt(colleague, lead, PASSWORD) == 303


# --- the client's address: X-Forwarded-For only from a configured proxy ---


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_forwarded_for_is_ignored_without_trusted_proxies(
    settings: Settings, engine: Engine, accounts: dict[Role, Account], clock: FrozenClock
) -> None:
    """A client that invents a new X-Forwarded-For at every try is still one address."""
    app = create_app(settings, engine, clock)
    with client_at(app, STRANGER) as stranger:
        codes = []
        for i in range(settings.login_failures_per_address + 1):
            stranger.headers["X-Forwarded-For"] = f"192.0.2.{i + 1}"
            codes.append(attempt(stranger, f"user{i}@example.com"))
    assert codes == [400] * settings.login_failures_per_address + [429]
    assert recorded_addresses(engine) == {STRANGER[0]}


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_forwarded_for_is_read_from_a_trusted_proxy(
    database_url: str, engine: Engine, accounts: dict[Role, Account], clock: FrozenClock
) -> None:
    """Behind trusted proxies the client is the right-most address that is not a proxy;
    addresses left of it were written by the client and are not believed."""
    settings = make_settings(database_url, trusted_proxies="10.0.0.0/8, 192.0.2.1")
    app = create_app(settings, engine, clock)
    with client_at(app, ("10.1.2.3", 40000)) as proxied:
        proxied.headers["X-Forwarded-For"] = "1.2.3.4, 203.0.113.77, 192.0.2.1"
        assert attempt(proxied, "nobody@example.com") == 400
    with client_at(app, STRANGER) as direct:  # not a proxy: its header is ignored
        direct.headers["X-Forwarded-For"] = "203.0.113.99"
        assert attempt(direct, "nobody@example.com") == 400
    assert recorded_addresses(engine) == {"203.0.113.77", STRANGER[0]}


def test_trusted_proxies_must_be_addresses_or_networks() -> None:
    with pytest.raises(ValueError, match="MISSTRIAGE_TRUSTED_PROXIES"):
        make_settings("sqlite://", trusted_proxies="10.0.0.0/8, proxy.internal")
    with pytest.raises(ValueError, match="host bits"):
        make_settings("sqlite://", trusted_proxies="10.0.0.1/8")
    assert make_settings("sqlite://", trusted_proxies=" 10.0.0.1 ,::1").trusted_proxy_list == [
        "10.0.0.1",
        "::1",
    ]
