"""The webhook delivery loop of an app process: its failures are logged (structured, short, no
secret), and shutdown stops and joins it promptly, even in the middle of a retry wait."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy.engine import Engine

from app.db import make_engine
from app.main import create_app
from app.models import Role
from app.services.delivery.events import Deliverer
from app.settings import Settings
from tests.support.fake_tracker import SECRET, Fault, Tracker
from tests.support.service import Account, make_settings
from tests.support.triage import make_triage


def webhook_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "misstriage-webhooks"]


def test_shutdown_joins_the_loop_during_a_retry_wait_and_failures_are_logged(
    settings: Settings,
    engine: Engine,
    accounts: dict[Role, Account],
    tmp_path: Path,
    fake: tuple[str, Tracker],
    caplog: pytest.LogCaptureFixture,
) -> None:
    base, tracker = fake
    golden, _, triage = make_triage(engine, tmp_path, queries=1, per_query=2)
    polling = settings.model_copy(
        update={"webhook_secret": SecretStr(SECRET), "webhook_poll_seconds": 0.05}
    )
    # The receiver holds the request for a second, then says "come back in 30 s": shutdown
    # comes while the request is in flight; it waits for that request (joins the thread),
    # and the 30 s retry wait ends at once.
    tracker.faults = [
        Fault("/hook", status=429, headers={"Retry-After": "30"}, body="x" * 5000, pause=1.0)
    ]
    lead = accounts[Role.LEAD].headers
    caplog.set_level(logging.INFO)
    assert webhook_threads() == []
    with TestClient(create_app(polling, engine)) as api:
        assert len(webhook_threads()) == 1
        configured = api.put(
            f"/api/v1/golden-sets/{golden.id}/webhook",
            headers=lead,
            json={"url": f"{base}/hook", "events": ["miss.labelled"]},
        )
        assert configured.status_code == 200, configured.text
        miss = api.post(f"/api/v1/triages/{triage.id}/claim", headers=lead).json()
        labelled = api.post(
            f"/api/v1/misses/{miss['id']}/label",
            headers=lead,
            json={"category": "not-indexed", "version": miss["version"]},
        )
        assert labelled.status_code == 200, labelled.text
        deadline = time.monotonic() + 10
        while not tracker.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [r.path for r in tracker.requests] == ["/hook"]  # held by the receiver now
        started = time.monotonic()
    shutdown = time.monotonic() - started
    # Not the 30 s the receiver asked for: the stop ends the retry wait at once.
    assert shutdown < 15.0, f"shutdown took {shutdown:.1f} s"
    assert webhook_threads() == []  # joined, not left running
    assert len(tracker.requests) == 1  # nothing was sent after the stop


def test_failures_are_logged_without_secret_or_body(
    engine: Engine,
    tmp_path: Path,
    fake: tuple[str, Tracker],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from sqlmodel import Session

    from app.exporters import Sender
    from app.models import GoldenSet, WebhookDelivery
    from app.services.delivery import events

    base, tracker = fake
    golden, _, _ = make_triage(engine, tmp_path, queries=1, per_query=1)
    tracker.faults = [Fault("/hook", status=500, body="y" * 5000)]
    caplog.set_level(logging.INFO)
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(GoldenSet, golden.id)
        assert row is not None
        events.configure(
            session=session,
            golden=row,
            url=f"{base}/hook",
            events=["miss.labelled"],
            allow_local=True,
        )
        session.add(WebhookDelivery(golden_set_id=row.id, event="miss.labelled", payload={}))
        session.commit()
        sent = events.deliver_pending(
            session=session,
            secret=SECRET,
            sender=Sender(timeout=10, attempts=1, max_wait=0.1),
            allow_local=True,
        )
    assert sent == 0
    failed = [r for r in caplog.records if r.getMessage() == "webhook delivery failed"]
    assert len(failed) == 1
    record = failed[0]
    assert record.levelno == logging.WARNING
    assert (record.event, record.status, record.attempt) == ("miss.labelled", 500, 1)  # type: ignore[attr-defined]
    assert len(record.error) <= 300  # type: ignore[attr-defined]
    assert SECRET not in str(record.__dict__)
    assert "y" * 400 not in str(record.__dict__)


def test_a_loop_failure_is_logged_and_the_loop_stops_promptly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A database without tables: every poll fails.
    broken = make_engine(make_settings(f"sqlite:///{tmp_path / 'empty.db'}"))
    caplog.set_level(logging.INFO)
    deliverer = Deliverer(broken, SECRET, 0.02)
    deliverer.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(
        r.getMessage().startswith("webhook delivery loop failed") for r in caplog.records
    ):
        time.sleep(0.02)
    assert deliverer.stop(timeout=5) is True
    assert not deliverer.is_alive()
    broken.dispose()
    failures = [r for r in caplog.records if r.getMessage().startswith("webhook delivery loop")]
    assert failures, "the loop's failure was not logged"
    assert failures[0].levelno == logging.ERROR
    assert failures[0].error_type == "OperationalError"  # type: ignore[attr-defined]
    assert len(failures[0].error) <= 300  # type: ignore[attr-defined]
    assert SECRET not in str(failures[0].__dict__)
