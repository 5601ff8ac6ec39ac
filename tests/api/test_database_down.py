"""When PostgreSQL is unreachable: /healthz answers 503 and says nothing more, the API answers
503 ``database_unavailable`` (never a 500 with a traceback), and once the server is back the
same app process serves again by itself (dead pooled connections dropped on checkout), after
a stop and after a restart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from app.db import make_engine
from app.main import create_app
from app.migrate import upgrade
from app.models import Role
from app.services.accounts import users
from tests.support.db import ThrowawayCluster
from tests.support.live import free_port
from tests.support.service import make_settings


def assert_unavailable(client: TestClient, token: str) -> None:
    """What a client sees while the database is down."""
    health = client.get("/healthz")
    assert health.status_code == 503
    assert health.json() == {"status": "unavailable", "database": "down"}
    answer = client.get(
        "/api/v1/me", headers={"Authorization": f"Bearer {token}", "X-Request-ID": "req-down"}
    )
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == "2"
    assert answer.headers["x-request-id"] == "req-down"
    assert answer.json()["error"] == {
        "code": "database_unavailable",
        "message": "the database is unavailable right now; try again in a moment",
        "details": {"request_id": "req-down"},
    }


def test_closed_port_answers_503_without_secrets() -> None:
    port = free_port()  # nothing listens there
    url = f"postgresql://misstriage:hunter2-pw@127.0.0.1:{port}/misstriage"
    settings = make_settings(url)
    engine = make_engine(settings)
    try:
        with TestClient(create_app(settings, engine), raise_server_exceptions=False) as client:
            assert_unavailable(client, "some-token")
            health = client.get("/healthz")
            for secret in ("hunter2", str(port), "misstriage:", "127.0.0.1"):
                assert secret not in health.text
            # A page (HTML) that needs the database: a short 503 page, no traceback.
            login = client.post(
                "/login",
                data={"email": "a@example.com", "password": "hunter2-pw", "next": "/"},
                headers={"Origin": "http://testserver"},
            )
            assert login.status_code == 503
            assert login.headers["x-error-code"] == "database_unavailable"
            assert "hunter2" not in login.text
            assert "Traceback" not in login.text
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def cluster() -> Iterator[ThrowawayCluster]:
    """A PostgreSQL server of this module's own, which it stops and restarts (never the
    shared one other tests use)."""
    started = ThrowawayCluster.start()
    if started is None:
        pytest.skip("no throwaway PostgreSQL cluster possible here")
    yield started
    started.destroy()


def test_the_app_recovers_after_a_stop_and_a_restart(cluster: ThrowawayCluster) -> None:
    url = cluster.admin_url
    settings = make_settings(url)
    upgrade(settings)
    engine = make_engine(settings)
    try:
        with Session(engine, expire_on_commit=False) as session:
            user = users.create_user(
                session=session, email="r@example.com", password="long enough", role=Role.REVIEWER
            )
            token = users.create_token(session=session, user=user, name="t").secret
        headers = {"Authorization": f"Bearer {token}"}
        with TestClient(create_app(settings, engine), raise_server_exceptions=False) as client:
            assert client.get("/api/v1/me", headers=headers).status_code == 200

            cluster.pg_ctl("stop", "-m", "fast")
            assert_unavailable(client, token)

            cluster.pg_ctl("start")
            # The pool's connections died with the server; the checkout sees their closed
            # sockets and replaces them, so the very first request after the outage succeeds.
            assert client.get("/api/v1/me", headers=headers).status_code == 200
            assert client.get("/healthz").json()["database"] == "up"

            # A restart while the pool holds live connections: the same.
            assert client.get("/api/v1/me", headers=headers).status_code == 200
            cluster.pg_ctl("restart", "-m", "fast")
            assert client.get("/api/v1/me", headers=headers).status_code == 200
    finally:
        engine.dispose()
