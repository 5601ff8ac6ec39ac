"""The download slots: per user and per process, given back however a download ends, and a
client that stops reading is let go of after a while (app/http/downloads.py)."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator

import anyio
import pytest
from starlette.types import Message

from app.http import downloads
from app.http.downloads import Download, DownloadSlots
from app.services.errors import TooMany


def test_bounds_per_user_and_in_all() -> None:
    slots = DownloadSlots(per_user=2, most=3)
    taken = [slots.take(1), slots.take(1)]
    with pytest.raises(TooMany) as refused:
        slots.take(1)
    assert refused.value.code == "too_many_downloads"
    assert refused.value.headers == {"Retry-After": str(downloads.RETRY_AFTER_S)}
    taken.append(slots.take(2))
    with pytest.raises(TooMany):
        slots.take(3)  # the process's bound, though user 3 runs none
    taken[0].give_back()
    taken[0].give_back()  # twice: counted once
    assert (slots.running(1), slots.running()) == (1, 2)
    taken.append(slots.take(3))
    for slot in taken:
        slot.give_back()
    assert slots.running() == 0


def _endless() -> Iterator[str]:
    try:
        while True:
            yield "x" * 1000
    finally:
        _endless.closed = True  # type: ignore[attr-defined]


def test_a_client_that_stops_reading_is_let_go(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(downloads, "STALL_S", 0.3)
    slots = DownloadSlots()
    answer = Download(_endless(), slot=slots.take(7), media_type="text/plain")
    sent: list[Message] = []

    async def receive() -> Message:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)
        if len(sent) > 3:  # the client's window is full: its socket takes nothing more
            await anyio.sleep_forever()

    async def serve() -> float:
        started = time.monotonic()
        scope = {"type": "http", "method": "GET", "asgi": {"spec_version": "2.3"}}
        await answer(scope, receive, send)
        return time.monotonic() - started

    # in a thread of its own: a browser test before this one (sync Playwright) may have left
    # its event loop running in this thread
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        took = pool.submit(anyio.run, serve).result()
    assert 0.3 <= took < 5
    assert slots.running() == 0
    assert getattr(_endless, "closed", False)
    assert sent[0]["type"] == "http.response.start"
