"""The queue's rows and locks: the tables as Core statements read them, a miss as the writers
read it (``MissRow``) and what a write reads with it (``Target``), a double-reviewed miss's
reviews, the person's lock on a triage, and the transaction every step of the queue runs in.

Locks, always in the order app/services/locks.py states for both review queues: first
the person's lock on the triage (``lock_person``), then the rows (a miss ``FOR UPDATE``;
``SKIP LOCKED`` when picking the next one), then, for the first labels of a golden set only,
its row (``causes_frozen``). A person's claims, labels, skips and undos in one triage
therefore run one after the other whatever arrives at once, and the answer is the one their
stored state gives.

Statements are built once, at import, so SQLAlchemy reuses their compiled form.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnClause,
    Connection,
    Table,
    bindparam,
    exists,
    func,
    literal_column,
    or_,
    select,
)
from sqlmodel import Session

from app.db import writing
from app.models import (
    GoldenSet,
    LabelEvent,
    Miss,
    MissSkip,
    MissState,
    Review,
    Run,
    Triage,
    WebhookDelivery,
)
from app.models.triage_public import MissPublic
from app.services import locks
from app.services.errors import NotFound
from app.services.queue.lifecycle import (
    Stage,
    stage_of,
)


@contextmanager
def transaction(session: Session) -> Iterator[Connection]:
    """One write transaction of the queue (``writing``: ``BEGIN IMMEDIATE`` on SQLite) on the
    session's connection. The queue writes with Core: once it is committed, what the session
    holds of the rows it writes is read again when next used (a page rendered after a label
    sees it), and nothing else (a caller's user stays as it is)."""
    with writing(session):
        yield session.connection()
    for held in list(session.identity_map.values()):
        if isinstance(held, (Miss, Review, MissSkip, LabelEvent, WebhookDelivery)):
            session.expire(held)
        elif isinstance(held, Triage):
            session.expire(held, ["closed_at"])
        elif isinstance(held, GoldenSet):
            session.expire(held, ["causes_frozen", "causes"])


MISS: Table = Miss.__table__  # type: ignore[attr-defined]
TRIAGE: Table = Triage.__table__  # type: ignore[attr-defined]
REVIEW: Table = Review.__table__  # type: ignore[attr-defined]
SKIP: Table = MissSkip.__table__  # type: ignore[attr-defined]
EVENT: Table = LabelEvent.__table__  # type: ignore[attr-defined]
RUN: Table = Run.__table__  # type: ignore[attr-defined]
GOLDEN: Table = GoldenSet.__table__  # type: ignore[attr-defined]
DELIVERY: Table = WebhookDelivery.__table__  # type: ignore[attr-defined]

#: ``state = 'open'`` as SQL text: PostgreSQL uses the partial index ix_miss_holder only when
#: it can prove its predicate, which a generic plan with a parameter cannot.
OPEN_LITERAL: ColumnClause[str] = literal_column(f"'{MissState.OPEN.value}'")

#: What a miss answers (``MissPublic``), then what the writers read.
COLUMNS = (
    MISS.c.id,
    MISS.c.qid,
    MISS.c.doc_id,
    MISS.c.grade,
    MISS.c.rank,
    MISS.c.state,
    MISS.c.category,
    MISS.c.note,
    MISS.c.version,
    MISS.c.hint,
    MISS.c.covered_by,
    MISS.c.lease_holder_id,
    MISS.c.lease_expires_at,
    MISS.c.reviewers,
    MISS.c.triage_id,
    MISS.c.reviewed,
    MISS.c.resolution,
    MISS.c.position,
    MISS.c.carried_from,
)

P_TRIAGE = bindparam("p_triage", type_=MISS.c.triage_id.type)
P_USER = bindparam("p_user", type_=MISS.c.lease_holder_id.type)
P_NOW = bindparam("p_now", type_=MISS.c.lease_expires_at.type)
P_EXPIRES = bindparam("p_expires", type_=MISS.c.lease_expires_at.type)
P_MISS = bindparam("p_miss", type_=MISS.c.id.type)


@dataclass(slots=True)
class MissRow:
    """A miss as the writers read it (the names are ``Miss``'s)."""

    id: int
    qid: str
    doc_id: str
    grade: int
    rank: int | None
    state: str
    category: str | None
    note: str
    version: int
    hint: str | None
    covered_by: str | None
    lease_holder_id: int | None
    lease_expires_at: datetime | None
    reviewers: int
    triage_id: int
    reviewed: int
    resolution: str | None
    position: int
    carried_from: int | None

    @property
    def stage(self) -> Stage:
        return stage_of(self.state, self.category, self.reviewed)

    def public(self) -> MissPublic:
        """The API's answer, built without validating again what the database gave."""
        return MissPublic.model_construct(
            id=self.id,
            qid=self.qid,
            doc_id=self.doc_id,
            grade=self.grade,
            rank=self.rank,
            state=MissState(self.state),
            category=self.category,
            note=self.note,
            version=self.version,
            hint=self.hint,
            covered_by=self.covered_by,
            lease_holder=self.lease_holder_id,
            lease_expires_at=self.lease_expires_at,
            reviewers=self.reviewers,
            carried_from=self.carried_from,
        )


def row_of(values: Any) -> MissRow:
    return MissRow(*values[: len(COLUMNS)])


def snapshot(miss: MissRow) -> dict[str, Any]:
    """A miss's label as the audit trail records it before and after an event."""
    return {
        "state": miss.state,
        "category": miss.category,
        "note": miss.note,
        "version": miss.version,
    }


# --- the person's lock, and reading a miss for a write ----------------------------------


def lock_person(conn: Connection, *, triage_id: int, user_id: int) -> int | None:
    """Take the person's lock on the triage for the transaction (``locks.person_on_triage``)
    and answer how many reviewers the triage asks for per sampled miss (None: no such
    triage)."""
    return locks.person_on_triage(conn, triage_id=triage_id, user_id=user_id)


def lock_person_for_miss(conn: Connection, *, miss_id: int, user_id: int) -> int | None:
    """``lock_person`` on the triage of ``miss_id``; answers that triage's id (None: no such
    miss)."""
    return locks.person_on_miss(conn, miss_id=miss_id, user_id=user_id)


@dataclass(slots=True)
class Closing:
    """What the closure and the webhook outbox read from a triage and its golden set."""

    triage_id: int
    closed_at: datetime | None
    misses: int
    golden_id: int
    webhook_url: str | None
    webhook_events: list[str]
    #: The write found few other misses keeping the triage open: some may be written by
    #: other transactions in flight, so the closure is asked again once it has committed
    #: (``settle_closure``).
    recheck: bool = False


@dataclass(slots=True)
class Target:
    """A miss locked for a write, with what the checks, the closure and the outbox read
    from its triage and golden set (in the same statement)."""

    miss: MissRow
    triage_reviewers: int
    causes: list[str]
    causes_frozen: bool
    closing: Closing


_LOAD = (
    select(
        *COLUMNS,
        TRIAGE.c.reviewers,
        TRIAGE.c.closed_at,
        TRIAGE.c.misses,
        GOLDEN.c.id,
        GOLDEN.c.causes,
        GOLDEN.c.causes_frozen,
        GOLDEN.c.webhook_url,
        GOLDEN.c.webhook_events,
    )
    .select_from(
        MISS.join(TRIAGE, TRIAGE.c.id == MISS.c.triage_id)
        .join(RUN, RUN.c.id == TRIAGE.c.run_id)
        .join(GOLDEN, GOLDEN.c.id == RUN.c.golden_set_id)
    )
    .where(MISS.c.id == P_MISS)
    .with_for_update(of=MISS)
)


def load(conn: Connection, miss_id: int) -> Target | None:
    """The miss, its row locked for the transaction, with its triage's and golden set's
    parts. None: no such miss."""
    found = conn.execute(_LOAD, {"p_miss": miss_id}).first()
    if found is None:
        return None
    n = len(COLUMNS)
    miss = row_of(found)
    return Target(
        miss=miss,
        triage_reviewers=int(found[n]),
        causes=list(found[n + 4] or []),
        causes_frozen=bool(found[n + 5]),
        closing=Closing(
            triage_id=miss.triage_id,
            closed_at=found[n + 1],
            misses=int(found[n + 2]),
            golden_id=int(found[n + 3]),
            webhook_url=found[n + 6],
            webhook_events=list(found[n + 7] or []),
        ),
    )


# --- double review: a reviewer's lease and blind label are a ``Review`` row ---------------


@dataclass(frozen=True, slots=True)
class ReviewRow:
    id: int
    reviewer_id: int | None
    category: str | None
    note: str
    lease_expires_at: datetime | None

    @property
    def labelled(self) -> bool:
        return self.category is not None


_REVIEWS = (
    select(
        REVIEW.c.id,
        REVIEW.c.reviewer_id,
        REVIEW.c.category,
        REVIEW.c.note,
        REVIEW.c.lease_expires_at,
    )
    .where(REVIEW.c.miss_id == P_MISS)
    .order_by(REVIEW.c.id)
)


def reviews_of(conn: Connection, miss_id: int) -> list[ReviewRow]:
    """Every review row of a miss (labelled, or a lease), oldest first."""
    return [ReviewRow(*row) for row in conn.execute(_REVIEWS, {"p_miss": miss_id})]


def room_for(reviews: list[ReviewRow], miss: MissRow, user_id: int, now: datetime) -> bool:
    """Whether the others' labels and live leases leave a place for ``user_id``."""
    taken = sum(
        1
        for r in reviews
        if r.reviewer_id != user_id
        and (r.labelled or (r.lease_expires_at is not None and r.lease_expires_at > now))
    )
    return taken < miss.reviewers


def others_places_sql(user_id: int, now: datetime) -> Any:
    """``room_for``'s count in SQL, for the miss of the enclosing query: the places others
    take on it (their blind labels and live leases)."""
    return (
        select(func.count())
        .select_from(REVIEW)
        .where(
            REVIEW.c.miss_id == MISS.c.id,
            func.coalesce(REVIEW.c.reviewer_id, -1) != user_id,
            or_(REVIEW.c.category.is_not(None), REVIEW.c.lease_expires_at > now),
        )
        .scalar_subquery()
    )


def labelled_by_sql(user_id: int) -> Any:
    """The miss of the enclosing query has a blind label of ``user_id``."""
    return exists().where(
        REVIEW.c.miss_id == MISS.c.id,
        REVIEW.c.reviewer_id == user_id,
        REVIEW.c.category.is_not(None),
    )


def mine(reviews: list[ReviewRow], user_id: int) -> ReviewRow | None:
    return next((r for r in reviews if r.reviewer_id == user_id), None)


def with_lease(miss: MissRow, holder: int | None, until: datetime | None) -> MissRow:
    """``miss`` as one reviewer sees it: a double-reviewed miss shows their own lease."""
    return replace(miss, lease_holder_id=holder, lease_expires_at=until)


def locked(conn: Connection, *, miss_id: int, user_id: int, triage_id: int | None) -> Target:
    """The miss under the person's lock on its triage and its own row lock, for a write. 404
    ``miss_not_found`` when there is none or (``triage_id``: the triage a page is about) when
    it is another triage's: every write is checked against the miss's own triage."""
    found = lock_person_for_miss(conn, miss_id=miss_id, user_id=user_id)
    if found is None or (triage_id is not None and found != triage_id):
        where = f" in triage {triage_id}" if triage_id is not None else ""
        raise NotFound(f"no miss {miss_id}{where}", code="miss_not_found")
    target = load(conn, miss_id)
    assert target is not None  # the lock found it in this transaction
    return target
