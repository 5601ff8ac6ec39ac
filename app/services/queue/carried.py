"""Misses carrying an earlier triage's label (``lifecycle.Stage.CARRIED``): a lead sends them
back to the queue, all, those of one cause or one miss. Each move is a ``requeue`` event
whose ``before`` keeps the carried label and its origin, and the triage's closure follows.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlmodel import Session

from app.models import LabelAction, MissState, User
from app.services.errors import NotFound
from app.services.queue import rows, store
from app.services.queue.lifecycle import Stage, check
from app.services.queue.rows import MISS


def requeue_carried(
    *,
    session: Session,
    triage_id: int,
    user: User,
    now: datetime,
    category: str | None = None,
    miss_id: int | None = None,
) -> int:
    """Put the triage's carried misses (of ``category``, or the one ``miss_id``, when given)
    back on the queue, unlabelled; answers how many moved. The caller checks the lead
    role."""
    assert user.id is not None
    check(LabelAction.REQUEUE, Stage.CARRIED, Stage.OPEN)
    which = [MISS.c.triage_id == triage_id, MISS.c.state == MissState.CARRIED.value]
    if category is not None:
        which.append(MISS.c.category == category)
    if miss_id is not None:
        which.append(MISS.c.id == miss_id)
    with rows.transaction(session) as conn:
        if rows.lock_person(conn, triage_id=triage_id, user_id=user.id) is None:
            raise NotFound(f"no triage {triage_id}", code="triage_not_found")
        # the carried labels as they are, for the audit trail; the update below moves only
        # those still carried (another lead may have sent some back meanwhile; nothing
        # becomes carried after the triage is made, so it moves no miss not read here)
        before = {
            row.id: row
            for row in conn.execute(
                select(
                    MISS.c.id, MISS.c.category, MISS.c.note, MISS.c.version, MISS.c.carried_from
                ).where(*which)
            ).all()
        }
        if not before:
            return 0
        moved = (
            update(MISS)
            .where(*which)
            .values(
                state=MissState.OPEN.value,
                category=None,
                note="",
                carried_from=None,
                version=MISS.c.version + 1,
            )
            .returning(*rows.COLUMNS)
        )
        moved_rows = conn.execute(moved).all()
        for row in moved_rows:
            miss = rows.row_of(row)
            was = before[miss.id]
            store.append_event(
                conn,
                miss,
                user.id,
                LabelAction.REQUEUE,
                now=now,
                before={
                    "state": MissState.CARRIED.value,
                    "category": was.category,
                    "note": was.note,
                    "version": was.version,
                    "carried_from": was.carried_from,
                },
                after=rows.snapshot(miss),
                note=f"carried from triage {was.carried_from}" if was.carried_from else "",
            )
        if moved_rows:
            store.recheck_closure(conn, triage_id=triage_id, now=now)
    return len(moved_rows)
