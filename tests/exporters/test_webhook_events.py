"""Webhook events: miss.labelled for every label, triage.closed once when the categories
close (again after a reopening), posted signed from an outbox, never twice."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.exporters import Sender
from app.models import Role, WebhookDelivery
from app.services.delivery import events
from tests.support.fake_tracker import SECRET, Tracker
from tests.support.service import Account
from tests.support.triage import make_triage


def deliver(engine: Engine) -> int:
    with Session(engine, expire_on_commit=False) as session:
        return events.deliver_pending(
            session=session,
            secret=SECRET,
            sender=Sender(timeout=10, attempts=2, max_wait=0.1),
            allow_local=True,  # the fake receiver is on 127.0.0.1
        )


def test_events_are_queued_signed_and_delivered_once(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    tmp_path: Path,
    fake: tuple[str, Tracker],
) -> None:
    base, tracker = fake
    golden, _, triage = make_triage(engine, tmp_path, queries=1, per_query=2)
    lead = accounts[Role.LEAD].headers
    bad = client.put(
        f"/api/v1/golden-sets/{golden.id}/webhook",
        headers=lead,
        json={"url": f"{base}/hook", "events": ["miss.deleted"]},
    )
    assert (bad.status_code, bad.json()["error"]["code"]) == (422, "unknown_event")
    configured = client.put(
        f"/api/v1/golden-sets/{golden.id}/webhook",
        headers=lead,
        json={"url": f"{base}/hook", "events": ["miss.labelled", "triage.closed"]},
    )
    assert configured.json()["webhook"]["events"] == ["miss.labelled", "triage.closed"]

    def label(category: str, note: str = "") -> int:
        miss = client.post(f"/api/v1/triages/{triage.id}/claim", headers=lead).json()
        client.post(
            f"/api/v1/misses/{miss['id']}/label",
            headers=lead,
            json={"category": category, "note": note, "version": miss["version"]},
        )
        return int(miss["id"])

    first = label("not-indexed")
    assert deliver(engine) == 1
    assert deliver(engine) == 0  # delivered once only
    posted = [r for r in tracker.requests if r.path == "/hook"]
    assert len(posted) == 1  # the fake checked the HMAC signature and answered 200
    body = posted[0].body
    assert (body["event"], body["miss_id"], body["category"]) == (
        "miss.labelled",
        first,
        "not-indexed",
    )
    assert posted[0].headers["X-Misstriage-Event"] == "miss.labelled"

    second = label("other", "judged wrongly")  # closes? no: "other" is residue
    client.post(
        f"/api/v1/misses/{second}/label",
        headers=lead,
        json={"category": "chunk-boundary", "version": 2},
    )  # now it closes
    assert deliver(engine) == 3
    kinds = [json.loads(json.dumps(r.body))["event"] for r in tracker.requests if r.path == "/hook"]
    assert kinds == ["miss.labelled", "miss.labelled", "miss.labelled", "triage.closed"]
    with Session(engine) as session:
        rows = session.exec(select(WebhookDelivery)).all()
        assert all(r.delivered_at is not None and r.attempts == 1 for r in rows)


def test_failed_delivery_is_retried_later(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    tmp_path: Path,
    fake: tuple[str, Tracker],
) -> None:
    from tests.support.fake_tracker import Fault

    base, tracker = fake
    golden, _, triage = make_triage(engine, tmp_path, queries=1, per_query=2)
    lead = accounts[Role.LEAD].headers
    client.put(
        f"/api/v1/golden-sets/{golden.id}/webhook",
        headers=lead,
        json={"url": f"{base}/hook", "events": ["miss.labelled"]},
    )
    miss = client.post(f"/api/v1/triages/{triage.id}/claim", headers=lead).json()
    client.post(
        f"/api/v1/misses/{miss['id']}/label",
        headers=lead,
        json={"category": "not-indexed", "version": 1},
    )
    tracker.faults = [Fault("/hook", status=500), Fault("/hook", status=500)]
    assert deliver(engine) == 0
    with Session(engine) as session:
        row = session.exec(select(WebhookDelivery)).one()
        assert (row.attempts, row.delivered_at) == (1, None)
        assert "500" in row.last_error
    assert deliver(engine) == 1
