"""The queue's statements: every write to a miss's lease, label, blind reviews and audit trail
is made here, as fixed Core statements over the tables (built once, at import, so SQLAlchemy
reuses their compiled form), each in the caller's transaction (``writing``).

Locks, always in this order, so no two of the queue's transactions wait on each other in a
circle: first the person's lock on the triage (PostgreSQL: a transaction advisory lock keyed
by triage and person; SQLite: ``BEGIN IMMEDIATE`` holds the database already), then the rows
(a miss ``FOR UPDATE``; ``SKIP LOCKED`` when picking the next one), then, for the first labels
of a golden set only, its row (``causes_frozen``). A person's claims, labels, skips and undos
in one triage therefore run one after the other whatever arrives at once, and the answer is
the one their stored state gives.

``write_label`` is the one writer of a miss's label: a single review's label, an agreement,
a dispute, an adjudication, a lead's relabel and an undo all go through it, with their audit
event, the triage's closure (``closed_at`` from the caller's clock) and the webhook outbox.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    ColumnClause,
    Connection,
    Table,
    bindparam,
    delete,
    exists,
    func,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlmodel import Session

from app.db import writing
from app.models import (
    GoldenSet,
    LabelAction,
    LabelEvent,
    Miss,
    MissSkip,
    MissState,
    Review,
    Run,
    Triage,
    WebhookDelivery,
    WebhookEvent,
)
from app.models.triage_public import MissPublic
from app.services.queue.lifecycle import (
    LABELLED,
    Stage,
    check,
    keeps_open,
    stage_of,
    stored_state,
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
_RUN: Table = Run.__table__  # type: ignore[attr-defined]
_GOLDEN: Table = GoldenSet.__table__  # type: ignore[attr-defined]
_DELIVERY: Table = WebhookDelivery.__table__  # type: ignore[attr-defined]

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
)

_TRIAGE_ID = bindparam("p_triage", type_=MISS.c.triage_id.type)
_USER_ID = bindparam("p_user", type_=MISS.c.lease_holder_id.type)
_NOW = bindparam("p_now", type_=MISS.c.lease_expires_at.type)
_EXPIRES = bindparam("p_expires", type_=MISS.c.lease_expires_at.type)
_MISS_ID = bindparam("p_miss", type_=MISS.c.id.type)


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

_REVIEWERS = select(TRIAGE.c.reviewers).where(TRIAGE.c.id == _TRIAGE_ID).scalar_subquery()
_LOCK_PG = select(func.pg_advisory_xact_lock(_TRIAGE_ID, _USER_ID), _REVIEWERS.label("reviewers"))
_TRIAGE_REVIEWERS = select(_REVIEWERS.label("reviewers"))
_MISS_TRIAGE = select(MISS.c.triage_id).where(MISS.c.id == _MISS_ID)
#: The person's lock on a miss's triage, taken in the statement that finds the triage.
_LOCK_PG_FOR_MISS = select(
    MISS.c.triage_id, func.pg_advisory_xact_lock(MISS.c.triage_id, _USER_ID)
).where(MISS.c.id == _MISS_ID)


def lock_person(conn: Connection, *, triage_id: int, user_id: int) -> int | None:
    """Take the person's lock on the triage for the transaction (PostgreSQL; SQLite's
    ``BEGIN IMMEDIATE`` serialises every writer already) and answer how many reviewers the
    triage asks for per sampled miss (None: no such triage)."""
    params = {"p_triage": triage_id, "p_user": user_id}
    if conn.dialect.name == "postgresql":
        found = conn.execute(_LOCK_PG, params).first()
        value = None if found is None else found[1]
    else:
        value = conn.execute(_TRIAGE_REVIEWERS, params).scalar()
    return None if value is None else int(value)


def lock_person_for_miss(conn: Connection, *, miss_id: int, user_id: int) -> int | None:
    """``lock_person`` on the triage of ``miss_id``; answers that triage's id (None: no such
    miss)."""
    params = {"p_miss": miss_id, "p_user": user_id}
    postgres = conn.dialect.name == "postgresql"
    triage_id = conn.execute(_LOCK_PG_FOR_MISS if postgres else _MISS_TRIAGE, params).scalar()
    return None if triage_id is None else int(triage_id)


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
        _GOLDEN.c.id,
        _GOLDEN.c.causes,
        _GOLDEN.c.causes_frozen,
        _GOLDEN.c.webhook_url,
        _GOLDEN.c.webhook_events,
    )
    .select_from(
        MISS.join(TRIAGE, TRIAGE.c.id == MISS.c.triage_id)
        .join(_RUN, _RUN.c.id == TRIAGE.c.run_id)
        .join(_GOLDEN, _GOLDEN.c.id == _RUN.c.golden_set_id)
    )
    .where(MISS.c.id == _MISS_ID)
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


_FREEZE = (
    update(_GOLDEN)
    .where(_GOLDEN.c.id == bindparam("p_golden"))
    .values(causes_frozen=True)
    .returning(_GOLDEN.c.causes)
)


def freeze_causes(conn: Connection, target: Target) -> list[str]:
    """Freeze the golden set's causes before its first label is written, and answer them as
    they now stand: the update waits for a change of causes in flight (which holds the
    row), so the label is checked against the causes it is stored under."""
    if target.causes_frozen:
        return target.causes
    golden = {"p_golden": target.closing.golden_id}
    causes = list(conn.execute(_FREEZE, golden).scalar_one() or [])
    target.causes, target.causes_frozen = causes, True
    return causes


# --- leases on the miss row: single review and adjudication -------------------------------

_NOT_SKIPPED = MISS.c.id.not_in(
    select(SKIP.c.miss_id).where(SKIP.c.triage_id == _TRIAGE_ID, SKIP.c.user_id == _USER_ID)
)


def _lease_on_miss(state: MissState, *, skips: bool) -> Any:
    """Lease the person their current miss in ``state`` (their lease, live or expired: nobody
    has taken it since), else the next one in queue order whose lease is free or expired, in
    one statement. ``SKIP LOCKED``: a miss another transaction is writing goes to the next.
    The outer ``state`` test makes PostgreSQL re-check a miss written meanwhile."""
    literal_state: ColumnClause[str] = literal_column(f"'{state.value}'")
    mine = (
        select(MISS.c.id)
        .where(
            MISS.c.triage_id == _TRIAGE_ID,
            MISS.c.state == literal_state,
            MISS.c.lease_holder_id == _USER_ID,
        )
        .order_by(MISS.c.position)
        .limit(1)
        .scalar_subquery()
    )
    free = (
        select(MISS.c.id)
        .where(
            MISS.c.triage_id == _TRIAGE_ID,
            MISS.c.state == state.value,
            or_(MISS.c.lease_holder_id.is_(None), MISS.c.lease_expires_at <= _NOW),
            *((_NOT_SKIPPED,) if skips else ()),
        )
        .order_by(MISS.c.position)
        .limit(1)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    return (
        update(MISS)
        .where(MISS.c.id == func.coalesce(mine, free), MISS.c.state == state.value)
        .values(lease_holder_id=_USER_ID, lease_expires_at=_EXPIRES)
        .returning(*COLUMNS)
    )


_LEASE_REVIEW = _lease_on_miss(MissState.OPEN, skips=True)
_LEASE_ADJUDICATION = _lease_on_miss(MissState.DISPUTED, skips=False)


def lease_on_miss(
    conn: Connection,
    *,
    triage_id: int,
    user_id: int,
    now: datetime,
    lease: timedelta,
    adjudication: bool,
) -> MissRow | None:
    """The person's current miss (lease renewed), else the next free one leased to them: in
    a single-review triage's queue, or (``adjudication``) its disputed misses. None when
    nothing is left for them."""
    statement = _LEASE_ADJUDICATION if adjudication else _LEASE_REVIEW
    params = {"p_triage": triage_id, "p_user": user_id, "p_now": now, "p_expires": now + lease}
    found = conn.execute(statement, params).first()
    if found is None:
        # A miss read as the person's (or the next free one) may have been written by
        # another transaction meanwhile: asked again, the statement sees it as it now is.
        found = conn.execute(statement, params).first()
    return None if found is None else row_of(found)


_SET_LEASE = (
    update(MISS)
    .where(MISS.c.id == _MISS_ID)
    .values(lease_holder_id=_USER_ID, lease_expires_at=_EXPIRES)
    .returning(*COLUMNS)
)


def set_lease(
    conn: Connection, miss_id: int, *, user_id: int | None, until: datetime | None
) -> MissRow:
    """Write the lease of a (locked) miss: to ``user_id`` until ``until``, or none."""
    found = conn.execute(
        _SET_LEASE, {"p_miss": miss_id, "p_user": user_id, "p_expires": until}
    ).one()
    return row_of(found)


_MY_OTHER_LEASES = (
    update(MISS)
    .where(
        MISS.c.triage_id == _TRIAGE_ID,
        MISS.c.lease_holder_id == _USER_ID,
        MISS.c.id != _MISS_ID,
    )
    .values(lease_holder_id=None, lease_expires_at=None)
    .returning(MISS.c.id)
)
_MY_OTHER_REVIEW_LEASES = (
    delete(REVIEW)
    .where(
        REVIEW.c.triage_id == _TRIAGE_ID,
        REVIEW.c.reviewer_id == _USER_ID,
        REVIEW.c.category.is_(None),
        REVIEW.c.miss_id != _MISS_ID,
    )
    .returning(REVIEW.c.miss_id)
)


def drop_other_leases(
    conn: Connection, *, triage_id: int, user_id: int, keep: int, reviews: bool
) -> list[int]:
    """Give back every lease the person holds in the triage but the one on ``keep``: one
    lease per person and triage. ``reviews``: also their double-review leases. Answers the
    misses given back."""
    params = {"p_triage": triage_id, "p_user": user_id, "p_miss": keep}
    dropped = [int(i) for i in conn.execute(_MY_OTHER_LEASES, params).scalars()]
    if reviews:
        dropped += [int(i) for i in conn.execute(_MY_OTHER_REVIEW_LEASES, params).scalars()]
    return dropped


_RENEW = (
    update(MISS)
    .where(
        MISS.c.id == _MISS_ID,
        MISS.c.lease_holder_id == _USER_ID,
        MISS.c.state.in_([MissState.OPEN.value, MissState.DISPUTED.value]),
    )
    .values(lease_expires_at=_EXPIRES)
    .returning(*COLUMNS)
)


def renew_on_miss(
    conn: Connection, *, miss_id: int, user_id: int, until: datetime
) -> MissRow | None:
    """Extend the person's lease on the miss row (single review, adjudication) in one
    statement. None: no such lease (a double-review lease is a ``Review`` row)."""
    found = conn.execute(_RENEW, {"p_miss": miss_id, "p_user": user_id, "p_expires": until})
    row = found.first()
    return None if row is None else row_of(row)


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
    .where(REVIEW.c.miss_id == _MISS_ID)
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


def mine(reviews: list[ReviewRow], user_id: int) -> ReviewRow | None:
    return next((r for r in reviews if r.reviewer_id == user_id), None)


def lease_review(
    conn: Connection, miss: MissRow, *, user_id: int, until: datetime, now: datetime
) -> None:
    """Write the person's review lease on a double-reviewed miss (their row, made if new)."""
    found = mine(reviews_of(conn, miss.id), user_id)
    if found is None:
        conn.execute(
            insert(REVIEW).values(
                miss_id=miss.id,
                triage_id=miss.triage_id,
                reviewer_id=user_id,
                note="",
                lease_expires_at=until,
                created_at=now,
            )
        )
    else:
        conn.execute(update(REVIEW).where(REVIEW.c.id == found.id).values(lease_expires_at=until))


def drop_review_leases(conn: Connection, miss_id: int, user_id: int | None) -> list[int | None]:
    """Drop the unlabelled review rows (leases) of ``user_id`` on a miss, or everyone's with
    None; answers whose were dropped."""
    statement = delete(REVIEW).where(REVIEW.c.miss_id == miss_id, REVIEW.c.category.is_(None))
    if user_id is not None:
        statement = statement.where(REVIEW.c.reviewer_id == user_id)
    return [r for r in conn.execute(statement.returning(REVIEW.c.reviewer_id)).scalars()]


_COUNT_REVIEWED = (
    update(MISS)
    .where(MISS.c.id == _MISS_ID)
    .values(reviewed=MISS.c.reviewed + bindparam("p_delta"))
    .returning(MISS.c.reviewed)
)


def put_review(
    conn: Connection,
    target: Target,
    *,
    user_id: int,
    category: str,
    note: str,
    now: datetime,
    event_note: str,
) -> None:
    """A reviewer's blind label on a double-reviewed miss: their row labelled (made if a lead
    labels without a lease), one more label in on the miss, the ``review`` event. The miss
    itself (its label, its version) does not change: another reviewer reading it learns
    nothing from it."""
    miss = target.miss
    check(LabelAction.REVIEW, miss.stage, Stage.REVIEWING)
    before = snapshot(miss)
    found = mine(reviews_of(conn, miss.id), user_id)
    values = {"category": category, "note": note, "labelled_at": now, "lease_expires_at": None}
    if found is None:
        conn.execute(
            insert(REVIEW).values(
                miss_id=miss.id,
                triage_id=miss.triage_id,
                reviewer_id=user_id,
                created_at=now,
                **values,
            )
        )
    else:
        conn.execute(update(REVIEW).where(REVIEW.c.id == found.id).values(**values))
    miss.reviewed = int(
        conn.execute(_COUNT_REVIEWED, {"p_miss": miss.id, "p_delta": 1}).scalar_one()
    )
    after = before | {"category": category, "note": note}
    append_event(
        conn,
        miss,
        user_id,
        LabelAction.REVIEW,
        now=now,
        before=before,
        after=after,
        note=event_note,
    )


def take_back_review(
    conn: Connection, target: Target, *, user_id: int, now: datetime, until: datetime
) -> bool:
    """The reviewer's own blind label on a miss still collecting labels goes, and the miss is
    leased to them again (their row becomes a lease); the ``undo`` event. False: they have no
    label on it to take back."""
    miss = target.miss
    found = mine(reviews_of(conn, miss.id), user_id)
    if miss.stage is not Stage.REVIEWING or found is None or not found.labelled:
        return False
    before = snapshot(miss) | {"category": found.category, "note": found.note}
    conn.execute(
        update(REVIEW)
        .where(REVIEW.c.id == found.id)
        .values(category=None, note="", labelled_at=None, lease_expires_at=until)
    )
    miss.reviewed = int(
        conn.execute(_COUNT_REVIEWED, {"p_miss": miss.id, "p_delta": -1}).scalar_one()
    )
    check(LabelAction.UNDO, Stage.REVIEWING, miss.stage)
    append_event(conn, miss, user_id, LabelAction.UNDO, now=now, before=before)
    return True


# --- the one writer of a miss's label -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabelState:
    """Where a write puts a miss: its stage, final label (None: none), note and what the
    final label rests on."""

    stage: Stage
    category: str | None
    note: str
    resolution: str | None = None


class Closure(StrEnum):
    """What a write did to its triage's closure."""

    UNCHANGED = "unchanged"
    CLOSED = "closed"
    REOPENED = "reopened"


#: Other misses keeping the triage open, counted up to this many: below it, writes in
#: flight elsewhere (at most a few per app process: the queue's lane) may be the last ones,
#: so the closure is asked again after the commit.
NEAR_CLOSURE = 64
_OTHER_MISS = MISS.alias("other_miss")
#: After the write: does the written miss keep the triage open (by its new values), and how
#: many others do (as the statement found them, up to ``NEAR_CLOSURE``)? The closure check
#: rides on the write's own UPDATE.
_OTHERS_OPEN = (
    select(func.count())
    .select_from(
        # parameters, not correlation: SQLite writes RETURNING's columns unqualified
        select(_OTHER_MISS.c.id)
        .where(
            _OTHER_MISS.c.triage_id == _TRIAGE_ID,
            _OTHER_MISS.c.id != _MISS_ID,
            keeps_open(_OTHER_MISS),
        )
        .limit(NEAR_CLOSURE)
        .subquery()
    )
    .scalar_subquery()
)
_WRITE_LABEL = (
    update(MISS)
    .where(MISS.c.id == _MISS_ID)
    .values(
        state=bindparam("p_state", type_=MISS.c.state.type),
        category=bindparam("p_category", type_=MISS.c.category.type),
        note=bindparam("p_note", type_=MISS.c.note.type),
        resolution=bindparam("p_resolution", type_=MISS.c.resolution.type),
        version=MISS.c.version + 1,
        labelled_by_id=bindparam("p_labelled_by", type_=MISS.c.labelled_by_id.type),
        labelled_at=bindparam("p_labelled_at", type_=MISS.c.labelled_at.type),
        lease_holder_id=_USER_ID,
        lease_expires_at=_EXPIRES,
    )
    .returning(keeps_open(MISS), _OTHERS_OPEN)
)


def write_label(
    conn: Connection,
    target: Target,
    *,
    step: LabelAction,
    to: LabelState,
    user_id: int | None,
    now: datetime,
    event_note: str = "",
    lease_until: datetime | None = None,
) -> Closure:
    """Move the (locked) miss to ``to`` by ``step``: its label, version + 1, who and when (a
    final label's author; none while not final), its lease (to ``user_id`` until
    ``lease_until`` when given, else none); the audit event; the triage's closure and the
    webhook outbox. ``target.miss`` is brought up to date."""
    miss = target.miss
    check(step, miss.stage, to.stage)
    before = snapshot(miss)
    final = to.stage in LABELLED
    itself, others = conn.execute(
        _WRITE_LABEL,
        {
            "p_miss": miss.id,
            "p_triage": miss.triage_id,
            "p_state": stored_state(to.stage).value,
            "p_category": to.category,
            "p_note": to.note,
            "p_resolution": to.resolution,
            "p_labelled_by": user_id if final else None,
            "p_labelled_at": now if final else None,
            "p_user": user_id if lease_until is not None else None,
            "p_expires": lease_until,
        },
    ).one()
    miss.state = stored_state(to.stage).value
    miss.category, miss.note, miss.resolution = to.category, to.note, to.resolution
    miss.version += 1
    miss.lease_holder_id = user_id if lease_until is not None else None
    miss.lease_expires_at = lease_until
    append_event(conn, miss, user_id, step, now=now, before=before, note=event_note)
    if step is not LabelAction.DISPUTE:
        _outbox(conn, target.closing, WebhookEvent.MISS_LABELLED, now, _labelled_payload(miss))
    closure = _close(conn, target.closing, still_open=bool(itself) or others > 0, now=now)
    target.closing.recheck = closure is Closure.UNCHANGED and others < NEAR_CLOSURE
    return closure


def _labelled_payload(miss: MissRow) -> dict[str, Any]:
    return {
        "triage_id": miss.triage_id,
        "miss_id": miss.id,
        "qid": miss.qid,
        "doc_id": miss.doc_id,
        "stage": miss.stage.value,
        "category": miss.category,
        "note": miss.note,
        "version": miss.version,
    }


_CLOSE = (
    update(TRIAGE)
    .where(TRIAGE.c.id == _TRIAGE_ID, TRIAGE.c.closed_at.is_(None))
    .values(closed_at=bindparam("p_closed", type_=TRIAGE.c.closed_at.type))
    .returning(TRIAGE.c.id)
)
_REOPEN = (
    update(TRIAGE)
    .where(TRIAGE.c.id == _TRIAGE_ID, TRIAGE.c.closed_at.is_not(None))
    .values(closed_at=None)
    .returning(TRIAGE.c.id)
)


def _close(conn: Connection, closing: Closing, *, still_open: bool, now: datetime) -> Closure:
    """Mark the triage closed (at ``now``) or open again, as the write left it. Each mark
    is written only where it is not yet (so two writers that both find the triage closed
    queue one ``triage.closed`` event); asked only when ``closing.closed_at`` says it
    changes."""
    params = {"p_triage": closing.triage_id}
    if not still_open and closing.closed_at is None:
        closing.closed_at = now
        if conn.execute(_CLOSE, params | {"p_closed": now}).first() is None:
            return Closure.UNCHANGED  # another writer marked it
        payload = {"triage_id": closing.triage_id, "misses": closing.misses}
        _outbox(conn, closing, WebhookEvent.TRIAGE_CLOSED, now, payload)
        return Closure.CLOSED
    if still_open and closing.closed_at is not None:
        closing.closed_at = None
        if conn.execute(_REOPEN, params).first() is None:
            return Closure.UNCHANGED
        return Closure.REOPENED
    return Closure.UNCHANGED


_INSERT_DELIVERY = insert(_DELIVERY)


def _outbox(
    conn: Connection, closing: Closing, event: WebhookEvent, now: datetime, payload: dict[str, Any]
) -> None:
    """Queue a webhook event in the write's own transaction, if the golden set asks for it
    (delivered afterwards: app/services/delivery/events.py)."""
    if not closing.webhook_url or event.value not in closing.webhook_events:
        return
    conn.execute(
        _INSERT_DELIVERY,
        {
            "golden_set_id": closing.golden_id,
            "event": event.value,
            "payload": payload,
            "created_at": now,
            "attempts": 0,
            "last_error": "",
        },
    )


# --- the audit trail and skips -------------------------------------------------------------

_INSERT_EVENT = insert(EVENT)


def append_event(
    conn: Connection,
    miss: MissRow,
    user_id: int | None,
    action: str,
    *,
    now: datetime,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    note: str = "",
) -> None:
    """Append one ``LabelEvent`` (``before`` and ``after`` default to the miss as it stands)."""
    conn.execute(
        _INSERT_EVENT,
        {
            "miss_id": miss.id,
            "triage_id": miss.triage_id,
            "user_id": user_id,
            "at": now,
            "action": str(action),
            "before": before or snapshot(miss),
            "after": after or snapshot(miss),
            "note": note,
        },
    )


def record_skip(
    conn: Connection, miss: MissRow, *, user_id: int, reason: str, now: datetime
) -> None:
    """Keep the person's skip of ``miss`` in force (a later skip replaces the reason)."""
    conn.execute(delete(SKIP).where(SKIP.c.miss_id == miss.id, SKIP.c.user_id == user_id))
    conn.execute(
        insert(SKIP).values(
            miss_id=miss.id, triage_id=miss.triage_id, user_id=user_id, reason=reason, at=now
        )
    )


def with_lease(miss: MissRow, holder: int | None, until: datetime | None) -> MissRow:
    """``miss`` as one reviewer sees it: a double-reviewed miss shows their own lease."""
    return replace(miss, lease_holder_id=holder, lease_expires_at=until)


_KEEPS_OPEN_ANY = exists(select(MISS.c.id).where(MISS.c.triage_id == _TRIAGE_ID, keeps_open(MISS)))
_CLOSURE_CONTEXT = (
    select(
        TRIAGE.c.closed_at,
        TRIAGE.c.misses,
        _GOLDEN.c.id,
        _GOLDEN.c.webhook_url,
        _GOLDEN.c.webhook_events,
        _KEEPS_OPEN_ANY,
    )
    .select_from(
        TRIAGE.join(_RUN, _RUN.c.id == TRIAGE.c.run_id).join(
            _GOLDEN, _GOLDEN.c.id == _RUN.c.golden_set_id
        )
    )
    .where(TRIAGE.c.id == _TRIAGE_ID)
)


def recheck_closure(conn: Connection, *, triage_id: int, now: datetime) -> Closure:
    """Mark the triage closed or open again as its misses now stand (read afresh): after a
    write that moved many misses at once (covered misses put on the queue or taken off), or
    after a label's commit near the closure (``settle_closure``)."""
    closed_at, misses, golden_id, url, events, still_open = conn.execute(
        _CLOSURE_CONTEXT, {"p_triage": triage_id}
    ).one()
    closing = Closing(triage_id, closed_at, int(misses), int(golden_id), url, list(events or []))
    return _close(conn, closing, still_open=bool(still_open), now=now)


def settle_closure(session: Session, target: Target, now: datetime) -> None:
    """Once a write near the closure has committed (``Closing.recheck``): ask the closure
    again in a transaction of its own, which sees every write committed before it. Of the
    last writes of a triage made at once, each found the others' misses open; the last to
    commit sees them all labelled here and marks the triage closed."""
    if not target.closing.recheck:
        return
    with transaction(session) as conn:
        recheck_closure(conn, triage_id=target.closing.triage_id, now=now)
