"""Skips: a reviewer passes a miss on with a reason; it goes to the other reviewers, and
the reviewer can take back what they skipped (alone on a triage, that is the only way to
finish it). A skip in force is a ``MissSkip`` row beside its audit event, so the queue, the
tally, the dashboard and the backlog read the skips in force instead of folding the events.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from app.models import LabelAction, Miss, MissSkip, MissState, Triage, User
from app.models.triage_public import MissPublic, TakenBack
from app.services.errors import Forbidden, Invalid
from app.services.queue import rows, store
from app.services.queue.lifecycle import NOT_HELD, REVIEW_QUEUE, in_stages
from app.services.queue.rows import MISS, SKIP


def skip(
    *,
    session: Session,
    miss_id: int,
    user: User,
    reason: str,
    now: datetime,
    triage_id: int | None = None,
) -> MissPublic:
    """Pass the miss the caller holds on to the other reviewers, saying why (422
    ``reason_required``; 403 ``lease_not_held``; 404 ``miss_not_found``, also for a miss of
    another triage than ``triage_id``, a page's)."""
    assert user.id is not None
    reason = reason.strip()
    if not reason:
        raise Invalid("say why you skip this miss", code="reason_required")
    with rows.transaction(session) as conn:
        miss = rows.locked(conn, miss_id=miss_id, user_id=user.id, triage_id=triage_id).miss
        if miss.stage not in REVIEW_QUEUE:
            raise Forbidden(NOT_HELD, code="lease_not_held")
        if miss.reviewers > 1:
            if not store.drop_review_leases(conn, miss.id, user.id):
                raise Forbidden(NOT_HELD, code="lease_not_held")
        elif miss.lease_holder_id != user.id:
            raise Forbidden(NOT_HELD, code="lease_not_held")
        else:
            miss = store.set_lease(conn, miss.id, user_id=None, until=None)
        store.append_event(conn, miss, user.id, LabelAction.SKIP, now=now, note=reason)
        store.record_skip(conn, miss, user_id=user.id, reason=reason, now=now)
    return miss.public()


def take_back(*, session: Session, triage: Triage, user: User, now: datetime) -> TakenBack:
    """Put the unlabelled misses the caller skipped back on their queue (a ``take_back``
    event each); answers how many."""
    assert user.id is not None
    assert triage.id is not None
    with rows.transaction(session) as conn:
        rows.lock_person(conn, triage_id=triage.id, user_id=user.id)
        found = conn.execute(
            sa_select(*rows.COLUMNS)
            .where(
                MISS.c.triage_id == triage.id,
                in_stages(MISS, REVIEW_QUEUE),
                MISS.c.id.in_(
                    sa_select(SKIP.c.miss_id).where(
                        SKIP.c.triage_id == triage.id, SKIP.c.user_id == user.id
                    )
                ),
            )
            .order_by(MISS.c.position)
        ).all()
        misses = [rows.row_of(row) for row in found]
        for miss in misses:
            store.append_event(conn, miss, user.id, LabelAction.TAKE_BACK, now=now)
        if misses:
            conn.execute(
                delete(SKIP).where(
                    SKIP.c.triage_id == triage.id,
                    SKIP.c.user_id == user.id,
                    SKIP.c.miss_id.in_([m.id for m in misses]),
                )
            )
    return TakenBack(taken_back=len(misses))


def skipped_ids(*, triage_id: int, user_id: int | None = None) -> SelectOfScalar[int]:
    """The ids of misses with a skip in force (not taken back), by ``user_id`` or by
    anyone: a subquery over the kept rows (``MissSkip``)."""
    query = select(MissSkip.miss_id).where(MissSkip.triage_id == triage_id)
    if user_id is not None:
        query = query.where(MissSkip.user_id == user_id)
    return query


@dataclass(frozen=True)
class Skip:
    """A skip still in force: who passed the miss on, when, and why."""

    miss_id: int
    qid: str
    doc_id: str
    state: str
    by: str | None
    reason: str
    at: datetime


#: A skip's columns, in ``Skip``'s order.
SKIP_COLUMNS = (
    col(MissSkip.miss_id),
    col(Miss.qid),
    col(Miss.doc_id),
    col(Miss.state),
    col(User.email),
    col(MissSkip.reason),
    col(MissSkip.at),
)


def _skip_rows(triage: Triage) -> Any:
    # more columns than sqlmodel's typed select() takes, so SQLAlchemy's
    return (
        sa_select(*SKIP_COLUMNS)
        .join(Miss, col(Miss.id) == col(MissSkip.miss_id))
        .join(User, col(User.id) == col(MissSkip.user_id), isouter=True)
        .where(col(MissSkip.triage_id) == triage.id)
    )


def skips(*, session: Session, triage: Triage, miss_ids: list[int]) -> list[Skip]:
    """The skips in force on some misses of the triage, in the order they were made."""
    if not miss_ids:
        return []
    rows = session.execute(
        _skip_rows(triage).where(col(MissSkip.miss_id).in_(miss_ids)).order_by(col(MissSkip.id))
    ).all()
    return [Skip(*row) for row in rows]


def open_skips(*, session: Session, triage: Triage, limit: int) -> tuple[list[Skip], int]:
    """The first ``limit`` skips in force on misses still unlabelled, in the order they were
    made (by time), and how many there are. Read from the open misses (ix_miss_queue) to their skips
    (the (miss, reviewer) unique index): a large triage keeps many more skips of misses
    labelled since than of open ones (55,000 and 11,000 at 100,000 misses)."""
    open_misses = (col(Miss.triage_id) == triage.id, col(Miss.state) == MissState.OPEN.value)
    # more columns than sqlmodel's typed select() takes, so SQLAlchemy's
    rows = session.execute(
        sa_select(*SKIP_COLUMNS)
        .select_from(Miss)
        .join(MissSkip, col(MissSkip.miss_id) == col(Miss.id))
        .join(User, col(User.id) == col(MissSkip.user_id), isouter=True)
        .where(*open_misses)
        # by time (ties by id), which no index holds: ordered by id alone, PostgreSQL walked
        # the primary key of every skip in force, probing each one's miss (97 ms)
        .order_by(col(MissSkip.at), col(MissSkip.id))
        .limit(limit)
    ).all()
    total = session.execute(
        sa_select(func.count())
        .select_from(Miss)
        .join(MissSkip, col(MissSkip.miss_id) == col(Miss.id))
        .where(*open_misses)
    ).scalar_one()
    return [Skip(*row) for row in rows], int(total)
