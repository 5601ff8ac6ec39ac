"""The backlog's pages (app/services/dashboard.py ``backlog``): chosen and counted on the misses
alone, then read with their reviewer; every filter and sort, page after page, gives the rows of
one plain query over the misses with their reviewers, in its order, and its count."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.clock import FrozenClock
from app.models import OTHER, UNLABELLED, Miss, MissState, Role, User
from app.services import queue
from app.services.queue import skips
from app.services.triage import dashboard
from app.services.triage.triages import get_triage
from tests.support.triage import make_people, make_triage

CAUSES = ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]
LEASE = timedelta(minutes=10)
FILTERS: list[dict[str, str]] = [
    {},
    {"cause": OTHER},
    {"cause": UNLABELLED},
    {"cause": "not-indexed"},
    {"state": MissState.LABELLED.value},
    {"state": dashboard.SKIPPED},
    {"reviewer": "ann@example.com"},
    {"reviewer": "ann@example.com", "cause": OTHER},
    {"qid": "q3"},
    {"qid": "q3", "state": MissState.OPEN.value},
]


def _work(engine: Engine, triage_id: int) -> None:
    """Two reviewers label (causes and "other", by a seed) and skip some misses."""
    people = make_people(engine, ("ann", Role.REVIEWER), ("bob", Role.REVIEWER))
    rng = random.Random(7)
    clock = FrozenClock()
    with Session(engine, expire_on_commit=False) as s:
        triage = get_triage(session=s, triage_id=triage_id)
        for step in range(14):
            user = people["ann" if step % 3 else "bob"]
            clock.advance(seconds=3)
            held = queue.claim(
                session=s, triage_id=triage.id, user=user, now=clock.now(), lease=LEASE
            )
            assert held is not None
            if step % 4 == 3:
                queue.skip(session=s, miss_id=held.id, user=user, reason="later", now=clock.now())
                continue
            category = rng.choice([*CAUSES, OTHER])
            queue.label(
                session=s,
                miss_id=held.id,
                user=user,
                category=category,
                note="why" if category == OTHER else "",
                version=held.version,
                now=clock.now(),
            )


def _plain(session: Session, triage_id: int, filters: dict[str, str], sort: str) -> list[int]:
    """The misses of one query over the misses with their reviewers, in the backlog's order."""
    query: Any = (
        select(Miss.id)
        .join(User, col(User.id) == col(Miss.labelled_by_id), isouter=True)
        .where(Miss.triage_id == triage_id)
    )
    cause = filters.get("cause", "")
    if cause == UNLABELLED:
        query = query.where(col(Miss.category).is_(None), Miss.state != MissState.COVERED.value)
    elif cause:
        query = query.where(Miss.category == cause)
    if filters.get("qid"):
        query = query.where(Miss.qid == filters["qid"])
    state = filters.get("state", "")
    if state == dashboard.SKIPPED:
        query = query.where(col(Miss.id).in_(skips.skipped_ids(triage_id=triage_id)))
    elif state:
        query = query.where(Miss.state == state)
    if filters.get("reviewer"):
        query = query.where(User.email == filters["reviewer"])
    order = dashboard.BACKLOG_SORTS[sort]
    return list(session.exec(query.order_by(order, col(Miss.position))))


@pytest.mark.parametrize("sort", ["position", "category", "labelled_at", "grade"])
def test_every_page_of_every_filter(engine: Engine, tmp_path: Path, sort: str) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=6, per_query=4)
    assert triage.id is not None
    _work(engine, triage.id)
    with Session(engine) as s:
        for filters in FILTERS:
            expected = _plain(s, triage.id, filters, sort)
            shown: list[int] = []
            for page in range(1, 5):
                rows, total = dashboard.backlog(
                    session=s, triage=triage, sort=sort, page=page, per_page=7, **filters
                )
                assert total == len(expected), filters
                shown += [row.miss.id for row in rows]
                # each row carries its own reviewer
                for row in rows:
                    miss = s.get(Miss, row.miss.id)
                    assert miss is not None
                    reviewer = s.get(User, miss.labelled_by_id) if miss.labelled_by_id else None
                    assert row.labelled_by == (reviewer.email if reviewer else None)
            assert shown == expected[:28], (filters, sort)
            assert expected, filters  # the work gives every filter a row
