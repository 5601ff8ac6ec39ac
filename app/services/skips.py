"""Skipped misses: a reviewer passes a miss on with a reason (``queue.skip``); it goes to
other reviewers, and the reviewer can take back what they skipped (alone on a triage, that is
the only way to finish it). The dashboard and the backlog show skips still in force."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from app.db import writing
from app.models import LabelAction, LabelEvent, Miss, MissState, Triage, User
from app.models.triage_public import TakenBack

#: The events that make and unmake a skip.
SKIP_ACTIONS = (LabelAction.SKIP, LabelAction.TAKE_BACK)


def skipped_ids(*, triage_id: int, user_id: int | None = None) -> SelectOfScalar[int]:
    """The ids of misses with a skip still in force (not taken back), by ``user_id`` or by
    anyone: a subquery. A skip counts +1 and a take-back -1 per (miss, reviewer)."""
    balance = func.sum(case((col(LabelEvent.action) == LabelAction.SKIP.value, 1), else_=-1))
    where: list[Any] = [
        LabelEvent.triage_id == triage_id,
        col(LabelEvent.action).in_(SKIP_ACTIONS),
    ]
    if user_id is not None:
        where.append(LabelEvent.user_id == user_id)
    return (
        select(LabelEvent.miss_id)
        .where(*where)
        .group_by(col(LabelEvent.miss_id), col(LabelEvent.user_id))
        .having(balance > 0)
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


def skips(
    *,
    session: Session,
    triage: Triage,
    miss_ids: list[int] | None = None,
    open_only: bool = False,
) -> list[Skip]:
    """Skips in force (not taken back), in the order they happened; ``miss_ids`` narrows
    to some misses, ``open_only`` to misses still unlabelled."""
    where: list[Any] = [
        LabelEvent.triage_id == triage.id,
        col(LabelEvent.action).in_(SKIP_ACTIONS),
    ]
    if miss_ids is not None:
        if not miss_ids:
            return []
        where.append(col(LabelEvent.miss_id).in_(miss_ids))
    if open_only:
        where.append(Miss.state == MissState.OPEN.value)
    # Columns, not events: a large triage has thousands of skips, and an event object
    # (with its before/after JSON) costs ~50 us each; more columns than sqlmodel's typed
    # select() takes, so SQLAlchemy's.
    rows = session.execute(
        sa_select(
            col(LabelEvent.miss_id),
            col(LabelEvent.user_id),
            col(LabelEvent.action),
            col(LabelEvent.note),
            col(LabelEvent.at),
            col(Miss.qid),
            col(Miss.doc_id),
            col(Miss.state),
            col(User.email),
        )
        .join(Miss, col(Miss.id) == col(LabelEvent.miss_id))
        .join(User, col(User.id) == col(LabelEvent.user_id), isouter=True)
        .where(*where)
        .order_by(col(LabelEvent.id))
    ).all()
    current: dict[tuple[int, int | None], Skip] = {}
    take_back = LabelAction.TAKE_BACK.value
    for miss_id, user_id, action, note, at, qid, doc_id, state, email in rows:
        key = (miss_id, user_id)
        current.pop(key, None)  # a take-back ends it; a later skip replaces the reason
        if action != take_back:
            current[key] = Skip(miss_id, qid, doc_id, state, email, note, at)
    return list(current.values())
