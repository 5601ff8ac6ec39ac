"""Skipped misses: a reviewer passes a miss on with a reason (``queue.skip``); it goes to
other reviewers, and the reviewer can take back what they skipped (alone on a triage, that is
the only way to finish it). The dashboard and the backlog show skips still in force."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from app.db import writing
from app.models import LabelAction, LabelEvent, Miss, MissSkip, MissState, Triage, User
from app.models.triage_public import TakenBack


def skipped_ids(*, triage_id: int, user_id: int | None = None) -> SelectOfScalar[int]:
    """The ids of misses with a skip in force (not taken back), by ``user_id`` or by
    anyone: a subquery over the kept rows (``MissSkip``)."""
    query = select(MissSkip.miss_id).where(MissSkip.triage_id == triage_id)
    if user_id is not None:
        query = query.where(MissSkip.user_id == user_id)
    return query


def record_skip(session: Session, miss: Miss, user: User, *, reason: str, now: datetime) -> None:
    """Keep the caller's skip of ``miss`` in force (a later skip replaces the reason), in the
    caller's transaction, beside its event."""
    session.execute(
        delete(MissSkip).where(col(MissSkip.miss_id) == miss.id, col(MissSkip.user_id) == user.id)
    )
    session.add(
        MissSkip(
            miss_id=miss.id,  # type: ignore[arg-type]
            triage_id=miss.triage_id,
            user_id=user.id,
            reason=reason,
            at=now,
        )
    )


def skipped_waiting(*, session: Session, triage: Triage, user: User) -> int:
    """How many unlabelled misses the caller skipped (and could take back)."""
    return int(
        session.exec(
            select(func.count())
            .select_from(Miss)
            .where(
                Miss.triage_id == triage.id,
                Miss.state == MissState.OPEN.value,
                col(Miss.id).in_(skipped_ids(triage_id=triage.id, user_id=user.id)),  # type: ignore[arg-type]
            )
        ).one()
    )


def take_back(*, session: Session, triage: Triage, user: User, now: datetime) -> TakenBack:
    """Put the unlabelled misses the caller skipped back on the caller's queue (a
    ``take_back`` event each); answers how many."""
    with writing(session):
        misses = session.exec(
            select(Miss)
            .where(
                Miss.triage_id == triage.id,
                Miss.state == MissState.OPEN.value,
                col(Miss.id).in_(skipped_ids(triage_id=triage.id, user_id=user.id)),  # type: ignore[arg-type]
            )
            .order_by(col(Miss.position))
        ).all()
        for miss in misses:
            state = {
                "state": miss.state,
                "category": miss.category,
                "note": miss.note,
                "version": miss.version,
            }
            session.add(
                LabelEvent(
                    miss_id=miss.id,  # type: ignore[arg-type]
                    triage_id=miss.triage_id,
                    user_id=user.id,
                    at=now,
                    action=LabelAction.TAKE_BACK,
                    before=state,
                    after=state,
                )
            )
        if misses:
            session.execute(
                delete(MissSkip).where(
                    col(MissSkip.triage_id) == triage.id,
                    col(MissSkip.user_id) == user.id,
                    col(MissSkip.miss_id).in_([m.id for m in misses]),
                )
            )
    return TakenBack(taken_back=len(misses))


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
