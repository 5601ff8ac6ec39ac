"""The database engine: SQLite (zero configuration) or PostgreSQL (teams), one module."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, create_engine

from app.settings import Settings

#: SQLite waits this long for a lock instead of failing at once.
SQLITE_BUSY_MS = 10_000
#: SQLite: the longest a writer waits for its turn on the process's writer lock before it
#: goes to SQLite's busy handler anyway (a safety bound: every holder releases at its end).
SQLITE_WRITER_WAIT_S = SQLITE_BUSY_MS / 1000
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


log = logging.getLogger(__name__)


class WriterLock:
    """A process's lock for the writers of one SQLite file, remembering which thread holds
    it: a writer nested in one of its own thread's (another session) does not wait for
    itself, it goes to SQLite's busy handler as it always did."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: int | None = None

    @contextmanager
    def turn(self) -> Iterator[None]:
        if self.owner == threading.get_ident():
            yield
            return
        held = self.lock.acquire(timeout=SQLITE_WRITER_WAIT_S)
        if not held:  # never expected: every holder releases when its block ends
            log.warning("sqlite writer lock not acquired in %.0f s", SQLITE_WRITER_WAIT_S)
        else:
            self.owner = threading.get_ident()
        try:
            yield
        finally:
            if held:
                self.owner = None
                self.lock.release()


_writer_locks: dict[str, WriterLock] = {}
_writer_locks_guard = threading.Lock()


def sqlite_writer_lock(engine: Engine) -> WriterLock:
    """The process's writer lock for ``engine``'s SQLite file (one per file, shared by every
    engine of this process on it). Writers of one process queue on it in arrival order
    before ``BEGIN IMMEDIATE``, instead of polling in SQLite's busy handler, whose sleeps
    (up to 100 ms each) make the tail; writers in other processes still meet the busy
    timeout."""
    key = str(engine.url.database or ":memory:")
    with _writer_locks_guard:
        lock = _writer_locks.get(key)
        if lock is None:
            lock = _writer_locks[key] = WriterLock()
        return lock


@contextmanager
def writing(session: Session) -> Iterator[None]:
    """The one unit of work: ``with writing(session): ...`` runs the block in a transaction of
    its own, committed when the block ends and rolled back on any exception.

    Refuses to start (RuntimeError) while the session holds changes made outside such a block,
    so a commit never writes something its block did not make; an open read transaction is
    ended first (nothing is pending, so that writes nothing). The block does not nest.

    SQLite: the transaction begins with ``BEGIN IMMEDIATE``, taking the write lock up front, so
    two writers run one after the other (the second waits up to the busy timeout) instead of
    both reading, then one failing to upgrade its lock. Writers of one process first queue
    on the process's writer lock (``sqlite_writer_lock``), released when the block ends,
    however it ends. PostgreSQL: a normal transaction; the
    queue's queries lock their rows (``FOR UPDATE SKIP LOCKED``).
    """
    if session.info.get(_WRITING):
        raise RuntimeError("writing() does not nest: the session is inside a writing block")
    _refuse_pending(session, "writing()")
    session.commit()  # end the read transaction the caller's earlier queries began
    session.info[_WRITING] = True
    bind = session.get_bind()
    turn = (
        sqlite_writer_lock(bind.engine).turn() if bind.dialect.name == "sqlite" else nullcontext()
    )
    try:
        with turn:
            try:
                if bind.dialect.name == "sqlite":
                    session.connection(execution_options={SQLITE_BEGIN: "BEGIN IMMEDIATE"})
                yield
                session.commit()
            except BaseException:
                session.rollback()
                raise
    finally:
        del session.info[_WRITING]
