"""The simulated reviewers of benchmarks/load_fault.py and their own logs.

A reviewer is a thread with one keep-alive httpx client per app process. Its requests go
round-robin over the processes (as a load balancer would send them); a request that fails
(connection error, 5xx) is repeated with backoff, on the next process, until it gets an
answer or ``GIVE_UP_S`` passes. A label is repeated with the *same* version: if the first
attempt was stored before its answer was lost (the process killed, the database restarted
mid-commit), the repeat answers 409 ``stale_version`` with the stored state, and the reviewer
records the label as acknowledged only if that state is exactly its own label; the checker
then demands that the database says the same (see load_fault_verify.py).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import httpx

CAUSES = ("not-indexed", "vocabulary-mismatch", "chunk-boundary")
#: A request that has failed for this long (retries included) is abandoned.
GIVE_UP_S = 60.0
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 1.0
#: How long a reviewer waits before asking again when the queue answers 204.
EMPTY_WAIT_S = 1.0
TIMEOUT = httpx.Timeout(connect=3.0, read=30.0, write=10.0, pool=5.0)


@dataclass
class Attempt:
    """One HTTP request as the client saw it (times in seconds since the run started)."""

    reviewer: int
    op: str  # claim | label | release
    process: int
    sent: float
    done: float
    outcome: str  # "200", "503 database_unavailable", "ConnectError", ...
    miss_id: int | None = None

    @property
    def failed(self) -> bool:
        """A transport error or a 5xx: the request will be repeated."""
        return not self.outcome[:1].isdigit() or self.outcome.startswith("5")


@dataclass
class Acknowledged:
    """A label the reviewer was told is stored."""

    reviewer: int
    user_id: int
    miss_id: int
    version: int  # the version it was labelled at (the stored miss has version + 1)
    category: str
    at: float
    how: str  # "200", or "409 own label" (a repeat after a lost answer found it stored)
    attempts: int


@dataclass
class Reviewer:
    """One simulated reviewer and everything it saw."""

    index: int
    user_id: int
    token: str
    attempts: list[Attempt] = field(default_factory=list)
    acknowledged: list[Acknowledged] = field(default_factory=list)
    #: labels whose outcome stayed unknown (every attempt failed) or were refused
    unresolved: list[dict[str, Any]] = field(default_factory=list)
    claims: int = 0
    failure: str | None = None
    turn: int = 0


def error_code(answer: httpx.Response) -> str:
    """The API's error code of a non-2xx answer, or '' when the body has none."""
    with suppress(ValueError, KeyError, TypeError, AttributeError):
        return str(answer.json()["error"]["code"])
    return ""


class Session:
    """A reviewer's clients (one per app process) and its request loop with retries."""

    def __init__(self, reviewer: Reviewer, bases: list[str], clock: Callable[[], float]) -> None:
        self.reviewer = reviewer
        self.clock = clock
        headers = {"Authorization": f"Bearer {reviewer.token}"}
        self.clients = [httpx.Client(base_url=b, headers=headers, timeout=TIMEOUT) for b in bases]
        self.random = random.Random(reviewer.index)

    def close(self) -> None:
        """Close every client."""
        for client in self.clients:
            client.close()

    def request(
        self, op: str, path: str, body: dict[str, Any] | None = None, miss_id: int | None = None
    ) -> tuple[httpx.Response | None, int]:
        """POST ``path`` until an answer that is not a 5xx; (that answer or None when it
        never came, the number of attempts)."""
        began = self.clock()
        backoff = BACKOFF_FIRST_S
        attempts = 0
        while True:
            attempts += 1
            process = self.reviewer.turn % len(self.clients)
            self.reviewer.turn += 1
            sent = self.clock()
            answer: httpx.Response | None = None
            try:
                answer = self.clients[process].post(path, json=body)
                outcome = str(answer.status_code)
                if answer.status_code >= 400:
                    outcome += f" {error_code(answer)}".rstrip()
            except httpx.TransportError as error:
                outcome = type(error).__name__
            attempt = Attempt(
                self.reviewer.index, op, process, sent, self.clock(), outcome, miss_id
            )
            self.reviewer.attempts.append(attempt)
            if not attempt.failed:
                return answer, attempts
            if self.clock() - began > GIVE_UP_S:
                return None, attempts
            # Jittered exponential backoff; the next attempt goes to the next process.
            time.sleep(backoff * (0.5 + self.random.random()))
            backoff = min(backoff * 2, BACKOFF_MAX_S)


def label_once(session: Session, triage_id: int, think: tuple[float, float]) -> bool:
    """Claim a miss, read it for a while, label it at its version. False when the queue is
    empty (or the claim never got an answer)."""
    reviewer = session.reviewer
    answer, _ = session.request("claim", f"/api/v1/triages/{triage_id}/claim")
    if answer is None or answer.status_code != 200:
        return False
    reviewer.claims += 1
    miss = answer.json()
    miss_id, version = int(miss["id"]), int(miss["version"])
    category = CAUSES[(miss_id + reviewer.index) % len(CAUSES)]
    time.sleep(session.random.uniform(*think))
    body = {"category": category, "note": "", "version": version}
    answer, attempts = session.request("label", f"/api/v1/misses/{miss_id}/label", body, miss_id)
    now = session.clock()

    def acknowledge(how: str) -> None:
        reviewer.acknowledged.append(
            Acknowledged(
                reviewer.index, reviewer.user_id, miss_id, version, category, now, how, attempts
            )
        )

    if answer is not None and answer.status_code == 200:
        acknowledge("200")
        return True
    unresolved = {"miss_id": miss_id, "version": version, "category": category}
    if answer is None:
        reviewer.unresolved.append({**unresolved, "outcome": "no answer"})
        return True
    code = error_code(answer)
    if answer.status_code == 409 and code == "stale_version" and attempts > 1:
        current = answer.json()["error"]["details"]["current"]
        mine = {"state": "labelled", "category": category, "note": "", "version": version + 1}
        if current == mine:
            acknowledge("409 own label")
            return True
    # Refused (403 lease_not_held: the lease expired and someone else took the miss; 409 by
    # someone else's change): nothing stored for this reviewer; the checker confirms it.
    reviewer.unresolved.append({**unresolved, "outcome": f"{answer.status_code} {code}"})
    return True


def review(
    reviewer: Reviewer,
    bases: list[str],
    triage_id: int,
    think: tuple[float, float],
    clock: Callable[[], float],
    stop: threading.Event,
) -> None:
    """A reviewer's loop until ``stop``: claim, think, label. The miss in hand is finished
    (labelled) even after ``stop``, so no lease is left behind."""
    session = Session(reviewer, bases, clock)
    try:
        while not stop.is_set():
            if not label_once(session, triage_id, think):
                stop.wait(EMPTY_WAIT_S)
    except Exception as error:  # reported with the results
        reviewer.failure = f"{type(error).__name__}: {error}"
    finally:
        session.close()
