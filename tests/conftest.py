"""Shared fixtures: small input files written per test, the SciFact folder when present, the
databases, the app and its accounts. Plain helpers live in tests/support/."""

from __future__ import annotations

import gzip
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from argon2 import profiles
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app import security
from app.db import make_engine
from app.main import create_app
from app.migrate import upgrade
from app.models import Role
from app.services.accounts import users as user_service
from app.settings import Settings
from tests.support import tracebacks
from tests.support.db import PostgresServer, empty_all
from tests.support.live import LiveServer
from tests.support.service import PASSWORD, TEST_SECRET, Account, WriteFile, make_settings


def pytest_configure(config: pytest.Config) -> None:
    """Accounts are made with argon2's cheapest parameters: the suite creates three per test,
    and the default parameters cost about 0.2 s of CPU a hash. Still argon2id, verified as in
    production; a server process the tests start keeps the defaults (and rehashes at login)."""
    security.use_hash_parameters(profiles.CHEAPEST)


@pytest.fixture(autouse=True)
def no_unexpected_tracebacks(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test whose code logged an exception it did not expect (tests/support/
    tracebacks.py); ``@pytest.mark.tracebacks_expected`` for a test that provokes them."""
    collector = tracebacks.Collector()
    root = logging.getLogger()
    root.addHandler(collector)
    try:
        yield
    finally:
        root.removeHandler(collector)
    if collector.records and request.node.get_closest_marker("tracebacks_expected") is None:
        pytest.fail("unexpected traceback(s) logged: " + "; ".join(collector.summary()[:5]))


SHARED = Path(__file__).resolve().parents[2] / "shared"
SCIFACT = SHARED / "datasets" / "scifact"


@pytest.fixture
def write_file(tmp_path: Path) -> WriteFile:
    """Write text (or bytes) to a file under tmp_path; ``gz=True`` compresses it."""

    def write(name: str, content: str | bytes, *, gz: bool = False) -> Path:
        data = content.encode("utf-8") if isinstance(content, str) else content
        path = tmp_path / name
        if gz:
            data = gzip.compress(data)
        path.write_bytes(data)
        return path

    return write


@pytest.fixture(scope="session")
def scifact() -> Path:
    """The real SciFact golden set of ../shared; skipped where the folder is absent (a user's
    clone), but a failure in CI, where it is always laid out."""
    if not (SCIFACT / "qrels.tsv").is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{SCIFACT} is missing in CI")
        pytest.skip("../shared/datasets/scifact is not present")
    return SCIFACT


# --- the service: settings, a migrated database per test, the app, users ---


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_database(postgres: PostgresServer) -> Iterator[str]:
    """One migrated database for the session; each test empties it (empty_all)."""
    name = postgres.create_database()
    upgrade(make_settings(postgres.url(name)))
    yield postgres.url(name)
    postgres.drop_database(name)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.db"
    upgrade(make_settings(f"sqlite:///{path}"))
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def database_url(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        path = tmp_path / "misstriage.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    url = str(request.getfixturevalue("postgres_database"))
    engine = make_engine(make_settings(url))
    empty_all(engine)
    engine.dispose()
    return url


@pytest.fixture
def fresh_settings(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Settings]:
    """An empty database, never migrated (the migration tests)."""
    if backend == "sqlite":
        yield make_settings(f"sqlite:///{tmp_path / 'fresh.db'}")
        return
    server: PostgresServer = request.getfixturevalue("postgres")
    name = server.create_database()
    yield make_settings(server.url(name))
    server.drop_database(name)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    engine = make_engine(settings)
    yield engine
    engine.dispose()


@pytest.fixture
def client(settings: Settings, engine: Engine) -> Iterator[TestClient]:
    with TestClient(create_app(settings, engine), base_url="http://testserver") as test_client:
        yield test_client


@pytest.fixture
def accounts(engine: Engine) -> dict[Role, Account]:
    """An admin, a lead and a reviewer, each with an API token."""
    from sqlmodel import Session

    made: dict[Role, Account] = {}
    with Session(engine, expire_on_commit=False) as session:
        for role in Role:
            email = f"{role.value}@example.com"
            user = user_service.create_user(
                session=session, email=email, password=PASSWORD, role=role
            )
            issued = user_service.create_token(session=session, user=user, name="tests")
            made[role] = Account(email, role, issued.secret)
    return made


@pytest.fixture
def live_server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    """``misstriage serve`` on a free loopback port, on the test's database."""
    server = LiveServer(database_url, tmp_path, secret=TEST_SECRET)
    yield server
    server.stop()
