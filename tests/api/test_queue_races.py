"""Answers that never depend on timing, on both databases, against a real server with two
worker processes: requests that arrive at once (a barrier releases them together) get the
answers the same requests get one after the other.

- One reviewer's simultaneous claims (two tabs, a retried request) lease them one miss.
- Sixteen threads, two per reviewer token, drain a triage: every answer 200, 204 or 409,
  every miss labelled once.
- A label repeated while the first is in flight: one 200, one 409 ``stale_version``, for a
  single review and for a blind double-review label.
- The last two labels given at once: the triage is marked closed, once.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.models import LabelEvent, Miss, Role, Triage, WebhookDelivery
from app.models.triage_public import Overlap
from app.services.accounts import users
from app.services.delivery import events
from tests.support.concurrency import at_once_n
from tests.support.live import LiveServer
from tests.support.service import TEST_SECRET
from tests.support.triage import make_triage

CAUSES = ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]
DEADLINE_S = 120


def _tokens(engine: Engine, n: int, prefix: str = "r") -> list[str]:
    made = []
    with Session(engine, expire_on_commit=False) as s:
        for i in range(n):
            user = users.create_user(
                session=s, email=f"{prefix}{i}@example.com", password="long enough",
                role=Role.REVIEWER,
            )  # fmt: skip
            made.append(users.create_token(session=s, user=user, name="t").secret)
    return made


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    live = LiveServer(database_url, tmp_path, secret=TEST_SECRET, workers=2)
    yield live
    live.stop()


def _leases_of(engine: Engine, triage_id: int) -> Counter[int]:
    with Session(engine) as s:
        holders = s.exec(
            select(Miss.lease_holder_id).where(
                Miss.triage_id == triage_id,
                Miss.state == "open",
                col(Miss.lease_holder_id).is_not(None),
            )
        ).all()
    return Counter(h for h in holders if h is not None)


def test_simultaneous_claims_of_one_reviewer_lease_one_miss(
    engine: Engine, server: LiveServer, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=10, per_query=2)
    (token,) = _tokens(engine, 1)
    headers = {"Authorization": f"Bearer {token}"}
    claim = f"{server.url}/api/v1/triages/{triage.id}/claim"
    with httpx.Client(headers=headers, timeout=30) as http:
        for _ in range(6):
            answers = at_once_n(4, lambda _: http.post(claim))
            assert [a.status_code for a in answers] == [200] * 4
            held = {a.json()["id"] for a in answers}
            assert len(held) == 1, held  # one miss, whichever tab asked
            assert sum(_leases_of(engine, triage.id).values()) == 1
            (miss_id,) = held
            version = answers[0].json()["version"]
            labelled = http.post(
                f"{server.url}/api/v1/misses/{miss_id}/label",
                json={"category": CAUSES[0], "version": version},
            )
            assert labelled.status_code == 200


@pytest.mark.parametrize("overlap", [1, 2], ids=["single", "double"])
def test_two_tabs_per_reviewer_drain_a_triage(
    engine: Engine, server: LiveServer, tmp_path: Path, overlap: int
) -> None:
    _, _, triage = make_triage(
        engine, tmp_path, queries=20, per_query=3, overlap=Overlap(reviewers=overlap)
    )
    tokens = _tokens(engine, 8)
    answers: Counter[int] = Counter()
    unexpected: list[str] = []
    lock = threading.Lock()

    def tab(index: int) -> None:
        rng = random.Random(index)
        headers = {"Authorization": f"Bearer {tokens[index // 2]}"}
        deadline = time.monotonic() + DEADLINE_S
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
            while time.monotonic() < deadline:
                claimed = http.post(f"/api/v1/triages/{triage.id}/claim")
                said = [claimed]
                if claimed.status_code == 200:
                    miss = claimed.json()
                    said.append(
                        http.post(
                            f"/api/v1/misses/{miss['id']}/label",
                            params={"next": rng.random() < 0.5},
                            json={"category": rng.choice(CAUSES), "version": miss["version"]},
                        )
                    )
                with lock:
                    for answer in said:
                        answers[answer.status_code] += 1
                        if answer.status_code not in (200, 204, 409):
                            unexpected.append(f"{answer.status_code} {answer.text}")
                if claimed.status_code == 204:
                    return
        with lock:
            unexpected.append(f"tab {index} ran out of time")

    threads = [threading.Thread(target=tab, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S + 30)
    assert unexpected == []
    assert answers[200] > 0
    with Session(engine) as s:
        misses = s.exec(select(Miss).where(Miss.triage_id == triage.id)).all()
        assert {m.state for m in misses} <= {"labelled", "disputed"}
        events = s.exec(select(LabelEvent).where(LabelEvent.triage_id == triage.id)).all()
    finals = Counter(e.miss_id for e in events if e.action in ("label", "agree", "dispute"))
    assert finals == Counter(m.id for m in misses)  # every miss labelled once
    assert not [e for e in events if e.action == "refused"]  # no lease_not_held anywhere
    if overlap == 2:
        reviews = Counter((e.miss_id, e.user_id) for e in events if e.action == "review")
        assert set(reviews.values()) == {1}  # one blind label per reviewer and miss
        assert Counter(m for m, _ in reviews) == Counter({m.id: 2 for m in misses})


@pytest.mark.parametrize("overlap", [1, 2], ids=["single", "double"])
def test_a_label_repeated_in_flight_is_stored_once(
    engine: Engine, server: LiveServer, tmp_path: Path, overlap: int
) -> None:
    _, _, triage = make_triage(
        engine, tmp_path, queries=6, per_query=1, overlap=Overlap(reviewers=overlap)
    )
    (token,) = _tokens(engine, 1)
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as http:
        for _ in range(6):
            miss = http.post(f"/api/v1/triages/{triage.id}/claim").json()
            body = {"category": CAUSES[1], "version": miss["version"]}
            url = f"/api/v1/misses/{miss['id']}/label"
            answers = at_once_n(2, lambda _, url=url, body=body: http.post(url, json=body))
            said = sorted((a.status_code, a.json().get("error", {}).get("code")) for a in answers)
            assert said == [(200, None), (409, "stale_version")]
    with Session(engine) as s:
        events = s.exec(select(LabelEvent).where(LabelEvent.triage_id == triage.id)).all()
    written = "label" if overlap == 1 else "review"
    assert Counter(e.action for e in events) == {written: 6, "conflict": 6}


def test_the_last_labels_given_at_once_close_the_triage_once(
    engine: Engine, server: LiveServer, tmp_path: Path
) -> None:
    """Two reviewers label a triage's last two misses at the same moment: each finds the
    other's miss still open as it writes, yet the triage is marked closed, with one
    ``triage.closed`` event queued for its webhook."""
    tokens = _tokens(engine, 2)
    for round_ in range(5):
        golden, _, triage = make_triage(
            engine, tmp_path, queries=1, per_query=2, name=f"close{round_}"
        )
        with Session(engine, expire_on_commit=False) as s:
            events.configure(
                session=s,
                golden=golden,
                url="http://127.0.0.1:9/hook",
                events=["triage.closed"],
                allow_local=True,
            )
        clients = [
            httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {t}"}, timeout=30)
            for t in tokens
        ]
        held = [c.post(f"/api/v1/triages/{triage.id}/claim").json() for c in clients]
        assert held[0]["id"] != held[1]["id"]
        answers = at_once_n(
            2,
            lambda i, clients=clients, held=held: clients[i].post(
                f"/api/v1/misses/{held[i]['id']}/label",
                json={"category": CAUSES[0], "version": held[i]["version"]},
            ),
        )
        for client in clients:
            client.close()
        assert [a.status_code for a in answers] == [200, 200]
        with Session(engine) as s:
            marked = s.get(Triage, triage.id)
            assert marked is not None
            assert marked.closed_at is not None, f"round {round_}: never marked closed"
            queued = s.exec(
                select(WebhookDelivery).where(
                    WebhookDelivery.golden_set_id == golden.id,
                    WebhookDelivery.event == "triage.closed",
                )
            ).all()
        assert len(queued) == 1
