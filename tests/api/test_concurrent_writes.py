"""A request that loses a race to another writer answers 409 and writes nothing (a real race:
the other writer holds an uncommitted row while the request runs). On PostgreSQL the request's
own check finds the name free and its write meets the other's row (a unique violation, which
app/errors.py answers 409 "conflict"); on SQLite the request waits for the other writer's
lock earlier and then finds the name taken (409 "name_taken")."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.models import GoldenQuery, GoldenSet, Role

QRELS = "q1 0 a 2\nq2 0 c 1\n"
#: How long the other writer holds its row before committing (the request waits meanwhile).
HOLD_SECONDS = 0.5


def _take_the_name_meanwhile(engine: Engine, holding: threading.Event) -> None:
    """Insert a golden set named "help" and commit it HOLD_SECONDS later."""
    with Session(engine) as session:
        session.add(GoldenSet(name="help"))
        session.flush()  # the row (and, on SQLite, the write lock) is held from here
        holding.set()
        threading.Event().wait(HOLD_SECONDS)
        session.commit()


def test_a_name_taken_meanwhile_answers_409_and_writes_nothing(
    client: TestClient, accounts: dict[Role, object], engine: Engine, backend: str
) -> None:
    lead = accounts[Role.LEAD]
    holding = threading.Event()
    other = threading.Thread(target=_take_the_name_meanwhile, args=(engine, holding))
    other.start()
    try:
        assert holding.wait(10)
        response = client.post(
            "/api/v1/golden-sets",
            headers=lead.headers,  # type: ignore[attr-defined]
            data={"name": "help"},
            files={"qrels": ("qrels.txt", QRELS)},
        )
    finally:
        other.join(10)
    assert response.status_code == 409, response.text
    expected = {"postgresql": "conflict", "sqlite": "name_taken"}[backend]
    assert response.json()["error"]["code"] == expected
    with Session(engine) as session:
        names = session.exec(select(GoldenSet.name)).all()
        queries = session.exec(select(func.count()).select_from(GoldenQuery)).one()
    assert names == ["help"]  # the other writer's, alone
    assert queries == 0  # nothing of the refused import was written
