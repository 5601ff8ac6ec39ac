"""Downloads that cannot starve the service: a bound on each user's streams at once, and a
response that gives its slot back however the stream ends.

A streamed download holds no database connection while it waits for its client (its rows
are read a page at a time, each page in a session of its own: app/services/triage/backlog.py);
what it does hold is a socket and a little memory, so one user may have ``MAX_PER_USER``
downloads running in a process at once, and the next one is answered 429 with Retry-After.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from app.services.errors import TooMany

#: Streams one user may have running in one app process at once.
MAX_PER_USER = 4
#: What a refused download is told to wait, in seconds.
RETRY_AFTER_S = 10


class DownloadSlots:
    """The running downloads of one process, counted per user."""

    def __init__(self, per_user: int = MAX_PER_USER) -> None:
        self.per_user = per_user
        self._lock = threading.Lock()
        self._running: dict[int, int] = {}

    def take(self, user_id: int) -> None:
        """Count one more download of ``user_id``; 429 ``too_many_downloads`` past the bound."""
        with self._lock:
            running = self._running.get(user_id, 0)
            if running >= self.per_user:
                raise TooMany(
                    f"{running} of your downloads are still running (at most {self.per_user} "
                    "at once): wait for one to finish",
                    code="too_many_downloads",
                    retry_after=RETRY_AFTER_S,
                )
            self._running[user_id] = running + 1

    def give_back(self, user_id: int) -> None:
        with self._lock:
            left = self._running.get(user_id, 0) - 1
            if left > 0:
                self._running[user_id] = left
            else:
                self._running.pop(user_id, None)

    def running(self, user_id: int) -> int:
        with self._lock:
            return self._running.get(user_id, 0)

    @contextmanager
    def slot(self, user_id: int) -> Iterator[None]:
        self.take(user_id)
        try:
            yield
        finally:
            self.give_back(user_id)


_made = threading.Lock()


def slots_of(app: Any) -> DownloadSlots:
    """The application's download slots (one set per app, made at first use)."""
    with _made:
        slots = getattr(app.state, "download_slots", None)
        if slots is None:
            slots = app.state.download_slots = DownloadSlots()
        return slots


class Download(StreamingResponse):
    """A streamed answer that holds one of its user's download slots until it ends: sent,
    failed, or its client gone (the slot is given back, and the body's iterator closed, in
    ``__call__``'s ``finally``, which runs however the response ends)."""

    def __init__(
        self, content: Iterator[str], *, slots: DownloadSlots, user_id: int, **kwargs: Any
    ) -> None:
        slots.take(user_id)
        self._slots, self._user_id, self._content = slots, user_id, content
        super().__init__(content, **kwargs)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._slots.give_back(self._user_id)
            close = getattr(self._content, "close", None)
            if close is not None:
                # its finally blocks run now, not when it is collected; ValueError: still
                # running in its worker thread, where it ends
                with suppress(ValueError):
                    close()
