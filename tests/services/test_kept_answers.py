"""Answers kept per triage until its labels change (app/services/kept.py): the dashboard's
label-derived panels and the agreement equal a fresh computation after every change, and a
slow agreement is computed in the background while the dashboard shows the kept one, saying
so. The residue read from two indexes equals the plain filter over every miss; the dashboard's
kept residue and skips equal a fresh read after every label and every skip."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.clock import FrozenClock
from app.models import OTHER, GoldenSet, Miss, MissState, Role, Triage, User
from app.models.triage_public import Overlap
from app.services import queue
from app.services.accounts import users
from app.services.imports import golden_sets
from app.services.queue import skips
from app.services.triage import agreement, closure, dashboard, dashboard_lists
from app.services.triage.dashboard_lists import RESIDUE_SHOWN, SKIPS_SHOWN, LabelLists
from app.services.triage.kept import label_key
from tests.support.queue import Desk
from tests.support.triage import make_triage

LEASE = timedelta(minutes=10)
CAUSES = ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]


def _people(engine: Engine, n: int) -> list[User]:
    with Session(engine, expire_on_commit=False) as session:
        return [
            users.create_user(
                session=session,
                email=f"k{i}@example.com",
                password="long enough",
                role=Role.REVIEWER,
            )
            for i in range(n)
        ]


def _label_some(engine: Engine, triage: Triage, people: list[User], n: int, seed: int) -> None:
    """``n`` claim-and-label steps by people in turn, causes (and "other") drawn by ``seed``."""
    rng = random.Random(seed)
    desk = Desk(engine)
    assert triage.id is not None
    for step in range(n):
        user = people[step % len(people)]
        desk.clock.advance(seconds=5)
        held = desk.claim(user, triage.id)
        if held is None:
            continue
        category = rng.choice([*CAUSES, OTHER])
        desk.label(user, held, category, note="why" if category == OTHER else "")


def _fresh_panels(session: Session, triage: Triage) -> dashboard.LabelPanels:
    return dashboard.LabelPanels(
        throughput=dashboard.throughput(session=session, triage=triage),
        hints=dashboard.hint_accuracy(session=session, triage=triage),
        covered_on_queue=dashboard.covered_on_queue(session=session, triage=triage),
    )


def test_panels_follow_every_label(engine: Engine, tmp_path: Path) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=4, per_query=3)
    people = _people(engine, 2)
    for round_ in range(4):
        with Session(engine) as s:
            kept = dashboard.label_panels(session=s, triage=triage)
            assert kept == _fresh_panels(s, triage)
            # nothing changed: the same answer, not computed again
            assert dashboard.label_panels(session=s, triage=triage) is kept
            # the key from the closure's tally is the key read on its own
            tally = closure.tally_of(session=s, triage=triage, causes=CAUSES)
            assert label_key(s, triage, tally) == label_key(s, triage)
        _label_some(engine, triage, people, 3, seed=round_)
    with Session(engine) as s:
        panels = dashboard.label_panels(session=s, triage=triage)
        assert sum(t.labels for t in panels.throughput) == 12


def test_residue_equals_the_plain_filter(engine: Engine, tmp_path: Path) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=6, per_query=3)
    _label_some(engine, triage, _people(engine, 2), 11, seed=3)
    with Session(engine) as s:
        misses = s.exec(
            select(Miss).where(Miss.triage_id == triage.id).order_by(col(Miss.position))
        ).all()
        expected = [m.id for m in misses if m.state == MissState.OPEN.value or m.category == OTHER]
        assert any(m.category == OTHER for m in misses)  # the seed gives both kinds
        total = closure.tally_of(session=s, triage=triage, causes=CAUSES).residue
        assert total == len(expected)
        for limit in (1, 3, 100):
            rows = dashboard.residue_rows(session=s, triage=triage, limit=limit)
            assert [row.miss.id for row in rows] == expected[:limit]


def test_a_slow_agreement_is_computed_in_the_background(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every computation counts as slow here, so the second one goes to the background
    monkeypatch.setattr(agreement, "BACKGROUND_AFTER", -1.0)
    _, _, triage = make_triage(
        engine, tmp_path, queries=4, per_query=3, overlap=Overlap(reviewers=2, fraction=1.0)
    )
    people = _people(engine, 3)
    _label_some(engine, triage, people, 10, seed=1)
    with Session(engine) as s:
        first, current = agreement.dashboard_agreement(session=s, triage=triage, causes=CAUSES)
        assert current
        assert first == agreement.triage_agreement(session=s, triage=triage, causes=CAUSES)
    _label_some(engine, triage, people, 10, seed=2)
    with Session(engine) as s:
        shown, current = agreement.dashboard_agreement(session=s, triage=triage, causes=CAUSES)
        assert not current
        assert shown == first  # the kept figures, while the new ones are computed
    assert agreement.wait_for_background()
    with Session(engine) as s:
        now_shown, current = agreement.dashboard_agreement(session=s, triage=triage, causes=CAUSES)
        assert current
        assert now_shown.units > first.units
        # the API's answer is always current, and it is what the background computed
        assert now_shown == agreement.triage_agreement(session=s, triage=triage, causes=CAUSES)


def _fresh_lists(session: Session, triage: Triage, golden: GoldenSet) -> LabelLists:
    rows = dashboard.residue_rows(session=session, triage=triage, limit=RESIDUE_SHOWN)
    skipped, total = skips.open_skips(session=session, triage=triage, limit=SKIPS_SHOWN)
    texts = golden_sets.query_texts(
        session=session, golden=golden, qids={row.miss.qid for row in rows}
    )
    return LabelLists(residue=rows, texts=texts, skipped=skipped, skipped_total=total)


def test_lists_follow_every_label_and_skip(engine: Engine, tmp_path: Path) -> None:
    """The residue and the skips kept for the dashboard equal a fresh read after each label,
    and after each skip alone (a skip changes no count, only the newest event)."""
    golden, _, triage = make_triage(engine, tmp_path, queries=4, per_query=3, corpus=True)
    people = _people(engine, 2)
    clock = FrozenClock()
    previous: list[LabelLists] = []
    for round_ in range(6):
        with Session(engine, expire_on_commit=False) as s:
            kept = dashboard_lists.label_lists(session=s, triage=triage, golden=golden)
            assert kept == _fresh_lists(s, triage, golden)
            assert dashboard_lists.label_lists(session=s, triage=triage, golden=golden) is kept
            # the count beside the residue, from the tally, is the residue's length
            tally = closure.tally_of(session=s, triage=triage, causes=CAUSES)
            assert tally.residue == len(
                dashboard.residue_rows(session=s, triage=triage, limit=10**6)
            )
            # each round's skip or label made it read the lists again
            assert all(kept is not earlier for earlier in previous)
            previous.append(kept)
            user = people[round_ % 2]
            clock.advance(seconds=5)
            held = queue.claim(
                session=s, triage_id=triage.id, user=user, now=clock.now(), lease=LEASE
            )
            assert held is not None
            clock.advance(seconds=5)
            if round_ % 2:
                queue.label(
                    session=s,
                    miss_id=held.id,
                    user=user,
                    category=OTHER,
                    note=f"round {round_}",
                    version=held.version,
                    now=clock.now(),
                )
            else:
                queue.skip(
                    session=s, miss_id=held.id, user=user, reason=f"round {round_}", now=clock.now()
                )
    assert previous[1].skipped_total == 1  # the first round's skip, in force
    assert [s.reason for s in previous[1].skipped] == ["round 0"]


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_write_committed_after_a_later_one_changes_the_key(
    engine: Engine, tmp_path: Path
) -> None:
    """PostgreSQL hands out event ids in one order and may commit them in another: the key
    read between the two commits must still change when the earlier id commits."""
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=2)
    assert triage.id is not None
    row = {"t": triage.id, "m": 0, "now": datetime.now(UTC)}
    insert = text(
        "INSERT INTO label_event (miss_id, triage_id, user_id, at, action, before, after, note)"
        " SELECT id, :t, NULL, :now, 'skip', '{}', '{}', '' FROM miss WHERE triage_id = :t LIMIT 1"
    )
    early, late = engine.connect(), engine.connect()
    try:
        early.begin()
        early.execute(insert, row)  # the lower id, still in flight
        with late.begin():
            late.execute(insert, row)  # a higher id, committed first
        with Session(engine) as s:
            before = label_key(s, triage)
        early.commit()
        with Session(engine) as s:
            after = label_key(s, triage)
    finally:
        early.close()
        late.close()
    assert after != before
    assert after[0] == before[0]  # the newest id is the same: the count just below it moved
