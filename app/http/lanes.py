"""The queue's own lane of threads: claim, label, renew, release and skip run on a few
threads per app process, apart from the pool that runs every other request.

Every thread of a process takes turns on one interpreter lock. With 32 reviewers working
back to back, FastAPI's pool (40 threads) ran sixteen queue requests at once per process,
and the lock changed hands between them at every database round trip: measured with
``benchmarks/queue_http.py`` (PostgreSQL, 2 workers), 272 labels/s with a p95 of 107-134 ms
and the cores a third idle; with four threads, 418-442 labels/s, p95 52-61 ms and less CPU
per request. Requests beyond the lane's threads wait in the event loop, which costs nothing.
A separate lane, not a smaller pool for everything: a slow import or export holding threads
never stalls a reviewer's claim, and the reverse.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import typing
import weakref
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, ParamSpec, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter
from fastapi import Depends, Request

from app.http.deps import settings_of

P = ParamSpec("P")
T = TypeVar("T")


class Lane:
    """A number of threads that run blocking calls for the event loop."""

    def __init__(self, limiter: CapacityLimiter) -> None:
        self._limiter = limiter

    async def run(self, call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """``call(*args, **kwargs)`` on one of the lane's threads (its errors raised here)."""
        return await anyio.to_thread.run_sync(
            functools.partial(call, *args, **kwargs), limiter=self._limiter
        )


#: One limiter per event loop (a worker has one; tests may run several, one after another).
_LANES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Lane] = weakref.WeakKeyDictionary()


async def queue_lane(request: Request) -> Lane:
    """The queue's lane of the running event loop, of ``queue_threads`` threads."""
    loop = asyncio.get_running_loop()
    lane = _LANES.get(loop)
    if lane is None:
        lane = Lane(CapacityLimiter(settings_of(request).queue_threads))
        _LANES[loop] = lane
    return lane


QueueLaneDep = Annotated[Lane, Depends(queue_lane)]

#: The parameter through which FastAPI hands an ``on_queue_lane`` route its lane.
LANE_PARAMETER = "queue_lane_"


def on_queue_lane(endpoint: Callable[..., T]) -> Callable[..., Coroutine[Any, Any, T]]:
    """A route that runs on the queue's lane: put it under ``@router.post(...)``. FastAPI
    sees a coroutine function with ``endpoint``'s parameters (and the lane's dependency); it
    solves them in the event loop as always, then ``endpoint``, a plain ``def``, runs on one
    of the lane's threads instead of FastAPI's pool."""
    hints = typing.get_type_hints(endpoint, include_extras=True)
    signature = inspect.signature(endpoint)
    parameters = [
        parameter.replace(annotation=hints.get(name, parameter.annotation))
        for name, parameter in signature.parameters.items()
    ]
    parameters.append(
        inspect.Parameter(LANE_PARAMETER, inspect.Parameter.KEYWORD_ONLY, annotation=QueueLaneDep)
    )

    async def route(**values: Any) -> T:
        lane: Lane = values.pop(LANE_PARAMETER)
        return await lane.run(endpoint, **values)

    # not functools.wraps: FastAPI would follow __wrapped__ to the plain def and run this
    # coroutine function as if it were one
    route.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=parameters, return_annotation=hints.get("return", signature.return_annotation)
    )
    # and the endpoint's annotations, resolved (what get_type_hints of the route tells)
    route.__annotations__ = {p.name: p.annotation for p in parameters} | {
        "return": hints.get("return", signature.return_annotation)
    }
    for attribute in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(route, attribute, getattr(endpoint, attribute))
    return route
