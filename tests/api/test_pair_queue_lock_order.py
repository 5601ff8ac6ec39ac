"""One reviewer in several tabs on the pair-review queue, against a real server with two
worker processes, on SQLite and on PostgreSQL: claims (which renew the pair they hold) sent
at the same moment as a label, a skip or a release of that pair. Every step takes the
person's lock before the pair's row (app/services/locks.py), so they wait for each
other in turn, never in a circle: every answer is a 200 or a 204, none a 503 "deadlock
detected", and what is stored is what the answers said."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.models import DocPair, PairEvent, Role
from app.services.accounts import users
from app.services.dedup import detector_runs
from app.services.imports import golden_sets
from tests.support.concurrency import at_once
from tests.support.detector_data import copies_files
from tests.support.live import LiveServer
from tests.support.service import TEST_SECRET

ROUNDS = 24
#: Tabs claiming beside the one that labels, skips or releases.
TABS = 3
#: The answers a round may take (each request is released with the other by a barrier).
ROUND_S = 20


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    live = LiveServer(database_url, tmp_path, secret=TEST_SECRET, workers=2)
    yield live
    live.stop()


def _detection_and_token(engine: Engine, tmp_path: Path) -> tuple[int, int, str]:
    corpus, qrels, queries, _run, _truth = copies_files(tmp_path)
    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(
            session=session, name="copies", qrels=qrels, queries=queries, corpus=corpus
        )
        detection = detector_runs.detect_duplicates(
            session=session, golden=golden, user=None, near=0.4, per_band=12
        )
        user = users.create_user(
            session=session, email="tabs@example.com", password="long enough",
            role=Role.REVIEWER,
        )  # fmt: skip
        token = users.create_token(session=session, user=user, name="t").secret
    assert detection.id is not None
    assert user.id is not None
    return detection.id, user.id, token


def test_claims_beside_a_label_skip_or_release_of_the_held_pair(
    engine: Engine, server: LiveServer, tmp_path: Path
) -> None:
    detector, user_id, token = _detection_and_token(engine, tmp_path)
    claim = f"/api/v1/detector-runs/{detector}/claim"
    said: list[tuple[str, int, str]] = []
    labelled: dict[int, bool] = {}
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as http:
        for round_ in range(ROUNDS):
            held = http.post(claim)
            assert held.status_code == 200, held.text
            pair = held.json()
            step = ("label", "skip", "release")[round_ % 3]
            body = {"same": round_ % 2 == 0, "version": pair["version"]} if step == "label" else {}
            url = f"/api/v1/pairs/{pair['id']}/{step}"
            # the step and the claims of the other tabs, all at once
            answers = at_once(
                [*[lambda: http.post(claim)] * TABS, lambda u=url, b=body: http.post(u, json=b)],
                seconds=ROUND_S,
            )
            said += [("claim", a.status_code, a.text[:200]) for a in answers[:TABS]]
            said.append((step, answers[-1].status_code, answers[-1].text[:200]))
            if step == "label" and answers[-1].status_code == 200:
                labelled[pair["id"]] = body["same"]
            # whatever came first, the reviewer holds at most one pair
            with Session(engine) as s:
                leases = s.exec(
                    select(DocPair.id).where(
                        DocPair.detector_run_id == detector,
                        DocPair.lease_holder_id == user_id,
                        col(DocPair.labelled).is_(False),
                    )
                ).all()
            assert len(leases) <= 1, (round_, leases)
    refused = [s for s in said if s[1] not in (200, 204)]
    assert refused == [], f"{len(refused)} of {len(said)} requests refused: {refused[:3]}"
    with Session(engine) as s:
        stored = {
            p.id: p.same
            for p in s.exec(select(DocPair).where(DocPair.detector_run_id == detector))
            if p.labelled
        }
        events = s.exec(select(PairEvent.action).where(PairEvent.detector_run_id == detector)).all()
    assert stored == labelled  # every acknowledged label, and nothing else
    assert events.count("label") == len(labelled)
    assert events.count("skip") == ROUNDS // 3
    assert events.count("release") == ROUNDS // 3
