"""Answers kept per triage until its labels change: the agreement statistics, the
dashboard's label-derived panels and its lists (the residue, the skips in force) cost a scan of
the triage's labels, reviews or skips (tens of ms to a second at 100,000 misses) and change only
when a label does.

Every label, relabel, undo, agreement, dispute, adjudication, skip and take-back writes a label
event, and putting covered misses on the queue or taking them off changes how many misses are
off the queue: the newest event's time and those counts (read from indexes) say whether
anything changed. Each process keeps its own answers; several processes stay exact because each
checks the key against the database on every request.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from typing import Generic, TypeVar

from sqlalchemy import func
from sqlmodel import Session, col, select

from app.models import LabelEvent, Miss, MissState, Triage

T = TypeVar("T")
#: (newest label event, triage created, misses off the queue, misses with a final label)
LabelKey = tuple[datetime | None, datetime, int, int]
#: (database, triage id): a process may serve more than one database (the tests do), and
#: triage ids repeat across databases.
Slot = tuple[str, int]
#: Triages each kind of answer is kept for, per process.
KEPT_TRIAGES = 32

_registry: list[Kept[object]] = []


def label_key(
    session: Session,
    triage: Triage,
    tally: Sequence[tuple[str, str | None, str | None, int]] | None = None,
) -> LabelKey:
    """What changes whenever a label of the triage does (see the module docstring). The
    counts come from ``tally`` (``triages.state_tally``: misses by state, cause and
    resolution) when the caller has it, else from an index alone (ix_miss_summary)."""
    newest = session.exec(
        select(func.max(LabelEvent.at)).where(LabelEvent.triage_id == triage.id)
    ).one()
    if tally is not None:
        off_queue = [
            (category, n) for state, category, _, n in tally if state != MissState.OPEN.value
        ]
        resolved = (sum(n for _, n in off_queue), sum(n for c, n in off_queue if c is not None))
    else:
        resolved = session.exec(
            select(func.count(), func.count(col(Miss.category))).where(
                Miss.triage_id == triage.id,
                Miss.state != MissState.OPEN.value,
            )
        ).one()
    # the triage's creation too: ids repeat when a database is emptied and filled again
    return newest, triage.created_at, int(resolved[0]), int(resolved[1])


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
