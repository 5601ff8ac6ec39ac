"""16 reviewers claim and label through the API until the queue is empty, against a real
server with two worker processes, on SQLite and on PostgreSQL.

Every miss is labelled exactly once, no miss is ever handed to two reviewers, every label a
client saw acknowledged is stored, and the audit events equal the labels.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.models import LabelEvent, Miss, Role
from app.services.accounts import users
from tests.support.live import LiveServer
from tests.support.service import TEST_SECRET
from tests.support.triage import make_triage

REVIEWERS = 16
CAUSES = ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]
DEADLINE_S = 120


def test_sixteen_reviewers_empty_the_queue(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=60, per_query=3)
    assert triage.misses == 180
    tokens = []
    with Session(engine, expire_on_commit=False) as session:
        for i in range(REVIEWERS):
            user = users.create_user(
                session=session,
                email=f"r{i}@example.com",
                password="long enough",
                role=Role.REVIEWER,
            )
            tokens.append(users.create_token(session=session, user=user, name="t").secret)

    server = LiveServer(database_url, tmp_path, secret=TEST_SECRET, workers=2)
    claims: list[tuple[int, int]] = []  # (reviewer, miss id)
    acknowledged: list[tuple[int, int, str]] = []  # (reviewer, miss id, category)
    errors: list[str] = []
    lock = threading.Lock()

    def review(index: int) -> None:
        rng = random.Random(index)
        headers = {"Authorization": f"Bearer {tokens[index]}"}
        deadline = time.monotonic() + DEADLINE_S
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
            while time.monotonic() < deadline:
                claimed = http.post(f"/api/v1/triages/{triage.id}/claim")
                if claimed.status_code == 204:
                    return
                if claimed.status_code != 200:
                    errors.append(f"claim {claimed.status_code} {claimed.text}")
                    return
                miss = claimed.json()
                with lock:
                    claims.append((index, miss["id"]))
                category = rng.choice(CAUSES)
                labelled = http.post(
                    f"/api/v1/misses/{miss['id']}/label",
                    json={"category": category, "version": miss["version"]},
                )
                if labelled.status_code != 200:
                    errors.append(f"label {labelled.status_code} {labelled.text}")
                    return
                with lock:
                    acknowledged.append((index, miss["id"], category))
        errors.append(f"reviewer {index} ran out of time")

    try:
        threads = [threading.Thread(target=review, args=(i,)) for i in range(REVIEWERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(DEADLINE_S + 30)
    finally:
        server.stop()

    assert errors == []
    claimed_ids = Counter(miss_id for _, miss_id in claims)
    assert len(claimed_ids) == 180
    assert max(claimed_ids.values()) == 1, "a miss was handed to two reviewers"
    assert len({reviewer for reviewer, _ in claims}) > 1, "the work was not shared"
    with Session(engine) as session:
        stored = {
            m.id: (m.state, m.category, m.version, m.labelled_by_id is not None)
            for m in session.exec(select(Miss).where(Miss.triage_id == triage.id))
        }
        events = session.exec(
            select(LabelEvent.action, func.count())
            .where(LabelEvent.triage_id == triage.id)
            .group_by(col(LabelEvent.action))
        ).all()
    assert {
        miss_id: (state, cat, 2, True) for _, miss_id, cat in acknowledged for state in ["labelled"]
    } == stored
    assert dict(events) == {"label": 180}
