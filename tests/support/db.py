"""Test databases: a migrated SQLite template copied per test, and a throwaway PostgreSQL
database (created and dropped by the suite) emptied per test.

PostgreSQL comes from MISSTRIAGE_TEST_POSTGRES_URL (default: the local server at
127.0.0.1:5432 as user postgres). Where none answers, a throwaway cluster is started from the
Debian binaries; where that is impossible the PostgreSQL tests skip, unless
MISSTRIAGE_REQUIRE_POSTGRES=1 (set by .ci/run), which turns the skip into a failure.
"""

from __future__ import annotations

import contextlib
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


class ThrowawayCluster:
    """A PostgreSQL cluster of its own (initdb + pg_ctl as the postgres user, since initdb
    refuses root) on a free loopback port, under a temporary folder: for the suite where no
    server answers, and for tests and benchmarks that stop or restart the server."""

    def __init__(self, base: Path, bin_dir: Path, port: int) -> None:
        self.base, self.bin_dir, self.port = base, bin_dir, port
        self.admin_url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    @classmethod
    def start(cls) -> ThrowawayCluster | None:
        """A running cluster, or None where the binaries or runuser are missing."""
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
        if not bins or shutil.which("runuser") is None:
            return None
        base = Path(tempfile.mkdtemp(prefix="misstriage-pg-"))
        (base / "sock").mkdir()
        try:
            subprocess.run(["chown", "-R", "postgres", str(base)], check=True)
            subprocess.run(
                [
                    *AS_POSTGRES,
                    str(bins[-1] / "initdb"),
                    "-D",
                    str(base / "data"),
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
                port = int(probe.getsockname()[1])
            cluster = cls(base, bins[-1], port)
            cluster.pg_ctl("start")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError):
            shutil.rmtree(base, ignore_errors=True)
            return None
        return cluster

    def pg_ctl(self, action: str, *options: str) -> None:
        """``pg_ctl <action>`` on this cluster, waiting until it is done (60 s at most)."""
        subprocess.run(
            [
                *AS_POSTGRES,
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.base / "data"),
                "-w",
                "-l",
                str(self.base / "server.log"),
                "-o",
                f"-p {self.port} -k {self.base / 'sock'} -c listen_addresses=127.0.0.1",
                *options,
                action,
            ],
            # The server inherits pg_ctl's output: a log file, never a pipe that
            # subprocess.run would wait on for ever.
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )

    def destroy(self) -> None:
        """Stop the server at once and remove its files."""
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            self.pg_ctl("stop", "-m", "immediate")  # fails when already stopped
        shutil.rmtree(self.base, ignore_errors=True)


AS_POSTGRES = ["runuser", "-u", "postgres", "--"]


class PostgresServer:
    def __init__(self) -> None:
        self.admin_url = ADMIN_URL
        self.cluster: ThrowawayCluster | None = None
        if not _reachable(self.admin_url):
            self.cluster = ThrowawayCluster.start()
            if self.cluster is None:
                message = f"no PostgreSQL at {ADMIN_URL} and no throwaway cluster possible"
                if REQUIRE:
                    pytest.fail(message)
                pytest.skip(message)
            self.admin_url = self.cluster.admin_url
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
            self.cluster.destroy()


def empty_all(engine: Engine) -> None:
    """Empty every table between tests (PostgreSQL) and restart the id sequences, as
    ``TRUNCATE ... RESTART IDENTITY`` would. DELETE, children first, takes about 15 ms on the
    few rows a test leaves where TRUNCATE takes about 0.4 s (it makes new files for every
    table); migrating again would take longer still."""
    from sqlmodel import SQLModel

    import app.models  # noqa: F401
    from app.services.accounts import auth_cache
    from app.services.triage import kept

    kept.forget()  # the kept answers belong to the rows about to go
    auth_cache.forget()  # so do the token look-ups

    with engine.begin() as connection:
        for table in reversed(SQLModel.metadata.sorted_tables):
            connection.execute(table.delete())
        connection.execute(
            text(
                "SELECT setval(format('%I.%I', schemaname, sequencename)::regclass, 1, false) "
                "FROM pg_sequences WHERE schemaname = current_schema()"
            )
        )
