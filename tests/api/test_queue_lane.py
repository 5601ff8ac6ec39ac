"""The queue's lane (app/http/lanes.py): its calls run on its own threads, at most
``queue_threads`` at once, their errors raised to the caller; the queue's routes answer
through it as before (their behaviour is tested in test_queue_api.py and the review
tests)."""

from __future__ import annotations

import threading
import time

import anyio
import pytest
from anyio import CapacityLimiter

from app.http.lanes import Lane
from app.settings import Settings


def test_a_lane_runs_at_most_its_threads_at_once_and_apart_from_the_loop() -> None:
    lock = threading.Lock()
    running = peak = 0
    threads: set[str] = set()

    def work() -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
            threads.add(threading.current_thread().name)
        time.sleep(0.05)
        with lock:
            running -= 1
        return threading.get_ident()

    async def main() -> int:
        lane = Lane(CapacityLimiter(2))
        async with anyio.create_task_group() as group:
            for _ in range(8):
                group.start_soon(lane.run, work)
        return threading.get_ident()

    loop_thread = anyio.run(main)
    assert peak == 2
    assert threading.main_thread().name not in threads
    assert loop_thread == threading.get_ident()  # the loop stayed here; the work went out


def test_a_lane_raises_its_calls_errors_and_passes_arguments() -> None:
    def divide(a: int, *, by: int) -> float:
        return a / by

    async def main() -> tuple[float, type[BaseException] | None]:
        lane = Lane(CapacityLimiter(1))
        value = await lane.run(divide, 6, by=3)
        try:
            await lane.run(divide, 1, by=0)
        except ZeroDivisionError as exc:
            return value, type(exc)
        return value, None

    assert anyio.run(main) == (2.0, ZeroDivisionError)


@pytest.mark.parametrize("threads", [0, 65])
def test_the_lane_size_is_bounded(threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MISSTRIAGE_QUEUE_THREADS", str(threads))
    with pytest.raises(ValueError, match="queue_threads"):
        Settings()
