"""Skips in force are kept as rows (``MissSkip``) by skip and take-back; they must always equal
what the audit trail says (the last skip or take-back of each (miss, reviewer) is a skip), and
the migration that introduced the rows derives them from the trail the same way."""

from __future__ import annotations

import contextlib
import random
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.clock import FrozenClock
from app.migrate import downgrade, upgrade
from app.models import LabelAction, LabelEvent, MissSkip, MissState, Role, Triage, User
from app.services import queue
from app.services.accounts import users
from app.services.errors import Forbidden, NotFound
from app.services.queue import skips
from app.settings import Settings
from tests.support.triage import make_triage

LEASE = timedelta(minutes=10)
CAUSES = ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]
#: The revision before the rows existed.
BEFORE_ROWS = "7a41c2e9b8d3"


def _reviewers(engine: Engine, n: int) -> list[User]:
    with Session(engine, expire_on_commit=False) as session:
        return [
            users.create_user(
                session=session,
                email=f"r{i}@example.com",
                password="long enough",
                role=Role.REVIEWER,
            )
            for i in range(n)
        ]


def _from_the_trail(session: Session, triage_id: int) -> dict[tuple[int, int | None], str]:
    """The oracle: fold the skip and take-back events, oldest first."""
    in_force: dict[tuple[int, int | None], str] = {}
    events = session.exec(
        select(LabelEvent)
        .where(
            LabelEvent.triage_id == triage_id,
            col(LabelEvent.action).in_([LabelAction.SKIP, LabelAction.TAKE_BACK]),
        )
        .order_by(col(LabelEvent.id))
    ).all()
    for event in events:
        key = (event.miss_id, event.user_id)
        in_force.pop(key, None)
        if event.action == LabelAction.SKIP.value:
            in_force[key] = event.note
    return in_force


def _kept(session: Session, triage_id: int) -> dict[tuple[int, int | None], str]:
    rows = session.exec(select(MissSkip).where(MissSkip.triage_id == triage_id)).all()
    return {(row.miss_id, row.user_id): row.reason for row in rows}


def _random_work(engine: Engine, triage_id: int, people: list[User], seed: int) -> None:
    """Claims, skips (some twice on one miss), take-backs, labels and undos in a seeded
    order, checking the kept rows against the trail after every step."""
    rng = random.Random(seed)
    clock = FrozenClock()
    with Session(engine, expire_on_commit=False) as s:
        triage = s.get(Triage, triage_id)
        assert triage is not None
        for step in range(60):
            user = rng.choice(people)
            action = rng.choice(["skip", "skip", "label", "take_back", "undo", "reskip"])
            clock.advance(seconds=7)
            now = clock.now()
            if action == "take_back":
                skips.take_back(session=s, triage=triage, user=user, now=now)
            elif action == "undo":
                with contextlib.suppress(NotFound):
                    queue.undo(session=s, triage_id=triage.id, user=user, now=now, lease=LEASE)
            elif action == "reskip":
                # skipping what one no longer holds is refused and keeps nothing
                held = queue.claim(session=s, triage_id=triage.id, user=user, now=now, lease=LEASE)
                if held is not None:
                    reason = f"first reason {step}"
                    queue.skip(session=s, miss_id=held.id, user=user, reason=reason, now=now)
                    with pytest.raises(Forbidden):
                        queue.skip(
                            session=s, miss_id=held.id, user=user, reason=f"again {step}", now=now
                        )
            else:
                held = queue.claim(session=s, triage_id=triage.id, user=user, now=now, lease=LEASE)
                if held is None:
                    continue
                if action == "skip":
                    queue.skip(session=s, miss_id=held.id, user=user, reason=f"why {step}", now=now)
                else:
                    queue.label(
                        session=s,
                        miss_id=held.id,
                        user=user,
                        category=rng.choice(CAUSES),
                        note="",
                        version=held.version,
                        now=now,
                    )
            assert _kept(s, triage_id) == _from_the_trail(s, triage_id), (seed, step, action)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kept_skips_equal_the_trail(engine: Engine, tmp_path: Path, seed: int) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=3, per_query=3)
    people = _reviewers(engine, 3)
    assert triage.id is not None
    _random_work(engine, triage.id, people, seed)
    with Session(engine) as s:
        kept = _kept(s, triage.id)
        shown = skips.skips(session=s, triage=triage, miss_ids=[m for m, _ in kept])
        assert {(skip.miss_id, skip.reason) for skip in shown} == {
            (miss_id, reason) for (miss_id, _), reason in kept.items()
        }
        first, total = skips.open_skips(session=s, triage=triage, limit=2)
        still_open = [skip for skip in shown if skip.state == MissState.OPEN.value]
        assert total == len(still_open)
        assert [(x.miss_id, x.reason) for x in first] == [
            (x.miss_id, x.reason) for x in still_open[:2]
        ]


def test_a_taken_back_miss_is_offered_again(engine: Engine, tmp_path: Path) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1)
    (ann,) = _reviewers(engine, 1)
    clock = FrozenClock()
    with Session(engine, expire_on_commit=False) as s:
        held = queue.claim(session=s, triage_id=triage.id, user=ann, now=clock.now(), lease=LEASE)
        assert held is not None
        queue.skip(session=s, miss_id=held.id, user=ann, reason="unsure", now=clock.now())
        assert (
            queue.claim(session=s, triage_id=triage.id, user=ann, now=clock.now(), lease=LEASE)
            is None
        )
        assert skips.take_back(session=s, triage=triage, user=ann, now=clock.now()).taken_back == 1
        again = queue.claim(session=s, triage_id=triage.id, user=ann, now=clock.now(), lease=LEASE)
        assert again is not None
        assert again.id == held.id
        assert skips.open_skips(session=s, triage=triage, limit=10) == ([], 0)


def test_the_migration_derives_the_rows_from_the_trail(
    settings: Settings, engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=3, per_query=3)
    people = _reviewers(engine, 3)
    assert triage.id is not None
    _random_work(engine, triage.id, people, seed=5)
    with Session(engine) as s:
        kept = _kept(s, triage.id)
    assert kept  # the seeded work leaves skips in force
    engine.dispose()
    downgrade(settings, BEFORE_ROWS)
    upgrade(settings)
    with Session(engine) as s:
        assert _kept(s, triage.id) == kept
