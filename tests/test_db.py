"""The unit of work (app/db.py ``writing``) on both databases: it commits, rolls back, refuses
changes made outside it, and on SQLite takes the write lock at BEGIN."""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, select

from app.db import end_reading, make_engine, pending_changes, sqlite_writer_lock, writing
from app.models import LoginAttempt, User, utcnow
from app.settings import Settings

#: The second SQLite writer gives up after this long (instead of the app's 10 s).
SHORT_BUSY_MS = 200


def _attempt(email: str) -> LoginAttempt:
    return LoginAttempt(email=email, address="127.0.0.1", attempted_at=utcnow())


def _emails(engine: Engine) -> list[str]:
    with Session(engine) as session:
        return sorted(session.exec(select(LoginAttempt.email)))


def test_commits_when_the_block_ends(engine: Engine) -> None:
    with Session(engine, expire_on_commit=False) as session:
        with writing(session):
            session.add(_attempt("a@example.com"))
        assert not session.in_transaction()
    assert _emails(engine) == ["a@example.com"]


def _add_then_fail(session: Session) -> None:
    with writing(session):
        session.add(_attempt("a@example.com"))
        session.flush()  # written in the transaction, then rolled back
        raise LookupError("a domain error inside the block")


def test_rolls_back_on_an_exception(engine: Engine) -> None:
    with Session(engine, expire_on_commit=False) as session:
        with pytest.raises(LookupError):
            _add_then_fail(session)
        assert not session.in_transaction()
        assert pending_changes(session) == 0
        # the session is usable again at once
        with writing(session):
            session.add(_attempt("b@example.com"))
    assert _emails(engine) == ["b@example.com"]


def _add_users(session: Session, *emails: str) -> None:
    with writing(session):
        session.add_all(User(email=e, password_hash="x", role="reviewer") for e in emails)


def test_a_failed_commit_rolls_back_and_the_session_goes_on(engine: Engine) -> None:
    """A unique violation raised at the commit (both databases) leaves nothing half written
    and the session ready for the next block."""
    with Session(engine, expire_on_commit=False) as session:
        _add_users(session, "dup@example.com")
        with pytest.raises(IntegrityError):
            _add_users(session, "other@example.com", "dup@example.com")
        with writing(session):
            session.add(_attempt("after@example.com"))
        emails = sorted(session.exec(select(User.email)))
    assert emails == ["dup@example.com"]
    assert _emails(engine) == ["after@example.com"]


def test_refuses_to_start_with_pending_changes(engine: Engine) -> None:
    with Session(engine, expire_on_commit=False) as session:
        with writing(session):
            user = User(email="u@example.com", password_hash="x", role="reviewer")
            session.add(user)
        # a new object, a changed one, a deleted one: each would be committed by the block
        session.add(_attempt("stray@example.com"))
        with pytest.raises(RuntimeError, match="1 unsaved change"), writing(session):
            pass
        session.expunge_all()
        user = session.exec(select(User)).one()
        user.role = "admin"
        with pytest.raises(RuntimeError, match="outside a writing"), writing(session):
            pass
        session.rollback()
        user = session.exec(select(User)).one()
        session.delete(user)
        with pytest.raises(RuntimeError, match="unsaved"), writing(session):
            pass
        with pytest.raises(RuntimeError, match="unsaved"):
            end_reading(session)
        session.rollback()
        # assigning an equal value is no change: no refusal
        user = session.exec(select(User)).one()
        user.role = user.role
        with writing(session):
            pass
    assert _emails(engine) == []
    with Session(engine) as check:
        assert [u.role for u in check.exec(select(User))] == ["reviewer"]


def _nested(session: Session) -> None:
    with writing(session):
        session.add(_attempt("outer@example.com"))
        with writing(session):
            pass


def test_does_not_nest(engine: Engine) -> None:
    with Session(engine, expire_on_commit=False) as session:
        with pytest.raises(RuntimeError, match="does not nest"):
            _nested(session)
        # the outer block rolled back on the refusal
        with writing(session):
            pass
    assert _emails(engine) == []


def test_ends_an_open_read_transaction_and_keeps_objects_loaded(engine: Engine) -> None:
    with Session(engine, expire_on_commit=False) as session:
        with writing(session):
            session.add(User(email="u@example.com", password_hash="x", role="reviewer"))
        user = session.exec(select(User)).one()
        assert session.in_transaction()  # the read began one
        with writing(session):
            session.add(_attempt("b@example.com"))
        assert "email" in user.__dict__  # still loaded: no query needed to read it
        end_reading(session)
        assert not session.in_transaction()
        assert user.email == "u@example.com"


def _short_busy(settings: Settings) -> Engine:
    """An engine on the test's database with a busy timeout of SHORT_BUSY_MS: a writer that
    waits for the lock gives up soon, so the test needs no sleep."""
    other = make_engine(settings)

    def short(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute(f"PRAGMA busy_timeout={SHORT_BUSY_MS}")

    event.listen(other, "connect", short)  # after the app's pragmas: it overrides theirs
    return other


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_sqlite_writers_take_the_lock_at_begin(engine: Engine, settings: Settings) -> None:
    """BEGIN IMMEDIATE: while one writing block is open, a second one waits at its start
    (here until its short busy timeout), even before either has written a row; a reader
    is not held up (WAL)."""
    second_engine = _short_busy(settings)
    try:
        with (
            Session(engine, expire_on_commit=False) as first,
            Session(second_engine, expire_on_commit=False) as second,
        ):
            with writing(first):
                # nothing written yet: a deferred BEGIN would not hold the lock here
                started = time.monotonic()
                with (
                    pytest.raises(OperationalError, match="database is locked"),
                    writing(second),
                ):
                    pytest.fail("the second writer got in while the first held the lock")
                waited = time.monotonic() - started
                assert waited >= SHORT_BUSY_MS / 1000 * 0.9
                assert not second.in_transaction()
                assert list(second.exec(select(LoginAttempt))) == []  # reading goes on
                end_reading(second)
                first.add(_attempt("first@example.com"))
            with writing(second):  # the lock is free again
                second.add(_attempt("second@example.com"))
    finally:
        second_engine.dispose()
    assert _emails(engine) == ["first@example.com", "second@example.com"]


#: Threads writing at once in the writer-lock test; each holds the lock HOLD_S, so together
#: they hold it several times as long as the short busy timeout.
WRITERS, HOLD_S = 12, 0.05


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_sqlite_writers_of_one_process_queue_on_its_lock(
    engine: Engine, settings: Settings
) -> None:
    """Many threads writing at once all succeed, although together they hold the database
    longer than the busy timeout: they queue on the process's writer lock, not in SQLite's
    busy handler (which would give up after SHORT_BUSY_MS). A block that raises releases
    the lock: the next writer gets in."""
    short = _short_busy(settings)
    lock = sqlite_writer_lock(short)
    assert lock is sqlite_writer_lock(engine)  # one lock per file, whatever the engine
    start = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            with Session(short, expire_on_commit=False) as session:
                start.wait()
                with writing(session):
                    session.add(_attempt(f"w{n:02d}@example.com"))
                    session.flush()
                    time.sleep(HOLD_S)  # holds the database: the others must wait their turn
        except BaseException as exc:
            errors.append(exc)

    try:
        threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert _emails(engine) == [f"w{n:02d}@example.com" for n in range(WRITERS)]

        with Session(short, expire_on_commit=False) as session:
            with pytest.raises(LookupError):
                _add_then_fail(session)
            assert not lock.lock.locked()
            assert lock.owner is None
        with Session(short, expire_on_commit=False) as session, writing(session):
            session.add(_attempt("after@example.com"))
        assert "after@example.com" in _emails(engine)
    finally:
        short.dispose()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_postgres_writers_run_side_by_side(engine: Engine) -> None:
    """PostgreSQL: a normal transaction; two writing blocks on different rows do not wait
    for each other (the queue's row locks keep two reviewers off one miss)."""
    with (
        Session(engine, expire_on_commit=False) as first,
        Session(engine, expire_on_commit=False) as second,
        writing(first),
    ):
        first.add(_attempt("first@example.com"))
        first.flush()
        with writing(second):
            second.add(_attempt("second@example.com"))
        # the second committed while the first is still open
        assert _emails(engine) == ["second@example.com"]
    assert _emails(engine) == ["first@example.com", "second@example.com"]


#: Where a transaction may be ended by hand: the unit of work itself, and the request's
#: authentication, which ends its reads before the route runs (see optional_principal).
HAND_WRITTEN_ALLOWED = {Path("app/db.py"), Path("app/http/deps.py")}


def test_every_transaction_of_the_app_is_a_writing_block() -> None:
    root = Path(__file__).resolve().parents[1]
    found = []
    for path in sorted((root / "app").rglob("*.py")):
        relative = path.relative_to(root)
        if relative in HAND_WRITTEN_ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"commit", "rollback", "begin", "begin_nested"}
            ):
                found.append(f"{relative}:{node.lineno} .{node.func.attr}()")
    assert found == [], "use `with writing(session):` (app/db.py)"


def test_a_new_sqlite_database_is_its_owners_alone(tmp_path: Path) -> None:
    """It holds password and token hashes and reviewers' notes (its -wal and -shm files take
    its mode); a database that exists keeps the mode its operator gave it."""
    import stat

    from sqlalchemy import text as sql_text

    from app.db import make_engine
    from tests.support.service import make_settings

    new = tmp_path / "var" / "new.db"
    engine = make_engine(make_settings(f"sqlite:///{new}"))
    with engine.begin() as connection:
        connection.execute(sql_text("CREATE TABLE t (x INTEGER)"))
        connection.execute(sql_text("INSERT INTO t VALUES (1)"))
        assert stat.S_IMODE((tmp_path / "var" / "new.db-wal").stat().st_mode) == 0o600
    engine.dispose()
    assert stat.S_IMODE(new.stat().st_mode) == 0o600
    kept = tmp_path / "kept.db"
    kept.touch(mode=0o640)
    kept.chmod(0o640)
    make_engine(make_settings(f"sqlite:///{kept}")).dispose()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
