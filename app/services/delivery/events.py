"""Webhook events of a golden set's triages (``miss.labelled``, ``triage.closed``), through an
outbox: the queue writes the rows with the label that causes them (app/services/queue/
store.py), ``deliver_pending`` posts them."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_
from sqlmodel import Session, col, select

from app.db import end_reading, writing
from app.exporters import Sender, TrackerError, outbound
from app.exporters.webhook import signed
from app.models import GoldenSet, WebhookDelivery, WebhookEvent, utcnow
from app.services.errors import Invalid

EVENTS = tuple(WebhookEvent)
MAX_ATTEMPTS = 8
CLAIM_SECONDS = 60
#: Events claimed and posted per poll.
DELIVERY_BATCH = 50
#: A webhook URL is refused beyond this length.
MAX_URL_CHARS = 2000
#: The background deliverer's patience with one receiver: a request, its one retry, the
#: longest wait between them (shorter than a tracker export's: nobody is waiting on it).
DELIVERER_TIMEOUT_S = 5.0
DELIVERER_ATTEMPTS = 2
log = logging.getLogger(__name__)


def configure(
    *,
    session: Session,
    golden: GoldenSet,
    url: str | None,
    events: list[str],
    allow_local: bool = False,
) -> GoldenSet:
    """Set (or, with ``url`` None, clear) the golden set's webhook. The URL is refused (422)
    unless it is http(s), without credentials, and (unless ``allow_local``) resolves to
    public addresses only; it is checked again before each delivery."""
    unknown = sorted(set(events) - set(EVENTS))
    if unknown:
        raise Invalid(f"unknown events {unknown}: one of {', '.join(EVENTS)}", code="unknown_event")
    if url is not None:
        if len(url) > MAX_URL_CHARS:
            raise Invalid(
                f"the webhook URL is longer than {MAX_URL_CHARS} characters", code="bad_url"
            )
        try:
            outbound.check_url(url, allow_local=allow_local)
        except outbound.AddressRefused as exc:
            raise Invalid(exc.message, code=exc.code) from None
    with writing(session):
        golden.webhook_url = url
        golden.webhook_events = sorted(set(events)) if url else []
        session.add(golden)
    session.refresh(golden)
    return golden


def deliver_pending(
    *,
    session: Session,
    secret: str | None,
    sender: Sender,
    limit: int = DELIVERY_BATCH,
    allow_local: bool = False,
) -> int:
    """Post the waiting events (oldest first); returns how many were delivered. Rows are
    claimed for a minute first, so several app processes never post one event twice."""
    if not secret:
        return 0
    now = utcnow()
    query = (
        select(WebhookDelivery)
        .where(
            col(WebhookDelivery.delivered_at).is_(None),
            WebhookDelivery.attempts < MAX_ATTEMPTS,
            or_(
                col(WebhookDelivery.locked_until).is_(None), col(WebhookDelivery.locked_until) < now
            ),
        )
        .order_by(col(WebhookDelivery.id))
        .limit(limit)
    )
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    with writing(session):
        claimed = list(session.exec(query))
        for row in claimed:
            row.locked_until = now + timedelta(seconds=CLAIM_SECONDS)
            session.add(row)
    # Read what the requests need, then end the transaction: none is open while a
    # receiver answers (it may take seconds, or time out).
    targets: dict[int, GoldenSet | None] = {}
    for row in claimed:
        if row.golden_set_id not in targets:
            targets[row.golden_set_id] = session.get(GoldenSet, row.golden_set_id)
    requests = []
    for row in claimed:
        golden = targets[row.golden_set_id]
        if golden is None or not golden.webhook_url:
            continue
        payload: dict[str, Any] = {"golden_set": golden.name, "delivery": row.id, **row.payload}
        requests.append(
            (row, signed(golden.webhook_url, secret, row.event, payload, f"event-{row.id}"))
        )
    end_reading(session)
    delivered = 0
    with outbound.client(allow_local=allow_local) as client:
        for row, request in requests:
            delivered_at: datetime | None = None
            error: str | None = None
            try:
                _check_stored_url(request.url)
                sender.send(client, request)
                delivered_at = utcnow()
                delivered += 1
            except TrackerError as exc:
                error = str(exc)[:1000]
                log.warning(
                    "webhook delivery failed",
                    extra={
                        "delivery": row.id,
                        "event": row.event,
                        "golden_set_id": row.golden_set_id,
                        "attempt": row.attempts + 1,
                        "status": exc.status,
                        "error": str(exc)[:300],
                    },
                )
            with writing(session):
                if delivered_at is not None:
                    row.delivered_at = delivered_at
                if error is not None:
                    row.last_error = error
                row.attempts += 1
                row.locked_until = None
                session.add(row)
    return delivered


def _check_stored_url(url: str) -> None:
    """A URL stored before these checks existed is held to them too: scheme, credentials
    (the addresses are checked by the client as it connects)."""
    try:
        outbound.check_url(url, allow_local=True)
    except outbound.AddressRefused as exc:
        raise TrackerError(f"the webhook URL is refused: {exc.message}") from None


class _Stopping(Exception):
    """Raised in a retry wait when the app shuts down: no further attempt is sent."""


class Deliverer(threading.Thread):
    """Delivers webhook events in the background of an app process. ``stop`` ends it
    promptly: the wait between polls and the waits between retries both end on it."""

    def __init__(
        self, engine: Any, secret: str | None, every: float, *, allow_local: bool = False
    ) -> None:
        super().__init__(daemon=True, name="misstriage-webhooks")
        self.engine, self.secret, self.every = engine, secret, every
        self.allow_local = allow_local
        self.stopping = threading.Event()

    def run(self) -> None:
        # Retry waits end on stop (and no further attempt is sent); the request timeout
        # bounds a send in flight. An event cut short stays claimed for CLAIM_SECONDS, then
        # any process delivers it.
        sender = Sender(
            timeout=DELIVERER_TIMEOUT_S,
            attempts=DELIVERER_ATTEMPTS,
            max_wait=DELIVERER_TIMEOUT_S,
            sleep=self._pause,
        )
        while not self.stopping.wait(self.every):
            try:
                with Session(self.engine, expire_on_commit=False) as session:
                    deliver_pending(
                        session=session,
                        secret=self.secret,
                        sender=sender,
                        allow_local=self.allow_local,
                    )
            except _Stopping:
                return
            except Exception as exc:  # keep delivering after a database hiccup
                # The type and a short message only: no URL with secrets, no huge body.
                log.error(
                    "webhook delivery loop failed; retrying at the next poll",
                    extra={"error_type": type(exc).__name__, "error": str(exc)[:300]},
                )

    def _pause(self, seconds: float) -> None:
        if self.stopping.wait(seconds):
            raise _Stopping

    def stop(self, timeout: float = 10.0) -> bool:
        """Ask the loop to end and wait for it; True when it ended within ``timeout``."""
        self.stopping.set()
        self.join(timeout)
        if self.is_alive():
            log.warning("webhook delivery loop still running after shutdown wait")
            return False
        return True
