"""Misses covered by a duplicate (a copy of the document is in the candidates): off the
queue until a lead includes them, and back off it when the lead takes them back (those not
labelled, leased or under review yet). Each move is an ``include`` or ``exclude`` event, and
the triage's closure follows it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import exists, or_, update
from sqlmodel import Session

from app.models import LabelAction, MissState, User
from app.services.errors import NotFound
from app.services.queue import rows, store
from app.services.queue.lifecycle import Stage, check
from app.services.queue.rows import MISS, REVIEW


def include_covered(
    *, session: Session, triage_id: int, user: User, include: bool, now: datetime
) -> int:
    """Put the covered misses on the queue (``include``), or take those not labelled,
    leased or reviewed yet back off it; answers how many moved."""
    assert user.id is not None
    if include:
        check(LabelAction.INCLUDE, Stage.COVERED, Stage.OPEN)
        moved = (
            update(MISS)
            .where(MISS.c.triage_id == triage_id, MISS.c.state == MissState.COVERED.value)
            .values(state=MissState.OPEN.value)
        )
        action, before, after = LabelAction.INCLUDE, MissState.COVERED, MissState.OPEN
    else:
        check(LabelAction.EXCLUDE, Stage.OPEN, Stage.COVERED)
        moved = (
            update(MISS)
            .where(
                MISS.c.triage_id == triage_id,
                MISS.c.state == MissState.OPEN.value,
                MISS.c.reviewed == 0,
                MISS.c.covered_by.is_not(None),
                or_(MISS.c.lease_holder_id.is_(None), MISS.c.lease_expires_at <= now),
                # double review under way (a reviewer's lease): it stays on the queue
                ~exists().where(REVIEW.c.miss_id == MISS.c.id),
            )
            .values(state=MissState.COVERED.value, lease_holder_id=None, lease_expires_at=None)
        )
        action, before, after = LabelAction.EXCLUDE, MissState.OPEN, MissState.COVERED
    with rows.transaction(session) as conn:
        if rows.lock_person(conn, triage_id=triage_id, user_id=user.id) is None:
            raise NotFound(f"no triage {triage_id}", code="triage_not_found")
        moved_rows = conn.execute(moved.returning(*rows.COLUMNS)).all()
        for row in moved_rows:
            miss = rows.row_of(row)
            store.append_event(
                conn,
                miss,
                user.id,
                action,
                now=now,
                before=rows.snapshot(miss) | {"state": before.value},
                after=rows.snapshot(miss) | {"state": after.value},
            )
        if moved_rows:
            store.recheck_closure(conn, triage_id=triage_id, now=now)
    return len(moved_rows)
