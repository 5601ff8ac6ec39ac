"""The database engine: SQLite (zero configuration) or PostgreSQL (teams), one module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, create_engine

from app.settings import Settings

#: SQLite waits this long for a lock instead of failing at once.
SQLITE_BUSY_MS = 10_000
#: PostgreSQL: give up connecting after this many seconds (an unreachable host, not a refusal).
POSTGRES_CONNECT_TIMEOUT_S = 10


def normalise_url(url: str) -> str:
    """Accept ``postgres://`` and ``postgresql://`` and use the psycopg 3 driver."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers run beside the writer; foreign keys are off by default in SQLite.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def make_engine(settings: Settings) -> Engine:
    """The engine for ``settings.database_url``: SQLite with WAL and our BEGIN handling, or
    PostgreSQL with a pre-pinged pool (the app survives a database restart by itself)."""
    url = make_url(normalise_url(settings.database_url))
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_MS / 1000},
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        # Let SQLAlchemy's BEGIN be ours: "BEGIN IMMEDIATE" for writers (see services.queue).
        event.listen(engine, "connect", _disable_pysqlite_transactions)
        event.listen(engine, "begin", _emit_begin)
        return engine
    # pre-ping: a pooled connection that PostgreSQL dropped (a restart, a failover, an idle
    # timeout) is replaced on checkout instead of failing the request that drew it. The
    # connect timeout bounds how long a request (and /healthz) waits for an unreachable server.
    return create_engine(
        url,
        pool_pre_ping=True,
        pool_size=10,
        max_overflow=10,
        connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S},
    )


def _disable_pysqlite_transactions(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite's own transaction handling defers BEGIN and breaks SAVEPOINT/IMMEDIATE; the
    # documented remedy is to turn it off and emit BEGIN from the "begin" event.
    dbapi_connection.isolation_level = None


#: Execution option naming the BEGIN statement of a SQLite transaction (see write_transaction).
SQLITE_BEGIN = "sqlite_begin"


def _emit_begin(connection: Any) -> None:
    connection.exec_driver_sql(connection.get_execution_options().get(SQLITE_BEGIN, "BEGIN"))


def write_transaction(session: Session) -> None:
    """Start the session's next transaction as a writer.

    SQLite: ``BEGIN IMMEDIATE`` takes the write lock up front, so two queue operations run one
    after the other instead of both reading, then one failing to upgrade its lock. PostgreSQL
    needs nothing here: its queue queries lock rows (``FOR UPDATE SKIP LOCKED``).
    """
    if session.get_bind().dialect.name != "sqlite":
        return
    session.commit()  # end whatever the request's earlier reads began
    session.connection(execution_options={SQLITE_BEGIN: "BEGIN IMMEDIATE"})


def session_scope(engine: Engine) -> Iterator[Session]:
    with Session(engine, expire_on_commit=False) as session:
        yield session
