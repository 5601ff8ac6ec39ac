"""An export holds no database transaction while a tracker answers: on PostgreSQL the app's
connection is not 'idle in transaction' and another connection can take an exclusive lock on
the tables the export read; on SQLite another writer commits and a checkpoint finds no
reader holding an old snapshot, and the export still records every issue (once)."""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import psycopg
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, select

from app.models import Export, GoldenSet, Run, Triage, User
from app.settings import Settings
from tests.support.exports import run_export
from tests.support.fake_tracker import Fault, Tracker

PAUSE = 2.0


def export_while_paused(
    engine: Engine,
    settings: Settings,
    triaged: tuple[GoldenSet, Run, Triage, User],
    tracker: Tracker,
    check: Any,
) -> dict[str, Any]:
    """Export to GitHub with the first request held for PAUSE seconds; ``check`` runs while
    the tracker holds it. Returns the outcome and what ``check`` returned."""
    slow = settings.model_copy(update={"export_timeout_seconds": 10.0})
    tracker.faults = [Fault("/repos/acme/search/issues", pause=PAUSE)]
    result: dict[str, Any] = {}

    def work() -> None:
        result["outcome"] = run_export(engine, slow, triaged, "github", "acme/search")

    thread = threading.Thread(target=work)
    thread.start()
    deadline = time.monotonic() + 10
    while not tracker.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tracker.requests, "the export never reached the tracker"
    result["check"] = check()
    # The check came back while the tracker still held the request (not after it answered).
    result["export_done_during_check"] = "outcome" in result
    thread.join(30)
    assert not thread.is_alive()
    return result


def assert_recorded_once(
    engine: Engine,
    settings: Settings,
    triaged: tuple[GoldenSet, Run, Triage, User],
    tracker: Tracker,
    outcome: Any,
) -> None:
    assert [r.action for r in outcome.results] == ["create", "create"], outcome.results
    with Session(engine) as session:
        assert len(session.exec(select(Export)).all()) == 2
    again = run_export(engine, settings, triaged, "github", "acme/search")
    assert [r.action for r in again.results] == ["unchanged", "unchanged"]
    assert len([k for k in tracker.issues if k.startswith("github:")]) == 2


def postgresql_check(database_url: str) -> dict[str, Any]:
    """While the tracker holds the request: no 'idle in transaction' connection, and an
    exclusive lock on the tables the export read comes at once."""
    url = database_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url, autocommit=True) as conn:
        idle = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'"
        ).fetchone()
        conn.execute("SET lock_timeout = '200ms'")
        with conn.transaction():
            # conflicts with the ACCESS SHARE lock that any open reader of these tables holds
            conn.execute("LOCK TABLE miss, export, triage IN ACCESS EXCLUSIVE MODE")
    return {"idle_in_transaction": idle[0] if idle else None, "locked": True}


def sqlite_check(path: str) -> dict[str, Any]:
    """While the tracker holds the request: another writer commits, and a TRUNCATE
    checkpoint (which must wait for every reader) finds no transaction holding a snapshot."""
    writer = sqlite3.connect(path, timeout=0.2, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE golden_set SET description = 'edited during the export'")
        writer.execute("COMMIT")
        writer.execute("PRAGMA busy_timeout = 0")
        busy, _, _ = writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return {"checkpoint_busy": int(busy), "written": True}
    finally:
        writer.close()


def test_no_transaction_open_during_a_tracker_call(
    engine: Engine,
    database_url: str,
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
) -> None:
    _, tracker = fake
    if engine.dialect.name == "postgresql":
        expected: dict[str, Any] = {"idle_in_transaction": 0, "locked": True}

        def check() -> dict[str, Any]:
            return postgresql_check(database_url)
    else:
        path = make_url(tracker_settings.database_url).database
        assert path
        expected = {"checkpoint_busy": 0, "written": True}

        def check() -> dict[str, Any]:
            return sqlite_check(path)

    result = export_while_paused(engine, tracker_settings, labelled, tracker, check)
    assert result["check"] == expected
    assert result["export_done_during_check"] is False  # at once, not after the tracker answered
    assert_recorded_once(engine, tracker_settings, labelled, tracker, result["outcome"])
    if engine.dialect.name == "sqlite":
        with Session(engine) as session:
            golden = session.exec(select(GoldenSet)).one()
            assert golden.description == "edited during the export"
