"""The database engine: SQLite (zero configuration) or PostgreSQL (teams), one module."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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
        # Let SQLAlchemy's BEGIN be ours: "BEGIN IMMEDIATE" for writers (see writing).
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


#: Execution option naming the BEGIN statement of a SQLite transaction (see ``writing``).
SQLITE_BEGIN = "sqlite_begin"
#: ``session.info`` key marking a session inside ``writing`` (the block does not nest).
_WRITING = "misstriage_writing"


def _emit_begin(connection: Any) -> None:
    connection.exec_driver_sql(connection.get_execution_options().get(SQLITE_BEGIN, "BEGIN"))


def pending_changes(session: Session) -> int:
    """How many objects the session would write at its next flush: added, deleted, or
    changed (``session.dirty`` also lists objects assigned an equal value: not counted)."""
    changed = sum(1 for obj in session.dirty if session.is_modified(obj))
    return len(session.new) + len(session.deleted) + changed


def _refuse_pending(session: Session, what: str) -> None:
    pending = pending_changes(session)
    if pending:
        raise RuntimeError(
            f"{what} refused: the session holds {pending} unsaved change(s) made outside a "
            "writing() block; make every change inside `with writing(session):`"
        )


def end_reading(session: Session) -> None:
    """End the session's read transaction, if one is open, keeping its objects loaded
    (sessions are made with ``expire_on_commit=False``). Refuses when changes are pending:
    ending a transaction must never write."""
    _refuse_pending(session, "end_reading()")
    session.commit()  # nothing is pending: ends the transaction, writes nothing


@contextmanager
def writing(session: Session) -> Iterator[None]:
    """The one unit of work: ``with writing(session): ...`` runs the block in a transaction of
    its own, committed when the block ends and rolled back on any exception.

    Refuses to start (RuntimeError) while the session holds changes made outside such a block,
    so a commit never writes something its block did not make; an open read transaction is
    ended first (nothing is pending, so that writes nothing). The block does not nest.

    SQLite: the transaction begins with ``BEGIN IMMEDIATE``, taking the write lock up front, so
    two writers run one after the other (the second waits up to the busy timeout) instead of
    both reading, then one failing to upgrade its lock. PostgreSQL: a normal transaction; the
    queue's queries lock their rows (``FOR UPDATE SKIP LOCKED``).
    """
    if session.info.get(_WRITING):
        raise RuntimeError("writing() does not nest: the session is inside a writing block")
    _refuse_pending(session, "writing()")
    session.commit()  # end the read transaction the caller's earlier queries began
    session.info[_WRITING] = True
    try:
        if session.get_bind().dialect.name == "sqlite":
            session.connection(execution_options={SQLITE_BEGIN: "BEGIN IMMEDIATE"})
        yield
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        del session.info[_WRITING]
