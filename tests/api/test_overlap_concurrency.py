"""16 reviewers drain a triage with overlap 2 through the API, against a real server with two
worker processes, on SQLite and on PostgreSQL; then they, as adjudicators, drain its
adjudication queue.

Every miss ends with exactly two labels from two distinct reviewers, no reviewer is handed
one miss twice, no miss gets a third lease, every acknowledged label is stored, and no
disputed miss is handed to two adjudicators.
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

from app.models import CANT_TELL, LabelEvent, Miss, Review, Role
from app.models.triage_public import Overlap
from app.services.accounts import users
from app.services.triage.closure import closure_report
from app.services.triage.triages import triage_context
from tests.support.live import LiveServer
from tests.support.service import TEST_SECRET
from tests.support.triage import make_triage

REVIEWERS = 16
CAUSES = ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]
DEADLINE_S = 150
#: (worker, miss id, category)
Done = list[tuple[int, int, str]]


def _drain(
    server: LiveServer, tokens: list[str], claim_url: str, answer_url: str, choices: list[str]
) -> tuple[Done, list[str]]:
    """Every worker claims and answers until the queue says 204; what each was handed (and
    answered: every claim is answered at once) and the errors."""
    done: Done = []
    errors: list[str] = []
    lock = threading.Lock()

    def work(index: int) -> None:
        rng = random.Random(index)
        headers = {"Authorization": f"Bearer {tokens[index]}"}
        deadline = time.monotonic() + DEADLINE_S
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
            while time.monotonic() < deadline:
                claimed = http.post(claim_url)
                if claimed.status_code == 204:
                    return
                if claimed.status_code != 200:
                    errors.append(f"claim {claimed.status_code} {claimed.text}")
                    return
                miss = claimed.json()
                category = rng.choice(choices)
                answered = http.post(
                    answer_url.format(miss["id"]),
                    json={"category": category, "version": miss["version"]},
                )
                if answered.status_code != 200:
                    errors.append(f"answer {answered.status_code} {answered.text}")
                    return
                with lock:
                    done.append((index, miss["id"], category))
        errors.append(f"worker {index} ran out of time")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(tokens))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S + 30)
    return done, errors


def _actions(engine: Engine, triage_id: int) -> dict[str, int]:
    with Session(engine) as session:
        return dict(
            session.exec(
                select(LabelEvent.action, func.count())
                .where(LabelEvent.triage_id == triage_id)
                .group_by(col(LabelEvent.action))
            ).all()
        )


def test_sixteen_reviewers_drain_an_overlap_triage(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    two = Overlap(reviewers=2, fraction=1.0, seed=0)
    _, _, triage = make_triage(engine, tmp_path, queries=40, per_query=3, overlap=two)
    assert triage.id is not None
    assert triage.misses == 120
    tokens, ids = [], []
    with Session(engine, expire_on_commit=False) as session:
        for i in range(REVIEWERS):
            user = users.create_user(
                session=session,
                email=f"r{i}@example.com",
                password="long enough",
                role=Role.REVIEWER,
                adjudicator=True,
            )
            ids.append(user.id)
            tokens.append(users.create_token(session=session, user=user, name="t").secret)

    server = LiveServer(database_url, tmp_path, secret=TEST_SECRET, workers=2)
    try:
        labels, errors = _drain(
            server,
            tokens,
            f"/api/v1/triages/{triage.id}/claim",
            "/api/v1/misses/{}/label",
            [*CAUSES, CANT_TELL],
        )
        assert errors == []
        with Session(engine) as session:
            disputed = set(
                session.exec(
                    select(Miss.id).where(Miss.triage_id == triage.id, Miss.state == "disputed")
                ).all()
            )
        decisions, errors = _drain(
            server,
            tokens,
            f"/api/v1/triages/{triage.id}/adjudication/claim",
            "/api/v1/misses/{}/adjudicate",
            CAUSES,
        )
        assert errors == []
    finally:
        server.stop()

    # Review: two labels a miss, from two distinct reviewers, each one acknowledged stored.
    handed = Counter((worker, miss_id) for worker, miss_id, _ in labels)
    assert max(handed.values()) == 1, "a reviewer was handed one miss twice"
    per_miss = Counter(miss_id for _, miss_id, _ in labels)
    assert len(per_miss) == 120
    assert set(per_miss.values()) == {2}, "a miss got more or fewer than two labels"
    assert len({worker for worker, _, _ in labels}) > 2, "the work was not shared"
    with Session(engine) as session:
        stored = session.exec(
            select(Review.miss_id, Review.reviewer_id, Review.category).where(
                Review.triage_id == triage.id
            )
        ).all()
    assert sorted(stored) == sorted((m, ids[w], c) for w, m, c in labels)
    # Adjudication: each disputed miss handed to one adjudicator once, and decided.
    assert disputed, "no disagreement to adjudicate: the test would prove nothing"
    assert sorted(m for _, m, _ in decisions) == sorted(disputed)
    events = _actions(engine, triage.id)
    assert events == {
        "review": 240,
        "agree": 120 - len(disputed),
        "dispute": len(disputed),
        "adjudicate": len(disputed),
    }
    with Session(engine) as session:
        ctx = triage_context(session=session, triage_id=triage.id)
        report = closure_report(session=session, triage=ctx.triage, causes=ctx.causes)
    assert report.closes
    assert (report.final.single, report.final.agreed, report.final.adjudicated) == (
        0,
        120 - len(disputed),
        len(disputed),
    )
