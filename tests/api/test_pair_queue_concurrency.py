"""Eight reviewers judge a detector run's sample through the API until the pair queue is
empty, against a real server with two worker processes, on SQLite and on PostgreSQL: every
sampled pair is labelled exactly once, no pair is ever handed to two reviewers, every label
a client saw acknowledged is stored, and the audit events equal the labels."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import httpx
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.models import DocPair, PairEvent, Role
from app.services.accounts import users
from app.services.dedup import detector_runs
from app.services.imports import golden_sets
from tests.support.detector_data import copies_files
from tests.support.live import LiveServer
from tests.support.service import TEST_SECRET

REVIEWERS = 8
DEADLINE_S = 120


def test_eight_reviewers_empty_the_pair_queue(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    corpus, qrels, queries, _run, truth = copies_files(tmp_path)
    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(
            session=session, name="copies", qrels=qrels, queries=queries, corpus=corpus
        )
        detection = detector_runs.detect_duplicates(
            session=session, golden=golden, user=None, near=0.4, per_band=12
        )
        sampled = session.exec(
            select(func.count()).where(
                DocPair.detector_run_id == detection.id, col(DocPair.sampled)
            )
        ).one()
        tokens = []
        for i in range(REVIEWERS):
            user = users.create_user(
                session=session, email=f"r{i}@example.com", password="long enough",
                role=Role.REVIEWER,
            )  # fmt: skip
            tokens.append(users.create_token(session=session, user=user, name="t").secret)
    assert sampled >= 30

    server = LiveServer(database_url, tmp_path, secret=TEST_SECRET, workers=2)
    claims: list[tuple[int, int]] = []
    acknowledged: list[tuple[int, bool]] = []
    errors: list[str] = []
    lock = threading.Lock()

    def review(index: int) -> None:
        headers = {"Authorization": f"Bearer {tokens[index]}"}
        deadline = time.monotonic() + DEADLINE_S
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
            while time.monotonic() < deadline:
                claimed = http.post(f"/api/v1/detector-runs/{detection.id}/claim")
                if claimed.status_code == 204:
                    return
                if claimed.status_code != 200:
                    errors.append(f"claim {claimed.status_code} {claimed.text}")
                    return
                pair = claimed.json()
                with lock:
                    claims.append((index, pair["id"]))
                same = truth[pair["a"]["doc_id"]] == truth[pair["b"]["doc_id"]]
                labelled = http.post(
                    f"/api/v1/pairs/{pair['id']}/label",
                    json={"same": same, "version": pair["version"]},
                )
                if labelled.status_code != 200:
                    errors.append(f"label {labelled.status_code} {labelled.text}")
                    return
                with lock:
                    acknowledged.append((pair["id"], same))
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
    handed = Counter(pair_id for _, pair_id in claims)
    assert len(handed) == sampled
    assert max(handed.values()) == 1, "a pair was handed to two reviewers"
    assert len({reviewer for reviewer, _ in claims}) > 1, "the work was not shared"
    with Session(engine) as session:
        stored = {
            p.id: p.same
            for p in session.exec(
                select(DocPair).where(DocPair.detector_run_id == detection.id, col(DocPair.sampled))
            )
            if p.labelled and p.version == 2
        }
        events = session.exec(
            select(PairEvent.action, func.count())
            .where(PairEvent.detector_run_id == detection.id)
            .group_by(col(PairEvent.action))
        ).all()
    assert stored == dict(acknowledged)
    assert dict(events) == {"label": sampled}
