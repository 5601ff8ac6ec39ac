"""Downloads that cannot starve the service: bounds on the streams running at once, a
response that gives its slot back however the stream ends, and an end for a client that
stops reading.

A streamed download holds no database connection while it waits for its client (its rows
are read a page at a time, each page in a session of its own: app/services/triage/backlog.py);
what it does hold is a socket and a little memory. So one user may have ``MAX_PER_USER``
downloads running in a process at once and the process ``MAX_RUNNING``; past either, the
answer is 429 ``too_many_downloads`` with Retry-After. The slot is taken before the download's
first query (a refused one costs nothing), and a download whose client has taken nothing for
``STALL_S`` is ended, its slot given back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import suppress
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from app.services.errors import TooMany

#: Streams one user may have running in one app process at once.
MAX_PER_USER = 4
#: Streams one app process runs at once, everyone's together.
MAX_RUNNING = 64
#: What a refused download is told to wait, in seconds.
RETRY_AFTER_S = 10
#: A download whose client has not taken a piece for this long is ended.
STALL_S = 300.0
log = logging.getLogger(__name__)


class DownloadSlots:
    """The running downloads of one process, counted per user and in all."""

    def __init__(self, per_user: int = MAX_PER_USER, most: int = MAX_RUNNING) -> None:
        self.per_user, self.most = per_user, most
        self._lock = threading.Lock()
        self._running: dict[int, int] = {}
        self._total = 0

    def take(self, user_id: int) -> Slot:
        """One more download of ``user_id``; 429 ``too_many_downloads`` past a bound."""
        with self._lock:
            running = self._running.get(user_id, 0)
            if running >= self.per_user:
                raise TooMany(
                    f"{running} of your downloads are still running (at most {self.per_user} "
                    "at once): wait for one to finish",
                    code="too_many_downloads",
                    retry_after=RETRY_AFTER_S,
                )
            if self._total >= self.most:
                raise TooMany(
                    f"the server is sending {self._total} downloads already: try again soon",
                    code="too_many_downloads",
                    retry_after=RETRY_AFTER_S,
                )
            self._running[user_id] = running + 1
            self._total += 1
        return Slot(self, user_id)

    def _give_back(self, user_id: int) -> None:
        with self._lock:
            left = self._running.get(user_id, 0) - 1
            if left > 0:
                self._running[user_id] = left
            else:
                self._running.pop(user_id, None)
            self._total = max(0, self._total - 1)

    def running(self, user_id: int | None = None) -> int:
        """The downloads running now: ``user_id``'s, or everyone's."""
        with self._lock:
            return self._total if user_id is None else self._running.get(user_id, 0)


class Slot:
    """One taken download slot; ``give_back`` is idempotent (the route gives it back when
    it fails before its answer exists, the answer when it ends)."""

    def __init__(self, slots: DownloadSlots, user_id: int) -> None:
        self._slots, self._user_id = slots, user_id
        self._lock = threading.Lock()
        self._held = True

    def give_back(self) -> None:
        with self._lock:
            if not self._held:
                return
            self._held = False
        self._slots._give_back(self._user_id)


_made = threading.Lock()


def slots_of(app: Any) -> DownloadSlots:
    """The application's download slots (one set per app, made at first use)."""
    with _made:
        slots = getattr(app.state, "download_slots", None)
        if slots is None:
            slots = app.state.download_slots = DownloadSlots()
        return slots


class Download(StreamingResponse):
    """A streamed answer that holds a download slot until it ends: sent, failed, its client
    gone, or its client stalled for ``STALL_S`` (the slot is given back, and the body's
    iterator closed, in ``__call__``'s ``finally``, which runs however the response ends)."""

    def __init__(self, content: Iterator[str], *, slot: Slot, **kwargs: Any) -> None:
        self._slot, self._content = slot, content
        super().__init__(content, **kwargs)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_or_stall(message: Message) -> None:
            with anyio.fail_after(STALL_S):
                await send(message)

        try:
            await super().__call__(scope, receive, send_or_stall)
        except TimeoutError:
            # the client took nothing for STALL_S: the answer ends unfinished (the server
            # closes the connection), the slot goes to another download
            log.warning("download ended: its client took nothing for %.0f s", STALL_S)
        finally:
            self._slot.give_back()
            close = getattr(self._content, "close", None)
            if close is not None:
                # its finally blocks run now, not when it is collected; ValueError: still
                # running in its worker thread, where it ends
                with suppress(ValueError):
                    close()
