"""The queue's ways back: release a lease, skip a miss (with a reason), undo a label. Each
appends a ``LabelEvent``; ``app.services.queue`` answers them too."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlmodel import Session, col, select

from app.db import writing
from app.models import LABEL_ACTIONS, LabelAction, LabelEvent, MissState, Triage, User
from app.models.triage_public import MissPublic
from app.services.delivery import events as outbox
from app.services.errors import Forbidden, Invalid, NotFound
from app.services.queue import overlap
from app.services.queue.audit import (
    adjudicating,
    holds,
    is_lead,
    locked_miss,
    record_event,
    snapshot,
)
from app.services.queue.skips import record_skip

#: Undo looks this far back in the caller's labels for one still in force.
UNDO_LOOKBACK = 50


def release(*, session: Session, miss_id: int, user: User, now: datetime) -> MissPublic:
    """Give a miss back to the queue (its holder, or a lead)."""
    with writing(session):
        miss = locked_miss(session, miss_id)
        if miss.reviewers > 1 and miss.state == MissState.OPEN.value:
            dropped = overlap.give_up(session, miss, None if is_lead(user) else user)
            if not dropped:
                raise Forbidden("this miss is not leased to you", code="lease_not_held")
            for lease in dropped:
                before = snapshot(miss) | lease
                record_event(session, miss, user, LabelAction.RELEASE, now=now, before=before)
            return MissPublic.of(miss)
        mine = holds(miss, user) or adjudicating(miss, user)
        if not (mine or (is_lead(user) and miss.lease_holder_id is not None)):
            raise Forbidden("this miss is not leased to you", code="lease_not_held")
        before = snapshot(miss) | {"lease_holder": miss.lease_holder_id}
        miss.lease_holder_id = None
        miss.lease_expires_at = None
        session.add(miss)
        record_event(session, miss, user, LabelAction.RELEASE, now=now, before=before)
    return MissPublic.of(miss)


def skip(*, session: Session, miss_id: int, user: User, reason: str, now: datetime) -> MissPublic:
    """Pass a miss on to other reviewers, saying why."""
    reason = reason.strip()
    if not reason:
        raise Invalid("say why you skip this miss", code="reason_required")
    with writing(session):
        miss = locked_miss(session, miss_id)
        if miss.reviewers > 1 and miss.state == MissState.OPEN.value:
            if not overlap.give_up(session, miss, user):
                raise Forbidden("this miss is not leased to you", code="lease_not_held")
            record_event(session, miss, user, LabelAction.SKIP, now=now, note=reason)
            record_skip(session, miss, user, reason=reason, now=now)
            return MissPublic.of(miss)
        if not holds(miss, user):
            raise Forbidden("this miss is not leased to you", code="lease_not_held")
        miss.lease_holder_id = None
        miss.lease_expires_at = None
        session.add(miss)
        record_event(session, miss, user, LabelAction.SKIP, now=now, note=reason)
        record_skip(session, miss, user, reason=reason, now=now)
    return MissPublic.of(miss)


def undo(
    *, session: Session, triage: Triage, user: User, now: datetime, lease: timedelta
) -> MissPublic:
    """Undo the caller's most recent label that is still in force; the miss goes back to
    its previous state and, if that was unlabelled, to the caller's lease. With double review,
    a reviewer's own label on a miss still waiting for another reviewer's is taken back the
    same way (a miss whose labels are all in is decided by them, or by an adjudicator)."""
    with writing(session):
        undone = _undo_latest(session, triage=triage, user=user, now=now, lease=lease)
        if undone is None:
            raise NotFound("you have no label to undo in this triage", code="nothing_to_undo")
    return undone


def _undo_latest(
    session: Session, *, triage: Triage, user: User, now: datetime, lease: timedelta
) -> MissPublic | None:
    """Inside the caller's writing block: undo the latest label still in force."""
    events = session.exec(
        select(LabelEvent)
        .where(
            LabelEvent.triage_id == triage.id,
            LabelEvent.user_id == user.id,
            col(LabelEvent.action).in_([*LABEL_ACTIONS, LabelAction.REVIEW]),
        )
        .order_by(col(LabelEvent.id).desc())
        .limit(UNDO_LOOKBACK)
    ).all()
    for event in events:
        miss = locked_miss(session, event.miss_id)
        if event.action == LabelAction.REVIEW.value:
            taken_back = overlap.take_back(session, miss, user, now=now, lease=lease)
            if taken_back is not None:
                return taken_back
            continue  # all its labels are in (or undone already): not the caller's to undo
        if miss.version != event.after.get("version"):
            continue  # changed since (undone already, or relabelled by a lead)
        before = snapshot(miss)
        previous = event.before
        miss.state = previous["state"]
        miss.category = previous["category"]
        miss.note = previous["note"]
        miss.version += 1
        if miss.state == MissState.OPEN:
            miss.labelled_by_id = None
            miss.labelled_at = None
            miss.lease_holder_id = user.id
            miss.lease_expires_at = now + lease
        session.add(miss)
        record_event(session, miss, user, LabelAction.UNDO, now=now, before=before)
        outbox.after_label(session, miss)
        return MissPublic.of(miss)
    return None
