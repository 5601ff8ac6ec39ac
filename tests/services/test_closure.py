"""One place decides whether a triage closes: the closure report. The ``triage.closed`` mark
the webhook module keeps (``Triage.closed_at``) follows it label by label, through an
"other", a relabel and an undo, on both databases."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import exists, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.clock import FrozenClock
from app.models import OTHER, Role, Triage
from app.models.triage_public import MissPublic
from app.services import queue
from app.services.accounts import users
from app.services.queue import store
from app.services.queue.lifecycle import keeps_open
from app.services.queue.rows import MISS
from app.services.triage.closure import closure_report
from app.services.triage.triages import triage_context
from tests.support.queue import Desk
from tests.support.triage import make_people, make_triage

LEASE = timedelta(minutes=10)


def _state(engine: Engine, triage_id: int, clock: FrozenClock) -> tuple[bool, bool, str]:
    """What the closure report says, whether the triage is marked closed, and the sentence."""
    with Session(engine) as s:
        ctx = triage_context(session=s, triage_id=triage_id)
        report = closure_report(session=s, triage=ctx.triage, causes=ctx.causes)
        # the label's path asks the same rule (the life cycle's) as one EXISTS
        still_open = s.execute(
            select(exists().where(MISS.c.triage_id == triage_id, keeps_open(MISS)))
        ).scalar()
        assert (not still_open) == report.closes
        triage = s.get(Triage, triage_id)
        assert triage is not None
        # marked at the time of the label that closed it, from the injected clock
        assert triage.closed_at in (None, clock.now())
        return report.closes, triage.closed_at is not None, report.closure


def test_the_closed_mark_follows_the_closure_report(engine: Engine, tmp_path: Path) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=2)
    assert triage.id is not None
    clock = FrozenClock()
    with Session(engine, expire_on_commit=False) as s:
        lead = users.create_user(
            session=s, email="lea@example.com", password="long enough", role=Role.LEAD
        )
        causes = triage_context(session=s, triage_id=triage.id).causes

        desk = Desk(engine, clock=clock, bound=s)

        def label(category: str, note: str = "") -> MissPublic:
            return desk.claim_and_label(lead, triage.id, category, note=note)

        label(causes[0])
        assert _state(engine, triage.id, clock)[:2] == (False, False)
        other = label(OTHER, "the judgment is wrong")
        closes, closed, sentence = _state(engine, triage.id, clock)
        assert (closes, closed) == (False, False)
        assert sentence.endswith("does not close: 1 other")

        # a lead relabels the "other" to a named cause: the categories close
        queue.label(
            session=s,
            miss_id=other.id,
            user=lead,
            category=causes[1],
            note="",
            version=other.version,
            now=clock.now(),
        )
        closes, closed, sentence = _state(engine, triage.id, clock)
        assert (closes, closed) == (True, True)
        assert sentence.endswith("accounted for: the categories close")

        # undoing that relabel reopens the triage
        queue.undo(session=s, triage_id=triage.id, user=lead, now=clock.now(), lease=LEASE)
        assert _state(engine, triage.id, clock)[:2] == (False, False)

        # the combined call (label, then claim: nothing is left) closes it again, and a
        # relabel to "other" reopens it: the label's own statement answers the closure rule
        current = queue.audit_trail(session=s, miss_id=other.id)[-1].after.version
        done = queue.label_and_claim(
            session=s,
            miss_id=other.id,
            user=lead,
            category=causes[2],
            note="",
            version=current,
            now=clock.now(),
            lease=LEASE,
        )
        assert done.next is None
        assert _state(engine, triage.id, clock)[:2] == (True, True)
        queue.label(
            session=s,
            miss_id=other.id,
            user=lead,
            category=OTHER,
            note="not one of ours",
            version=done.labelled.version,
            now=clock.now(),
        )
        assert _state(engine, triage.id, clock)[:2] == (False, False)


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_the_last_two_labels_in_flight_together_still_close_the_triage(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL lets two labels of one triage run at once (SQLite writes one at a time):
    both write their miss, then both wait, uncommitted, so each finds the other's miss still
    open; once both have committed the triage is marked closed all the same (the closure is
    asked again after a commit near the closure)."""
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=3)
    assert triage.id is not None
    people = make_people(engine, ("ann", Role.REVIEWER), ("bob", Role.REVIEWER))
    desk = Desk(engine)
    # a first label (it freezes the causes: later labels do not touch the golden set)
    desk.claim_and_label(people["ann"], triage.id, "chunk-boundary")
    held = {name: desk.claim(user, triage.id) for name, user in people.items()}
    both_written = threading.Barrier(2, timeout=20)
    append = store.append_event

    def append_then_wait(*args: object, **kwargs: object) -> None:
        append(*args, **kwargs)  # type: ignore[arg-type]
        if kwargs.get("note") == "together":
            both_written.wait()

    monkeypatch.setattr(store, "append_event", append_then_wait)
    errors: list[BaseException] = []

    def label(name: str) -> None:
        try:
            miss = held[name]
            assert miss is not None
            desk.label(people[name], miss, "not-indexed", note="together")
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=label, args=(name,)) for name in people]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    closes, closed, _ = _state(engine, triage.id, desk.clock)
    assert (closes, closed) == (True, True)
