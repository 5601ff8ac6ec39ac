"""Token look-ups are cached per process, and a revocation still reaches every process: two
real server processes on one database (both backends), a token revoked through one is
refused by the other within REVOCATION_BOUND_S (app/services/accounts/auth_cache.py): by the
first request it answers once its generation check is due."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.models import Role
from app.services.accounts import auth_cache, users
from tests.support.live import LiveServer
from tests.support.revocation import status_once_the_check_is_due
from tests.support.service import PASSWORD, TEST_SECRET

#: The promise: a revoked token is refused by every process within this long.
REVOCATION_BOUND_S = 2.0


def _token(engine: Engine, email: str) -> str:
    with Session(engine, expire_on_commit=False) as session:
        user = users.create_user(session=session, email=email, password=PASSWORD, role=Role.LEAD)
        return users.create_token(session=session, user=user, name="t").secret


def test_a_token_revoked_through_one_process_is_refused_by_the_other(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    revoked, kept = _token(engine, "a@example.com"), _token(engine, "b@example.com")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = LiveServer(database_url, tmp_path / "a", secret=TEST_SECRET)
    try:
        second = LiveServer(database_url, tmp_path / "b", secret=TEST_SECRET)
        try:
            bearer = {"Authorization": f"Bearer {revoked}"}
            with (
                httpx.Client(base_url=first.url, timeout=30) as a,
                httpx.Client(base_url=second.url, timeout=30) as b,
            ):
                # both processes know (and cache) the token
                for client in (a, b, a, b):
                    assert client.get("/api/v1/me", headers=bearer).status_code == 200
                (listed,) = a.get("/api/v1/tokens", headers=bearer).json()["items"]
                assert a.delete(f"/api/v1/tokens/{listed['id']}", headers=bearer).status_code == 200
                revoked_at = time.monotonic()
                # the process that revoked it refuses it at once
                refused = a.get("/api/v1/me", headers=bearer)
                assert (refused.status_code, refused.json()["error"]["code"]) == (
                    401,
                    "invalid_token",
                )
                # the other once its generation check is due, which is within the promise
                assert auth_cache.GENERATION_CHECK_S < REVOCATION_BOUND_S
                status = status_once_the_check_is_due(
                    lambda: b.get("/api/v1/me", headers=bearer).status_code, revoked_at
                )
                assert status == 401
                # other tokens are not affected
                other = {"Authorization": f"Bearer {kept}"}
                assert b.get("/api/v1/me", headers=other).status_code == 200
        finally:
            second.stop()
    finally:
        first.stop()


def test_the_cache_answers_without_a_query_and_drops_a_revoked_token(engine: Engine) -> None:
    """In one process: a second look-up of a token runs no query for the token (only the
    generation row, at most once a second); an ORM change to a token moves the generation,
    so the next check drops the cached look-up."""
    secret = _token(engine, "c@example.com")
    statements: list[str] = []
    with Session(engine, expire_on_commit=False) as session:
        user = users.user_for_token(session=session, secret=secret)
        assert user is not None
        assert user.email == "c@example.com"
        session.commit()

    def record(_c: object, _cur: object, statement: str, *_: object) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        with Session(engine, expire_on_commit=False) as session:
            again = users.user_for_token(session=session, secret=secret)
            assert again is not None
            assert (again.id, again.role) == (user.id, user.role)
            assert not [s for s in statements if "api_token" in s]
            session.commit()
        with Session(engine, expire_on_commit=False) as session:
            (token,) = users.list_tokens(session=session, user=user)
            users.revoke_token(session=session, user=user, token_id=token.id)  # type: ignore[arg-type]
        # this process made the change: its cache is dropped at once
        assert auth_cache.cache_for(Session(engine)).entries == {}
        with Session(engine, expire_on_commit=False) as session:
            assert users.user_for_token(session=session, secret=secret) is None
    finally:
        event.remove(engine, "before_cursor_execute", record)
