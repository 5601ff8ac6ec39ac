"""Leads sending a triage's carried labels back to the queue at the same moment (all of them,
one cause, one miss), against a real server with two worker processes, on SQLite and on
PostgreSQL: each carried miss goes back once, with one ``requeue`` event keeping its carried
label, and the answers add up to the misses that went back."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.models import LabelEvent, Miss, MissState, Role
from app.services.accounts import users
from tests.support.carried import label_every_miss, misses_by_pair
from tests.support.concurrency import at_once
from tests.support.live import LiveServer
from tests.support.series import post_golden_set, post_run
from tests.support.service import TEST_SECRET, Account

QUERIES = 12
CAUSES = ("vocabulary-mismatch", "chunk-boundary", "not-indexed")
ROUNDS = 6


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    live = LiveServer(database_url, tmp_path, secret=TEST_SECRET, workers=2)
    yield live
    live.stop()


def _series(client: TestClient, lead: Account) -> tuple[int, dict[tuple[str, str], str]]:
    """Two runs of one series that miss every relevant document; the first one's triage
    labelled in full. Answers the second run and the labels it carries."""
    qrels = "".join(f"q{q} 0 d{q}-{i} 1\n" for q in range(QUERIES) for i in range(2))
    queries = "".join(f"q{q}\tquery {q}\n" for q in range(QUERIES))
    body = "".join(
        f"q{q} Q0 noise{q}-{r} {r + 1} {9 - r} t\n" for q in range(QUERIES) for r in range(3)
    )
    golden = post_golden_set(client, lead, "carried", qrels=qrels, queries=queries)
    first = post_run(client, lead, golden, "commit-1", body, series="main")
    second = post_run(client, lead, golden, "commit-2", body, series="main")
    made = client.post(
        f"/api/v1/runs/{first}/triages", headers=lead.headers, json={"depth": 1, "k": 1}
    )
    assert made.status_code == 201, made.text
    labels = {
        (f"q{q}", f"d{q}-{i}"): CAUSES[(2 * q + i) % len(CAUSES)]
        for q in range(QUERIES)
        for i in range(2)
    }
    label_every_miss(client, lead, made.json()["id"], labels)
    return second, labels


def test_carried_labels_sent_back_at_once_go_back_once(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    server: LiveServer,
) -> None:
    lead = accounts[Role.LEAD]
    run, labels = _series(client, lead)
    with Session(engine, expire_on_commit=False) as s:
        other = users.create_user(
            session=s, email="lead2@example.com", password="long enough", role=Role.LEAD
        )
        second = users.create_token(session=s, user=other, name="t").secret
    tokens = [lead.token, second]
    clients = [
        httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {t}"}, timeout=60)
        for t in tokens
    ]
    try:
        for round_ in range(ROUNDS):
            made = client.post(
                f"/api/v1/runs/{run}/triages",
                headers=lead.headers,
                json={"depth": 1 + round_, "k": 1},
            )
            assert made.status_code == 201, made.text
            triage = made.json()["id"]
            carried = misses_by_pair(client, lead, triage)
            assert {p: m["category"] for p, m in carried.items()} == labels
            assert {m["state"] for m in carried.values()} == {MissState.CARRIED.value}
            one = next(m["id"] for p, m in carried.items() if labels[p] == CAUSES[0])
            url = f"/api/v1/triages/{triage}/carried"
            bodies = [
                {"requeue": True},
                {"requeue": True, "category": CAUSES[0]},
                {"requeue": True, "miss_id": one},
                {"requeue": True, "category": CAUSES[1]},
            ]
            answers = at_once(
                [
                    lambda i=i, b=b, u=url: clients[i % 2].post(u, json=b)
                    for i, b in enumerate(bodies)
                ]
            )
            said = [(a.status_code, a.json().get("error", {}).get("code")) for a in answers]
            for i, (status, code) in enumerate(said):
                # the one miss may have gone back with another request: "it carries no label"
                assert status == 200 or (i == 2 and (status, code) == (409, "not_carried")), (
                    round_,
                    said,
                )
            moved = sum(a.json()["requeued"] for a in answers if a.status_code == 200)
            assert moved == len(labels), (round_, said, moved)
            with Session(engine) as s:
                misses = s.exec(select(Miss).where(Miss.triage_id == triage)).all()
                events = s.exec(
                    select(LabelEvent).where(
                        LabelEvent.triage_id == triage, LabelEvent.action == "requeue"
                    )
                ).all()
            assert {m.state for m in misses} == {MissState.OPEN.value}
            assert {m.category for m in misses} == {None}
            assert Counter(e.miss_id for e in events) == Counter(m.id for m in misses)
            by_id = {m.id: (m.qid, m.doc_id) for m in misses}
            assert {by_id[e.miss_id]: e.before["category"] for e in events} == labels
    finally:
        for http in clients:
            http.close()
