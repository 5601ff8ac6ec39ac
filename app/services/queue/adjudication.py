"""The adjudication queue: overlap misses whose reviewers disagreed (or one could not tell)
wait here for a lead, or a reviewer with the adjudicator flag, to give the final label.

Leased like the review queue (the miss's own lease columns: nobody reviews a disputed miss),
with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL and ``BEGIN IMMEDIATE`` on SQLite, so two
adjudicators never hold one miss; versioned (a stale version answers 409 and both versions
are kept in the audit trail) and audited (``adjudicate``, ``conflict``, ``refused``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, or_
from sqlmodel import Session, col, select

from app.db import writing
from app.models import LabelAction, Miss, MissState, Review, Triage, User
from app.models.triage_public import AdjudicationCase, MissPublic, ReviewPublic
from app.services.errors import Conflict, Forbidden, ServiceError
from app.services.queue import overlap
from app.services.queue.audit import (
    attempted,
    checked_note,
    is_lead,
    is_postgres,
    locked_miss,
    record_event,
    stale,
)


def _check_adjudicator(user: User) -> None:
    if not user.adjudicates:
        raise Forbidden(
            "adjudication needs the lead role or the adjudicator flag",
            code="adjudicator_required",
        )


def case_of(*, session: Session, miss: Miss) -> AdjudicationCase:
    """A disputed miss with every reviewer's label and note, oldest first."""
    rows = session.exec(
        select(Review, User.email)
        .join(User, col(User.id) == col(Review.reviewer_id), isouter=True)
        .where(Review.miss_id == miss.id, col(Review.category).is_not(None))
        .order_by(col(Review.labelled_at), col(Review.id))
    ).all()
    labels = [ReviewPublic.of(review, email) for review, email in rows]
    return AdjudicationCase(**dict(MissPublic.of(miss)), labels=labels)


def waiting(*, session: Session, triage: Triage) -> int:
    """How many disputed misses wait for a final label."""
    return int(
        session.exec(
            select(func.count())
            .select_from(Miss)
            .where(Miss.triage_id == triage.id, Miss.state == MissState.DISPUTED.value)
        ).one()
    )


def claim(
    *, session: Session, triage: Triage, user: User, now: datetime, lease: timedelta
) -> AdjudicationCase | None:
    """The adjudicator's current disputed miss (its lease renewed), else the next one in queue
    order whose lease is free or expired, leased to them. None when none is left.
    403 ``adjudicator_required``."""
    _check_adjudicator(user)
    with writing(session):
        disputed = (
            select(Miss)
            .where(Miss.triage_id == triage.id, Miss.state == MissState.DISPUTED.value)
            .order_by(col(Miss.position))
            .limit(1)
            .execution_options(populate_existing=True)
        )
        mine = session.exec(
            disputed.where(Miss.lease_holder_id == user.id, col(Miss.lease_expires_at) > now)
        ).first()
        if mine is None:
            query = disputed.where(
                or_(col(Miss.lease_holder_id).is_(None), col(Miss.lease_expires_at) <= now)
            )
            if is_postgres(session):
                query = query.with_for_update(skip_locked=True)
            mine = session.exec(query).first()
        if mine is None:
            return None
        mine.lease_holder_id = user.id
        mine.lease_expires_at = now + lease
        session.add(mine)
        return case_of(session=session, miss=mine)


def adjudicate(
    *,
    session: Session,
    miss_id: int,
    user: User,
    category: str,
    note: str,
    version: int,
    causes: list[str],
    now: datetime,
) -> MissPublic:
    """The final label of a disputed miss, at its current version: needs the caller's
    adjudication lease (a lead's needs none). 409 ``stale_version`` or ``not_disputed``,
    403 ``lease_not_held``; every refused attempt is kept in the audit trail."""
    _check_adjudicator(user)
    note = checked_note(category, note, causes)
    with writing(session):
        miss = locked_miss(session, miss_id)
        refusal = _refusal(miss, user, version)
        if refusal is not None:
            attempt = attempted(category, note, version)
            record_event(session, miss, user, refusal[0], now=now, after=attempt)
        else:
            overlap.decide(session, miss, user, category=category, note=note, now=now)
    if refusal is not None:
        raise refusal[1]
    return MissPublic.of(miss)


def _refusal(miss: Miss, user: User, version: int) -> tuple[LabelAction, ServiceError] | None:
    conflict = stale(miss, version)
    if conflict is not None:
        return LabelAction.CONFLICT, conflict
    if miss.state != MissState.DISPUTED.value:
        return LabelAction.REFUSED, Conflict(
            "this miss is not waiting for adjudication", code="not_disputed"
        )
    if miss.lease_holder_id == user.id or is_lead(user):
        return None
    return LabelAction.REFUSED, Forbidden("this miss is not leased to you", code="lease_not_held")
