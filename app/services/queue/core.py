"""The single-review hot path of the queue (claim, label, renew) as fixed Core statements.

A reviewer working back to back spends most of a request here, so these steps select only
the columns they need, in as few round trips as the semantics allow, without building ORM
objects: the next miss is leased by one ``UPDATE ... RETURNING`` (the caller's current miss
first, else the next free one, ``FOR UPDATE SKIP LOCKED`` on PostgreSQL), and a label reads
the miss with its triage and golden set in one locked ``SELECT``. The statements are built
once, at import, so each execution reuses SQLAlchemy's compiled form. Overlap (double
review) and adjudication stay in the ORM code of ``queue``, ``overlap`` and
``adjudication``: the callers send them there.

Every function here runs inside the caller's ``writing`` block (one transaction).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnClause,
    Connection,
    Table,
    and_,
    bindparam,
    exists,
    func,
    insert,
    literal_column,
    or_,
    select,
    update,
)
from sqlmodel import Session

from app.models import GoldenSet, LabelEvent, Miss, MissSkip, MissState, Run, Triage
from app.models.triage_public import MissPublic
from app.services.triage.triages import keeps_open

MISS: Table = Miss.__table__  # type: ignore[attr-defined]
TRIAGE: Table = Triage.__table__  # type: ignore[attr-defined]
_RUN: Table = Run.__table__  # type: ignore[attr-defined]
_GOLDEN: Table = GoldenSet.__table__  # type: ignore[attr-defined]
_SKIP: Table = MissSkip.__table__  # type: ignore[attr-defined]
_EVENT: Table = LabelEvent.__table__  # type: ignore[attr-defined]

#: ``state = 'open'`` as SQL text, not a bound parameter: PostgreSQL uses the partial index
#: ix_miss_holder only when it can prove its predicate, which a generic plan of a prepared
#: statement (psycopg prepares after a few executions) cannot with a parameter.
OPEN_LITERAL: ColumnClause[str] = literal_column(f"'{MissState.OPEN.value}'")

#: What a miss answers (``MissPublic``), then what the label's checks read.
_PUBLIC = (
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
)

_TRIAGE_ID = bindparam("p_triage", type_=MISS.c.triage_id.type)
_USER_ID = bindparam("p_user", type_=MISS.c.lease_holder_id.type)
_NOW = bindparam("p_now", type_=MISS.c.lease_expires_at.type)
_EXPIRES = bindparam("p_expires", type_=MISS.c.lease_expires_at.type)
_MISS_ID = bindparam("p_miss", type_=MISS.c.id.type)


@dataclass(slots=True)
class MissRow:
    """A miss as the hot path reads it: the public fields, the label's and the lease's.
    Its attribute names are ``Miss``'s, so ``audit.snapshot`` and the lease checks read it
    as they read a ``Miss``."""

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


def _row(values: Any) -> MissRow:
    return MissRow(*values[: len(_PUBLIC)])


# --- claim -------------------------------------------------------------------------------

_TRIAGE_REVIEWERS = select(TRIAGE.c.reviewers).where(TRIAGE.c.id == _TRIAGE_ID)

# The caller's current miss: a live lease of theirs (ix_miss_holder).
_MINE = (
    select(MISS.c.id)
    .where(
        MISS.c.triage_id == _TRIAGE_ID,
        MISS.c.state == OPEN_LITERAL,
        MISS.c.lease_holder_id == _USER_ID,
        MISS.c.lease_expires_at > _NOW,
    )
    .order_by(MISS.c.position)
    .limit(1)
    .scalar_subquery()
)
#: The triage is a single-review one (for a claim that has not read it): uncorrelated, so
#: PostgreSQL asks it once, as a filter before it scans (or locks) any miss.
_SINGLE_REVIEW = exists(
    select(TRIAGE.c.id).where(TRIAGE.c.id == _TRIAGE_ID, TRIAGE.c.reviewers == 1)
)


def _lease_statement(*, checked: bool) -> Any:
    """The lease in one round trip: COALESCE evaluates the free miss's subquery (and its
    lock) only when the caller holds none; the current miss's lease is renewed (its holder
    is the caller already). ``checked``: the statement also requires a single-review triage
    (else it leases nothing)."""
    gate = (_SINGLE_REVIEW,) if checked else ()
    # Else the next open miss in queue order whose lease is free or expired, not skipped by
    # the caller; SKIP LOCKED: a miss another transaction is leasing goes to the next one.
    free = (
        select(MISS.c.id)
        .where(
            MISS.c.triage_id == _TRIAGE_ID,
            MISS.c.state == MissState.OPEN.value,
            or_(MISS.c.lease_holder_id.is_(None), MISS.c.lease_expires_at <= _NOW),
            MISS.c.id.not_in(
                select(_SKIP.c.miss_id).where(
                    _SKIP.c.triage_id == _TRIAGE_ID, _SKIP.c.user_id == _USER_ID
                )
            ),
            *gate,
        )
        .order_by(MISS.c.position)
        .limit(1)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    return (
        update(MISS)
        .where(MISS.c.id == func.coalesce(_MINE, free), *gate)
        .values(lease_holder_id=_USER_ID, lease_expires_at=_EXPIRES)
        .returning(*_PUBLIC)
    )


_LEASE = _lease_statement(checked=False)
_LEASE_CHECKED = _lease_statement(checked=True)


def triage_reviewers(conn: Connection, triage_id: int) -> int | None:
    """How many reviewers label each sampled miss of the triage; None: no such triage."""
    value = conn.execute(_TRIAGE_REVIEWERS, {"p_triage": triage_id}).scalar()
    return None if value is None else int(value)


def lease_next(
    conn: Connection,
    *,
    triage_id: int,
    user_id: int,
    now: datetime,
    lease: timedelta,
    checked: bool = False,
) -> MissRow | None:
    """The caller's current miss (lease renewed), else the next free one leased to them, in
    a single-review triage. None when nothing is left for the caller, or (``checked``: the
    caller has not read the triage) when the triage is not a single-review one."""
    found = conn.execute(
        _LEASE_CHECKED if checked else _LEASE,
        {"p_triage": triage_id, "p_user": user_id, "p_now": now, "p_expires": now + lease},
    ).first()
    return None if found is None else _row(found)


# --- label -------------------------------------------------------------------------------


@dataclass(slots=True)
class LabelTarget:
    """A miss locked for a label, with what the label's checks and closure step need from
    its triage and golden set (read in the same statement)."""

    miss: MissRow
    triage_reviewers: int
    closed_at: datetime | None
    misses: int
    golden_id: int
    causes: list[str]
    webhook_url: str | None
    webhook_events: list[str]


_LOAD = (
    select(
        *_PUBLIC,
        TRIAGE.c.reviewers,
        TRIAGE.c.closed_at,
        TRIAGE.c.misses,
        _GOLDEN.c.id,
        _GOLDEN.c.causes,
        _GOLDEN.c.webhook_url,
        _GOLDEN.c.webhook_events,
    )
    .select_from(
        MISS.join(TRIAGE, TRIAGE.c.id == MISS.c.triage_id)
        .join(_RUN, _RUN.c.id == TRIAGE.c.run_id)
        .join(_GOLDEN, _GOLDEN.c.id == _RUN.c.golden_set_id)
    )
    .where(MISS.c.id == _MISS_ID)
    # the miss's row only (SQLite: BEGIN IMMEDIATE has locked the database already)
    .with_for_update(of=MISS)
)


def load_for_label(conn: Connection, miss_id: int) -> LabelTarget | None:
    """The miss, its row locked for the transaction, with its triage's and golden set's
    parts a label needs. None: no such miss."""
    found = conn.execute(_LOAD, {"p_miss": miss_id}).first()
    if found is None:
        return None
    n = len(_PUBLIC)
    return LabelTarget(
        miss=_row(found),
        triage_reviewers=int(found[n]),
        closed_at=found[n + 1],
        misses=int(found[n + 2]),
        golden_id=int(found[n + 3]),
        causes=list(found[n + 4] or []),
        webhook_url=found[n + 5],
        webhook_events=list(found[n + 6] or []),
    )


_OTHER = MISS.alias("other_miss")
#: After the label, does the triage stay open? The labelled miss by its new values, the
#: others as the statement found them (the closure rule: ``triages.keeps_open``): the
#: closure check rides on the label's own UPDATE instead of a query of its own.
_STILL_OPEN = or_(
    keeps_open(MISS),
    exists(
        # parameters, not correlation: SQLite writes RETURNING's columns unqualified, and
        # there ``triage_id = miss.triage_id`` would read ``triage_id = triage_id``
        select(_OTHER.c.id).where(
            _OTHER.c.triage_id == _TRIAGE_ID,
            _OTHER.c.id != _MISS_ID,
            keeps_open(_OTHER),
        )
    ),
)
_SET_LABEL = (
    update(MISS)
    .where(MISS.c.id == _MISS_ID)
    .values(
        state=bindparam("p_state", type_=MISS.c.state.type),
        category=bindparam("p_category", type_=MISS.c.category.type),
        note=bindparam("p_note", type_=MISS.c.note.type),
        version=bindparam("p_version", type_=MISS.c.version.type),
        labelled_by_id=_USER_ID,
        labelled_at=_NOW,
        lease_holder_id=None,
        lease_expires_at=None,
    )
    .returning(_STILL_OPEN)
)


def set_label(
    conn: Connection, miss: MissRow, *, user_id: int | None, category: str, note: str, now: datetime
) -> bool:
    """Write the label on the (locked) miss and bring ``miss`` up to date with it. Answers
    whether the triage stays open (a miss, this one or another, keeps its categories open)."""
    still_open = conn.execute(
        _SET_LABEL,
        {
            "p_miss": miss.id,
            "p_triage": miss.triage_id,
            "p_state": MissState.LABELLED.value,
            "p_category": category,
            "p_note": note,
            "p_version": miss.version + 1,
            "p_user": user_id,
            "p_now": now,
        },
    ).scalar_one()
    miss.state = MissState.LABELLED.value
    miss.category = category
    miss.note = note
    miss.version += 1
    miss.lease_holder_id = None
    miss.lease_expires_at = None
    return bool(still_open)


_RENEW = (
    update(MISS)
    .where(
        MISS.c.id == _MISS_ID,
        MISS.c.lease_holder_id == _USER_ID,
        # the caller's review lease, or their adjudication lease; an open overlap miss's
        # leases are its reviews' (the ORM path)
        or_(
            and_(MISS.c.state == MissState.OPEN.value, MISS.c.reviewers == 1),
            MISS.c.state == MissState.DISPUTED.value,
        ),
    )
    .values(lease_expires_at=_EXPIRES)
    .returning(*_PUBLIC)
)


def renew_held(
    conn: Connection, *, miss_id: int, user_id: int, now: datetime, lease: timedelta
) -> MissRow | None:
    """Extend the caller's lease on a single-review miss (or their adjudication lease) in one
    statement. None: not such a lease (the caller answers through the general path)."""
    found = conn.execute(
        _RENEW, {"p_miss": miss_id, "p_user": user_id, "p_expires": now + lease}
    ).first()
    return None if found is None else _row(found)


_INSERT_EVENT = insert(_EVENT)


def append_event(conn: Connection, values: dict[str, Any]) -> None:
    """Append one ``LabelEvent`` row (``audit.event_values``), in the caller's transaction."""
    conn.execute(_INSERT_EVENT, values)


def connection(session: Session) -> Connection:
    """The session's connection in its current (writing) transaction."""
    return session.connection()
