"""Test databases: a migrated SQLite template copied per test, and a throwaway PostgreSQL
database (created and dropped by the suite) truncated per test.

PostgreSQL comes from MISSTRIAGE_TEST_POSTGRES_URL (default: the local server at
127.0.0.1:5432 as user postgres). Where none answers, a throwaway cluster is started from the
Debian binaries; where that is impossible the PostgreSQL tests skip, unless
MISSTRIAGE_REQUIRE_POSTGRES=1 (set by .ci/run), which turns the skip into a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

ADMIN_URL = os.environ.get(
    "MISSTRIAGE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REQUIRE = os.environ.get("MISSTRIAGE_REQUIRE_POSTGRES") == "1"


def _reachable(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3):
            return True
    except psycopg.OperationalError:
        return False


def _throwaway_cluster() -> tuple[str, Path] | None:
    """initdb + pg_ctl as the postgres user (initdb refuses root); None if not possible."""
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    if not bins or shutil.which("runuser") is None:
        return None
    bin_dir = bins[-1]
    base = Path(tempfile.mkdtemp(prefix="misstriage-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    try:
        subprocess.run(["chown", "-R", "postgres", str(base)], check=True)
        as_postgres = ["runuser", "-u", "postgres", "--"]
        subprocess.run(
            [
                *as_postgres,
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "postgres",
            ],
            check=True,
            capture_output=True,
        )
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = str(probe.getsockname()[1])
        subprocess.run(
            [
                *as_postgres,
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-w",
                "-l",
                str(base / "server.log"),
                "-o",
                f"-p {port} -k {sock} -c listen_addresses=127.0.0.1",
                "start",
            ],
            # The server inherits pg_ctl's output: a log file, never a pipe that
            # subprocess.run would wait on for ever.
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
        shutil.rmtree(base, ignore_errors=True)
        return None
    return f"postgresql://postgres@127.0.0.1:{port}/postgres", base


class PostgresServer:
    def __init__(self) -> None:
        self.admin_url = ADMIN_URL
        self.cluster: Path | None = None
        if not _reachable(self.admin_url):
            started = _throwaway_cluster()
            if started is None:
                message = f"no PostgreSQL at {ADMIN_URL} and no throwaway cluster possible"
                if REQUIRE:
                    pytest.fail(message)
                pytest.skip(message)
            self.admin_url, self.cluster = started
            for _ in range(50):
                if _reachable(self.admin_url):
                    break
                time.sleep(0.1)

    def create_database(self) -> str:
        name = f"misstriage_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def url(self, name: str) -> str:
        base = self.admin_url.rsplit("/", 1)[0]
        return f"{base}/{name}".replace("postgresql://", "postgresql+psycopg://", 1)

    def stop(self) -> None:
        if self.cluster is not None:
            bins = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
            subprocess.run(
                [
                    "runuser",
                    "-u",
                    "postgres",
                    "--",
                    str(bins[-1] / "pg_ctl"),
                    "-D",
                    str(self.cluster / "data"),
                    "-m",
                    "immediate",
                    "stop",
                ],
                capture_output=True,
            )
            shutil.rmtree(self.cluster, ignore_errors=True)


def truncate_all(engine: Engine) -> None:
    """Empty every table between tests (PostgreSQL): faster than migrating again."""
    from sqlmodel import SQLModel

    import app.models  # noqa: F401

    names = ", ".join(f'"{t.name}"' for t in SQLModel.metadata.sorted_tables)
    with engine.begin() as connection:
        connection.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
