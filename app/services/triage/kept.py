"""Answers kept per triage until its labels change: the agreement statistics, the
dashboard's label-derived panels and its lists (the residue, the skips in force) cost a scan of
the triage's labels, reviews or skips (tens of ms to a second at 100,000 misses) and change only
when a label does.

Every write of the queue (a label, a relabel, an undo, an agreement, a dispute, an
adjudication, a skip, a take-back, a release, covered misses put on the queue or taken off)
appends a label event, and events are never removed: the newest event's id and how many events
stand just below it (from an index) say whether anything changed, with the tally's rows beside
it (a count of every event cost 17 ms at 100,000 misses; the newest id alone would miss a write
that commits after a later one). Each process keeps its
own answers; several processes stay exact because each checks the key against the database
on every request.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import bindparam, func, select
from sqlmodel import Session

from app.models import LabelEvent, Triage
from app.services.queue.tally import Tally, triage_tally

T = TypeVar("T")
#: (the newest label event, the events just before it, triage created, the tally's rows)
LabelKey = tuple[int | None, int, datetime, tuple[Any, ...]]
#: Events counted below the newest: a write in flight elsewhere when the key is read has an
#: id this close to the newest when it commits, so its commit changes the count.
RECENT_EVENTS = 4096
_EVENT = LabelEvent.__table__  # type: ignore[attr-defined]
_NEWEST = (
    select(func.max(_EVENT.c.id).label("newest"))
    .where(_EVENT.c.triage_id == bindparam("t"))
    .subquery()
)
#: The newest event of the triage and how many events it has within ``RECENT_EVENTS`` of it,
#: both from an index (ix_label_event_triage: triage, id).
_EVENTS = select(
    _NEWEST.c.newest,
    select(func.count())
    .where(
        _EVENT.c.triage_id == bindparam("t"),
        _EVENT.c.id > _NEWEST.c.newest - RECENT_EVENTS,
    )
    .scalar_subquery(),
).select_from(_NEWEST)
#: (database, triage id): a process may serve more than one database (the tests do), and
#: triage ids repeat across databases.
Slot = tuple[str, int]
#: Triages each kind of answer is kept for, per process.
KEPT_TRIAGES = 32

_registry: list[Kept[object]] = []


def label_key(session: Session, triage: Triage, tally: Tally | None = None) -> LabelKey:
    """What changes whenever a label of the triage does (see the module docstring): its
    events and the newest one's time, the triage's creation and the tally's rows (``tally`` when the
    caller has it, else counted here from its index)."""
    assert triage.id is not None
    newest, recent = session.connection().execute(_EVENTS, {"t": triage.id}).one()
    if tally is None:
        tally = triage_tally(session=session, triage_id=triage.id, causes=[])
    # the triage's creation too: ids repeat when a database is emptied and filled again
    return newest, int(recent or 0), triage.created_at, tally.fingerprint


def slot_of(session: Session, triage: Triage) -> Slot:
    assert triage.id is not None
    return (session.get_bind().engine.url.render_as_string(hide_password=True), triage.id)


class Kept(Generic[T]):
    """The last answer per triage with the key it was computed under (least recently used
    triages dropped beyond ``KEPT_TRIAGES``)."""

    def __init__(self) -> None:
        self._answers: OrderedDict[Slot, tuple[LabelKey, T]] = OrderedDict()
        self._lock = threading.Lock()
        _registry.append(self)  # type: ignore[arg-type]

    def get(self, slot: Slot, key: LabelKey) -> T | None:
        """The answer kept for ``slot`` if it was computed under ``key``."""
        with self._lock:
            hit = self._answers.get(slot)
            if hit is None or hit[0] != key:
                return None
            self._answers.move_to_end(slot)
            return hit[1]

    def latest(self, slot: Slot) -> tuple[LabelKey, T] | None:
        """The answer kept for ``slot`` under whatever key, and that key."""
        with self._lock:
            return self._answers.get(slot)

    def put(self, slot: Slot, key: LabelKey, answer: T) -> None:
        with self._lock:
            self._answers[slot] = (key, answer)
            self._answers.move_to_end(slot)
            while len(self._answers) > KEPT_TRIAGES:
                self._answers.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._answers.clear()


def forget() -> None:
    """Drop every kept answer (a database emptied and filled again under the same ids)."""
    for kept in _registry:
        kept.clear()
