"""The life cycle's rules in Python and in SQL are one rule: for every stored combination of
state, category and labels in, ``stage_of``, the SQL ``stage_sql`` and every ``in_stages``
predicate agree, on both databases; and every step of ``TRANSITIONS`` is an audit action."""

from __future__ import annotations

import itertools
from pathlib import Path

from sqlalchemy import select, update
from sqlalchemy.engine import Engine

from app.models import OTHER, LabelAction, MissState
from app.services.queue.lifecycle import (
    KEEPS_OPEN,
    LABELLED,
    REVIEW_QUEUE,
    TRANSITIONS,
    UNLABELLED,
    Stage,
    allowed,
    in_stages,
    stage_of,
    stage_sql,
)
from app.services.queue.rows import MISS
from tests.support.triage import make_triage

COMBINATIONS = list(
    itertools.product([s.value for s in MissState], [None, "not-indexed", OTHER], [0, 1, 2])
)
SETS = [KEEPS_OPEN, UNLABELLED, LABELLED, REVIEW_QUEUE, *(frozenset({s}) for s in Stage)]


def test_python_and_sql_say_the_same_stage(engine: Engine, tmp_path: Path) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=len(COMBINATIONS), per_query=1)
    with engine.begin() as conn:
        ids = [
            row[0]
            for row in conn.execute(
                select(MISS.c.id).where(MISS.c.triage_id == triage.id).order_by(MISS.c.position)
            )
        ]
        for miss_id, (state, category, reviewed) in zip(ids, COMBINATIONS, strict=True):
            conn.execute(
                update(MISS)
                .where(MISS.c.id == miss_id)
                .values(state=state, category=category, reviewed=reviewed)
            )
    with engine.connect() as conn:
        stored = {
            row.id: (row.state, row.category, row.reviewed, row.stage)
            for row in conn.execute(
                select(
                    MISS.c.id,
                    MISS.c.state,
                    MISS.c.category,
                    MISS.c.reviewed,
                    stage_sql(MISS).label("stage"),
                ).where(MISS.c.triage_id == triage.id)
            )
        }
        members = {
            stages: set(
                conn.execute(
                    select(MISS.c.id).where(MISS.c.triage_id == triage.id, in_stages(MISS, stages))
                ).scalars()
            )
            for stages in SETS
        }
    for miss_id, (state, category, reviewed, sql_stage) in stored.items():
        stage = stage_of(state, category, reviewed)
        assert sql_stage == stage.value, (state, category, reviewed)
        for stages, found in members.items():
            assert (miss_id in found) == (stage in stages), (state, category, reviewed, stages)


def test_every_step_is_an_audit_action_and_moves_somewhere() -> None:
    assert set(TRANSITIONS) <= set(LabelAction)
    for step, (starts, ends) in TRANSITIONS.items():
        assert starts
        assert ends
        assert all(allowed(step, a, b) for a in starts for b in ends)
    # nothing takes a miss from covered to a final label, nor a final label back to covered
    assert not any(allowed(step, Stage.COVERED, Stage.FINAL) for step in TRANSITIONS)
    assert not any(allowed(step, Stage.FINAL, Stage.COVERED) for step in TRANSITIONS)
