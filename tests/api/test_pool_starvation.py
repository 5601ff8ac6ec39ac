"""More concurrent requests than worker threads and database connections must all be
answered. Found by benchmarks/load_fault.py: the authentication dependency kept its pooled
connection while the request waited for a worker thread to run the route; with every thread
taken by newer requests waiting for a connection, the process stalled until the pool timed
out (30 s) and answered 503s."""

from __future__ import annotations

import asyncio

import anyio.to_thread
import httpx
import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.db import normalise_url
from app.main import create_app
from app.models import Role
from app.services.accounts import users
from app.settings import Settings

pytestmark = pytest.mark.parametrize("backend", ["postgresql"], indirect=True)

THREADS = 2
CONNECTIONS = 1
REQUESTS = 24


async def many_requests(settings: Settings, engine: Engine, token: str) -> list[int]:
    # The process's worker threads, fewer than the requests in flight (as under load).
    anyio.to_thread.current_default_thread_limiter().total_tokens = THREADS
    transport = httpx.ASGITransport(app=create_app(settings, engine))
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://testserver", headers=headers
    ) as client:
        answers = await asyncio.gather(*(client.get("/api/v1/me") for _ in range(REQUESTS)))
    return [a.status_code for a in answers]


def test_more_requests_than_threads_and_connections(settings: Settings, engine: Engine) -> None:
    with Session(engine, expire_on_commit=False) as session:
        user = users.create_user(
            session=session, email="r@example.com", password="long enough", role=Role.REVIEWER
        )
        token = users.create_token(session=session, user=user, name="t").secret
    # A pool of one connection that gives up after 3 s (the stall shows as 503s).
    small = create_engine(
        normalise_url(settings.database_url),
        pool_size=CONNECTIONS,
        max_overflow=0,
        pool_timeout=3,
        pool_pre_ping=True,
    )
    try:
        statuses = asyncio.run(many_requests(settings, small, token))
    finally:
        small.dispose()
    assert statuses == [200] * REQUESTS
