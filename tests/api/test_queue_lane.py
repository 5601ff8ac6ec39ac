"""The queue's lane (app/http/lanes.py): its calls run on its own threads, at most
``queue_threads`` at once, their errors raised to the caller; the queue's routes answer
through it as before (their behaviour is tested in test_queue_api.py and the review
tests)."""

from __future__ import annotations

import threading
import time
import typing
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import anyio
import pytest
from anyio import CapacityLimiter
from fastapi import Depends, FastAPI, Query
from fastapi.testclient import TestClient

from app.http.lanes import LANE_PARAMETER, Lane, on_queue_lane
from app.settings import Settings

T = TypeVar("T")


def _run(main: Callable[[], Awaitable[T]]) -> T:
    """``anyio.run(main)`` in a thread of its own: a browser test's session (Playwright) may
    keep an event loop running in this one."""
    found: list[T] = []
    failed: list[BaseException] = []

    def target() -> None:
        try:
            found.append(anyio.run(main))
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    if failed:
        raise failed[0]
    return found[0]


def test_a_lane_runs_at_most_its_threads_at_once_and_apart_from_the_loop() -> None:
    lock = threading.Lock()
    running = peak = 0
    threads: set[int] = set()

    def work() -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
            threads.add(threading.get_ident())
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

    loop_thread = _run(main)
    assert peak == 2
    assert loop_thread not in threads  # the work ran on the lane's threads, not the loop's
    assert len(threads) >= 2


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

    assert _run(main) == (2.0, ZeroDivisionError)


@pytest.mark.parametrize("threads", [0, 65])
def test_the_lane_size_is_bounded(threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MISSTRIAGE_QUEUE_THREADS", str(threads))
    with pytest.raises(ValueError, match="queue_threads"):
        Settings()


async def double(value: Annotated[int, Query()]) -> int:
    """A dependency of the lane's test route (module level: the route's annotations are
    resolved in its module, as the app's are)."""
    return 2 * value


def test_a_route_on_the_lane_gets_its_parameters_and_runs_off_the_event_loop() -> None:
    app = FastAPI()
    app.state.settings = Settings(queue_threads=1)

    @app.post("/things/{thing_id}")
    @on_queue_lane
    def handle(thing_id: int, doubled: Annotated[int, Depends(double)]) -> dict[str, object]:
        """A plain def on the lane."""
        return {"thing": thing_id, "doubled": doubled, "thread": threading.current_thread().name}

    with TestClient(app) as client:
        answer = client.post("/things/7", params={"value": 21})
        schema = client.get("/openapi.json").json()
    assert answer.status_code == 200
    body = answer.json()
    assert (body["thing"], body["doubled"]) == (7, 42)
    assert body["thread"] != threading.main_thread().name
    operation = schema["paths"]["/things/{thing_id}"]["post"]
    assert operation["description"] == "A plain def on the lane."
    names = {p["name"] for p in operation["parameters"]}
    assert names == {"thing_id", "value"}  # the lane is not a parameter of the API
    assert LANE_PARAMETER not in names
    assert handle.__name__ == "handle"
    hints = typing.get_type_hints(handle, include_extras=True)  # the endpoint's, resolved
    assert hints["thing_id"] is int
    assert hints["return"] == dict[str, object]
