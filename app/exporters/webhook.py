"""A generic webhook: a JSON body signed with HMAC-SHA256 (header X-Misstriage-Signature)."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import httpx

from app.exporters.base import Draft, Request, TargetRefused, Tracker

SIGNATURE_HEADER = "X-Misstriage-Signature"


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def idempotency_key(*parts: object) -> str:
    """A header-safe key from names (a cause may be any Unicode): their SHA-256, in hex."""
    joined = "\x1f".join(str(p) for p in parts)
    return hashlib.sha256(joined.encode()).hexdigest()


def signed(
    url: str, secret: str, event: str, payload: dict[str, Any], idempotency_key: str
) -> Request:
    body = json.dumps({"event": event, **payload}, ensure_ascii=False, sort_keys=True).encode()
    headers = {
        "Content-Type": "application/json",
        "X-Misstriage-Event": event,
        "Idempotency-Key": idempotency_key,
        SIGNATURE_HEADER: signature(secret, body),
    }
    return Request("POST", url, headers, content=body, idempotent=True, secret_url=True)


class WebhookExporter:
    name = Tracker.WEBHOOK
    markup = "github"

    def __init__(self, secret: str) -> None:
        self.secret = secret

    def check_target(self, target: str) -> None:
        # the rest (credentials, the addresses it resolves to) is outbound.check_url's
        if not target.lower().startswith(("http://", "https://")):
            raise TargetRefused("a webhook target is an http(s) URL", tracker=self.name)

    def _payload(self, draft: Draft, action: str) -> dict[str, Any]:
        return {
            "action": action,
            "triage_id": draft.triage_id,
            "cause": draft.category,
            "count": draft.count,
            "title": draft.title,
            "body": draft.body,
            "labels": draft.labels,
            "misses": draft.rows,
            # a later triage of the series: the run and triage it follows, the fixed misses
            "follows": None
            if draft.follows is None
            else {
                "series": draft.follows.series,
                "run": draft.follows.earlier_run,
                "triage_id": draft.follows.earlier_triage,
                "fixed": draft.follows.fixed,
            },
        }

    def create(self, target: str, draft: Draft) -> Request:
        return signed(
            target,
            self.secret,
            "backlog.cause",
            self._payload(draft, "create"),
            idempotency_key(draft.triage_id, draft.category),
        )

    def update(self, target: str, external_id: str, draft: Draft) -> Request:
        return signed(
            target,
            self.secret,
            "backlog.cause",
            self._payload(draft, "update"),
            idempotency_key(draft.triage_id, draft.category),
        )

    def created(self, target: str, response: httpx.Response, draft: Draft) -> tuple[str, str]:
        # A webhook has no issue of its own: the (triage, cause) is the key. No link either:
        # the endpoint is no page to open, and its URL often carries the receiver's secret.
        return f"{draft.triage_id}:{draft.category}", ""
