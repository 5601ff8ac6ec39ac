"""``misstriage backup``: SQLite copies taken while labels are being written are consistent
snapshots; PostgreSQL goes through pg_dump, and without it the command says what to run."""

from __future__ import annotations

import sqlite3
import stat
import subprocess
import threading
import time
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.clock import Clock
from app.models import Miss, Role, Triage
from app.services import queue
from app.services.accounts import users
from tests.support.cli import service_cli as cli
from tests.support.db import PostgresServer
from tests.support.triage import make_triage

CAUSES = ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]
LEASE = timedelta(minutes=10)
MISSES = 4000


def label_until(engine: Engine, triage_id: int, stop: threading.Event, done: list[int]) -> None:
    """Claim and label misses (the service's own transactions) until ``stop`` or the queue
    is empty, counting them in ``done[0]``."""
    clock = Clock()
    with Session(engine, expire_on_commit=False) as session:
        reviewer = users.create_user(
            session=session, email="writer@example.com", password="long enough", role=Role.LEAD
        )
        triage = session.get(Triage, triage_id)
        assert triage is not None
        while not stop.is_set():
            miss = queue.claim(
                session=session, triage_id=triage.id, user=reviewer, now=clock.now(), lease=LEASE
            )
            if miss is None:
                break
            assert miss.id is not None
            queue.label(
                session=session,
                miss_id=miss.id,
                user=reviewer,
                category=CAUSES[miss.id % 3],
                note="",
                version=miss.version,
                now=clock.now(),
            )
            done[0] += 1


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_sqlite_backup_while_writing(database_url: str, engine: Engine, tmp_path: Path) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=MISSES // 5, per_query=5)
    assert triage.id is not None
    stop = threading.Event()
    labelled = [0]
    writer = threading.Thread(
        target=label_until, args=(engine, triage.id, stop, labelled), daemon=True
    )
    writer.start()
    copies = []
    try:
        while labelled[0] < 20 and writer.is_alive():  # the copies are taken while it writes
            time.sleep(0.05)
        for n in range(3):
            output = tmp_path / "backups" / f"copy-{n}.db"
            done = cli(database_url, "backup", "--output", output)
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == str(output)
            assert "integrity ok" in done.stderr
            copies.append(output)
    finally:
        stop.set()
        writer.join(timeout=60)
    assert not writer.is_alive()

    seen = []
    # a backup holds password hashes and notes: its owner's alone, and so is its folder
    assert stat.S_IMODE(copies[0].parent.stat().st_mode) == 0o700
    for copy in copies:
        assert not copy.with_name(copy.name + ".partial").exists()
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600
        connection = sqlite3.connect(copy)
        try:
            assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            # One file: no write-ahead log to carry along.
            assert connection.execute("PRAGMA journal_mode").fetchone() == ("delete",)
            # A snapshot between two label transactions: every labelled miss has its event.
            (misses,) = connection.execute("SELECT count(*) FROM miss").fetchone()
            (labelled_rows,) = connection.execute(
                "SELECT count(*) FROM miss WHERE state = 'labelled'"
            ).fetchone()
            (events,) = connection.execute(
                "SELECT count(*) FROM label_event WHERE action = 'label'"
            ).fetchone()
        finally:
            connection.close()
        assert misses == MISSES
        assert labelled_rows == events
        seen.append(labelled_rows)
    assert seen == sorted(seen)  # later copies, later snapshots
    with Session(engine) as session:
        final = len(session.exec(select(Miss).where(Miss.state == "labelled")).all())
    assert final == labelled[0]
    assert 0 < seen[0] < final  # the first copy was taken in the middle of the writes

    again = cli(database_url, "backup", "--output", copies[0])
    assert again.returncode == 1
    assert "exists already" in again.stderr


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_postgres_backup_with_pg_dump(
    database_url: str, engine: Engine, tmp_path: Path, postgres: PostgresServer
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=10, per_query=2)
    output = tmp_path / "pg.dump"
    done = cli(database_url, "backup", "--output", output)
    if done.returncode == 1 and "pg_dump was not found" in done.stderr:
        pytest.skip("no pg_dump here")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(output)
    assert stat.S_IMODE(output.stat().st_mode) == 0o600

    # Restore it into a new database: the same rows.
    name = postgres.create_database()
    try:
        target = postgres.url(name).replace("postgresql+psycopg://", "postgresql://")
        restored = subprocess.run(
            ["pg_restore", "--no-owner", "--dbname", target, str(output)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert restored.returncode == 0, restored.stderr
        with psycopg.connect(target) as connection:
            count = connection.execute(
                "SELECT count(*) FROM miss WHERE triage_id = %s", (triage.id,)
            ).fetchone()
        assert count == (20,)
    finally:
        postgres.drop_database(name)


def test_postgres_without_pg_dump_prints_the_command(tmp_path: Path) -> None:
    url = "postgresql://app:hunter2-pw@db.internal:5433/misstriage"
    output = tmp_path / "pg.dump"
    done = cli(url, "backup", "--output", output, "--pg-dump", tmp_path / "no-pg_dump")
    assert done.returncode == 1
    assert "pg_dump was not found" in done.stderr
    assert (
        f"pg_dump --format=custom --file {output} "
        "--dbname postgresql://app@db.internal:5433/misstriage" in done.stderr
    )
    assert "hunter2" not in done.stderr + done.stdout
    assert not output.exists()
