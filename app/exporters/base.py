"""What every tracker exporter shares: the issue to write, the request to send, and sending
it with retries (backoff, Retry-After on 429, GitHub's secondary rate limit)."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from app.exporters.outbound import AddressRefused
from app.security import shown_url


class Tracker(StrEnum):
    """The trackers a backlog can be exported to (``app.exporters.REGISTRY`` builds each)."""

    GITHUB = "github"
    GITLAB = "gitlab"
    JIRA = "jira"
    LINEAR = "linear"
    WEBHOOK = "webhook"


#: Header names whose values are secrets: shown as "***" in dry runs and never logged.
SECRET_HEADERS = frozenset({"authorization", "private-token", "x-misstriage-signature"})


@dataclass(frozen=True)
class Follow:
    """A later triage of a series updating the issue an earlier triage's export made: which
    run and triage it follows, and the earlier misses of the cause the new run fixed (their
    pair is no miss of the new triage: ``{"qid", "doc_id", "query"}``)."""

    series: str
    run_name: str
    earlier_run: str
    earlier_triage: int
    fixed: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Draft:
    """One tracker issue: the misses of one cause in one triage."""

    triage_id: int
    category: str
    title: str
    body: str  # Markdown
    labels: list[str]
    count: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    meaning: str = ""
    backlog_url: str = ""
    #: With double review, what the labels rest on ("8 agreed, 4 adjudicated"); else empty.
    rests_on: str = ""
    #: When the issue follows an earlier triage of the run's series.
    follows: Follow | None = None


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    headers: dict[str, str]
    json: Any = None
    content: bytes | None = None
    #: Safe to send twice (an update, or a create the tracker deduplicates by a client key).
    #: A create that is not may have succeeded when its answer timed out: it is not retried.
    idempotent: bool = False
    #: The URL itself is a secret (a webhook's): a dry run shows it as ``shown_url`` does.
    secret_url: bool = False

    def redacted(self) -> dict[str, Any]:
        """The request as a dry run shows it: everything but the secrets."""
        headers = {
            k: ("***" if k.lower() in SECRET_HEADERS else v) for k, v in self.headers.items()
        }
        body: Any = self.json
        if body is None and self.content is not None:
            body = self.content.decode()
        url = shown_url(self.url) if self.secret_url else self.url
        return {"method": self.method, "url": url, "headers": headers, "body": body}


class TargetRefused(ValueError):
    """A target (or an issue id) that is not of its tracker's form: nothing is planned for
    it. ``code`` names the rule (``bad_github_target``); the message states it."""

    def __init__(self, message: str, *, tracker: Tracker) -> None:
        super().__init__(message)
        self.tracker = tracker
        self.code = f"bad_{tracker.value}_target"


def path_segment(value: str, *, tracker: Tracker, what: str) -> str:
    """``value`` as one percent-encoded segment of a request's path: a ``/``, ``?`` or ``#``
    in it is encoded, so it never reaches another path, a query or a fragment; and ``.``
    or ``..``, which HTTP clients and servers resolve away (percent-encoded or not), and
    the empty segment are refused."""
    if value in ("", ".", ".."):
        raise TargetRefused(f"{what} {value!r} is not a path segment", tracker=tracker)
    return quote(value, safe="")


class TrackerError(Exception):
    """The tracker refused or kept failing; the message never contains a secret."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Exporter(Protocol):
    name: Tracker

    def check_target(self, target: str) -> None:
        """Raise ValueError when ``target`` is not of the tracker's form."""

    def create(self, target: str, draft: Draft) -> Request: ...

    def update(self, target: str, external_id: str, draft: Draft) -> Request: ...

    def created(self, target: str, response: httpx.Response, draft: Draft) -> tuple[str, str]:
        """(external id, url) of the issue the tracker created."""
        ...


@dataclass
class Sender:
    """Sends requests with bounded retries. ``sleep`` is injectable for tests."""

    timeout: float = 10.0
    attempts: int = 4
    max_wait: float = 30.0
    sleep: Callable[[float], object] = time.sleep
    waits: list[float] = field(default_factory=list)

    def send(self, client: httpx.Client, request: Request) -> httpx.Response:
        last, last_status = "no attempt", None
        for attempt in range(1, self.attempts + 1):
            try:
                response = client.request(
                    request.method,
                    request.url,
                    headers=request.headers,
                    json=request.json,
                    content=request.content,
                    timeout=self.timeout,
                )
            except AddressRefused as exc:
                # checked right before connecting: never retried, never sent
                raise TrackerError(f"{request.method} {_url(request.url)} refused: {exc}") from None
            except httpx.ConnectError as exc:
                last = f"connection failed ({type(exc).__name__})"
                wait = self._backoff(attempt)
            except httpx.TimeoutException:
                last = f"timed out after {self.timeout:g} s"
                if not request.idempotent:
                    raise TrackerError(
                        f"{request.method} {request.url} timed out after {self.timeout:g} s: "
                        "the issue may have been created; check the tracker before exporting "
                        "this cause again"
                    ) from None
                wait = self._backoff(attempt)
            except httpx.TransportError as exc:
                last = f"connection failed ({type(exc).__name__})"
                wait = self._backoff(attempt)
            else:
                if response.status_code < 300:
                    return response
                if response.status_code < 400:
                    # Redirects are never followed: one could lead to the local network.
                    raise TrackerError(
                        f"{request.method} {_url(request.url)} answered "
                        f"{response.status_code}: redirects are not followed",
                        status=response.status_code,
                    )
                wait_for = self._retry_wait(response, attempt, idempotent=request.idempotent)
                if wait_for is None:
                    raise TrackerError(
                        f"{request.method} {request.url} answered {response.status_code}: "
                        f"{_snippet(response)}",
                        status=response.status_code,
                    )
                last, last_status = f"answered {response.status_code}", response.status_code
                wait = wait_for
            if attempt < self.attempts:
                self.waits.append(wait)
                self.sleep(wait)
        raise TrackerError(
            f"{request.method} {request.url} {last} ({self.attempts} attempts)", status=last_status
        )

    def _backoff(self, attempt: int) -> float:
        return float(min(self.max_wait, 0.5 * 2 ** (attempt - 1)))

    def _retry_wait(
        self, response: httpx.Response, attempt: int, *, idempotent: bool
    ) -> float | None:
        status = response.status_code
        if status == 429 or (status == 403 and _secondary_rate_limit(response)):
            return min(self.max_wait, _retry_after(response) or self._backoff(attempt))
        # 502/503/504: the request did not get through; a 500 may have done half the work,
        # so only requests that are safe to repeat are sent again after one.
        if status in (502, 503, 504) or (status >= 500 and idempotent):
            return self._backoff(attempt)
        return None


def _secondary_rate_limit(response: httpx.Response) -> bool:
    """GitHub answers 403 (not 429) for its secondary rate limit."""
    if response.headers.get("retry-after") or response.headers.get("x-ratelimit-remaining") == "0":
        return True
    return "rate limit" in response.text.lower()


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value:
        if value.strip().isascii() and value.strip().isdigit():
            return float(value)
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    reset = response.headers.get("x-ratelimit-reset")
    if reset and reset.isascii() and reset.isdigit():
        return max(0.0, int(reset) - time.time())
    return None


def _snippet(response: httpx.Response) -> str:
    text = response.text.strip().replace("\n", " ")
    return text[:300] if text else "(no body)"


def _url(url: str) -> str:
    """A URL as an error message shows it: no query string, at most 200 characters."""
    bare = url.split("?", 1)[0]
    return bare if len(bare) <= 200 else bare[:200] + "…"
