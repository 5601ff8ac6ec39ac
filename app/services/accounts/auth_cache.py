"""Bearer tokens without a query per request: each process keeps token -> user look-ups.

A revoked token must be refused by every process soon (within 2 s): every change that can
withdraw or change a credential (a token revoked, a user's role, flag or activity changed, a
user deleted) moves the ``auth_generation`` row in its own transaction (``bump``; a flush
listener does it for ORM changes of users and tokens), and a process reads that row at most
once a second (``GENERATION_CHECK_S``), dropping its cache when it moved. A change made
outside the app (SQL by hand, another tool) moves it too: database triggers on the users' and
tokens' credential columns do (migration ``account_life_cycle``; never on a token's
``last_used_at``). Entries also expire after ``ENTRY_TTL_S``, whatever happens.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import event, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session as OrmSession
from sqlalchemy.orm import make_transient_to_detached
from sqlmodel import Session, col

from app.models import ApiToken, AuthGeneration, User

#: How often a process reads the generation row (the bound on a revocation's delay, with the
#: request that notices it).
GENERATION_CHECK_S = 1.0
#: A cached look-up is used this long at most.
ENTRY_TTL_S = 60.0
#: More entries than this and the cache starts afresh (bounded memory).
MAX_ENTRIES = 10_000
_USER_FIELDS = tuple(User.model_fields)


@dataclass
class Entry:
    user: dict[str, Any]
    token_id: int
    last_used_at: datetime | None
    cached_at: float


class TokenCache:
    """One process's look-ups for one database (an engine)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: dict[str, Entry] = {}
        self.generation: int | None = None
        self.checked_at = float("-inf")

    def get(self, session: Session, digest: str) -> Entry | None:
        now = time.monotonic()
        if now - self.checked_at >= GENERATION_CHECK_S:
            generation = current_generation(session)
            with self.lock:
                if generation != self.generation:
                    self.entries.clear()
                    self.generation = generation
                self.checked_at = now
        entry = self.entries.get(digest)
        if entry is None or now - entry.cached_at > ENTRY_TTL_S:
            return None
        return entry

    def peek(self, digest: str) -> Entry | None:
        """The cached look-up, when it can be used without asking the database anything:
        present, fresh, and the generation read less than GENERATION_CHECK_S ago (else None,
        and ``get`` answers, with a query). Reads only memory: safe in the event loop."""
        now = time.monotonic()
        if now - self.checked_at >= GENERATION_CHECK_S:
            return None
        entry = self.entries.get(digest)
        if entry is None or now - entry.cached_at > ENTRY_TTL_S:
            return None
        return entry

    def expire(self) -> None:
        """Forget every look-up and read the generation at the next one (this process made
        a change: it sees it at once, the others within GENERATION_CHECK_S)."""
        with self.lock:
            self.entries.clear()
            self.checked_at = float("-inf")

    def put(self, digest: str, user: User, token_id: int, last_used_at: datetime | None) -> None:
        entry = Entry(
            user={name: getattr(user, name) for name in _USER_FIELDS},
            token_id=token_id,
            last_used_at=last_used_at,
            cached_at=time.monotonic(),
        )
        with self.lock:
            if len(self.entries) >= MAX_ENTRIES:
                self.entries.clear()
            self.entries[digest] = entry


_caches: weakref.WeakKeyDictionary[Engine, TokenCache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def cache_for(session: Session | OrmSession) -> TokenCache:
    engine = session.get_bind().engine
    with _caches_lock:
        cache = _caches.get(engine)
        if cache is None:
            cache = _caches[engine] = TokenCache()
        return cache


def forget() -> None:
    """Drop every process cache (tests that empty the database between tests)."""
    with _caches_lock:
        _caches.clear()


def user_of(session: Session, entry: Entry) -> User:
    """The cached user as a persistent object of ``session`` (as a query would have given
    it), built without a query."""
    user = User(**entry.user)
    make_transient_to_detached(user)
    session.add(user)
    return user


def current_generation(session: Session) -> int:
    value = session.execute(
        select(col(AuthGeneration.generation)).where(col(AuthGeneration.id) == 1)
    ).scalar()
    return 0 if value is None else int(value)


def bump(session: Session | OrmSession) -> None:
    """Move the generation, in the caller's transaction (the row is made if it is gone)."""
    moved = session.execute(
        update(AuthGeneration)
        .where(col(AuthGeneration.id) == 1)
        .values(generation=col(AuthGeneration.generation) + 1)
    )
    if not moved.rowcount:  # type: ignore[attr-defined]
        session.execute(insert(AuthGeneration).values(id=1, generation=1))


@event.listens_for(OrmSession, "before_flush")
def _credentials_changed(session: OrmSession, _context: Any, _instances: Any) -> None:
    """A user or a token changed or deleted through the ORM moves the generation."""
    for obj in (*session.dirty, *session.deleted):
        if isinstance(obj, User | ApiToken) and (
            obj in session.deleted or session.is_modified(obj)
        ):
            bump(session)
            cache_for(session).expire()
            return


@event.listens_for(Engine, "handle_error")
def _database_trouble(context: Any) -> None:
    """Any database error (down, restarting, disconnected; also a rarer constraint error,
    which costs one look-up): forget the look-ups, so the next request asks the database
    again (and answers 503 while it is down) instead of vouching for tokens from memory."""
    engine = context.engine
    if engine is None:
        return
    with _caches_lock:
        cache = _caches.get(engine)
    if cache is not None:
        cache.expire()
