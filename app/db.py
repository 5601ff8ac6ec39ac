"""The database engine: SQLite (zero configuration) or PostgreSQL (teams), one module."""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
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


#: The SQLSTATEs of a value the database cannot store: a string too long for its column
#: (22001), a number out of its range (22003), a character the encoding lacks (22021,
#: 22P05: a NUL byte in COPY). A DataError without one is the driver's own refusal of a
#: value before it is sent (psycopg: a NUL byte in text). Any other DataError (a division by
#: zero, a bad date the code made) is a bug.
REFUSED_VALUE_STATES = frozenset({"22001", "22003", "22021", "22P05"})


def refused_value(exc: BaseException) -> bool:
    """Whether ``exc`` is the database (or its driver) refusing a value of the input."""
    if not isinstance(exc, sa_exc.DataError):
        return False
    state = getattr(getattr(exc, "orig", None), "sqlstate", None)
    return state is None or state in REFUSED_VALUE_STATES


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


def _private_file(path: Path) -> None:
    """Make a new SQLite database file its owner's alone before SQLite opens it (it holds
    password and token hashes and reviewers' notes; SQLite gives its -wal and -shm files the
    database file's mode). An existing file keeps the mode its operator gave it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def make_engine(settings: Settings) -> Engine:
    """The engine for ``settings.database_url``: SQLite with WAL and our BEGIN handling, or
    PostgreSQL with a pool that drops dead connections on checkout (the app survives a
    database restart by itself)."""
    url = make_url(normalise_url(settings.database_url))
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            _private_file(Path(url.database))
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_MS / 1000},
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        # Let SQLAlchemy's BEGIN be ours: "BEGIN IMMEDIATE" for writers (see writing).
        event.listen(engine, "connect", _disable_pysqlite_transactions)
        event.listen(engine, "begin", _emit_begin)
        return engine
    # A pooled connection PostgreSQL dropped (a restart, a failover, an idle timeout) is
    # replaced on checkout instead of failing the request that drew it, without a round trip
    # per checkout (pre-ping's SELECT 1): see _check_out. The connect timeout bounds how long
    # a request (and /healthz) waits for an unreachable server.
    engine = create_engine(
        url,
        pool_size=10,
        max_overflow=10,
        connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S},
    )
    event.listen(engine, "checkin", _checked_in)
    event.listen(engine, "checkout", _check_out)
    return engine


#: A pooled PostgreSQL connection idle longer than this is pinged (SELECT 1) on checkout: a
#: connection dropped without a word (a firewall's idle timeout, a failover) shows nothing
#: on its socket. A busy pool's connections come back sooner and are never pinged.
IDLE_PING_S = 30.0
_IDLE_SINCE = "misstriage_idle_since"


def _checked_in(_dbapi_connection: Any, record: Any) -> None:
    record.info[_IDLE_SINCE] = time.monotonic()


def _check_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    """SQLAlchemy's pessimistic disconnect handling ("Dealing with Disconnects"), at the
    cost of a system call instead of a round trip: an idle connection has nothing to read,
    so a readable socket means the server said something, and when it is an end (a restart
    or a stop: PostgreSQL's "terminating connection" then EOF) the connection is dead.
    Raising ``DisconnectionError`` makes the pool discard it and check out another (a new
    one when the whole pool died). A connection idle for IDLE_PING_S is pinged as before.
    A disconnect met later in a request still invalidates the pool (SQLAlchemy's
    optimistic handling), so the next request gets fresh connections."""
    if not _postgres_alive(dbapi_connection):
        raise sa_exc.DisconnectionError("the server closed the connection")
    idle_since = record.info.get(_IDLE_SINCE)
    if idle_since is not None and time.monotonic() - idle_since > IDLE_PING_S:
        try:
            with dbapi_connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            dbapi_connection.rollback()
        except Exception as exc:  # any failure of the ping: the connection is not usable
            raise sa_exc.DisconnectionError(str(exc)) from exc


def _postgres_alive(dbapi_connection: Any) -> bool:
    """Whether a psycopg connection at rest is still open. At rest, the server has nothing to
    say: pending input is its goodbye ("terminating connection due to administrator
    command", then EOF), so a readable socket counts as dead. A false alarm (an unprompted
    notice) costs one new connection, never an error."""
    if dbapi_connection.closed or dbapi_connection.broken:
        return False
    try:
        readable, _, _ = select.select([dbapi_connection.pgconn.socket], [], [], 0)
    except (OSError, ValueError):  # the socket is gone already
        return False
    return not readable


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
