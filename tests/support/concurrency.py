"""Requests released at one moment: threads that wait on a barrier, then each send one
request, for the race tests against a real server."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def at_once(sends: Sequence[Callable[[], T]], *, seconds: float = 60) -> list[T]:
    """Each of ``sends`` called from a thread of its own, all released together; their
    answers in the order given. An exception in a thread, or a thread still waiting after
    ``seconds``, fails the caller."""
    barrier = threading.Barrier(len(sends))
    answers: list[T | None] = [None] * len(sends)
    failures: list[BaseException] = []

    def one(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            answers[i] = sends[i]()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(sends))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds)
    assert not failures, failures
    assert all(a is not None for a in answers), "a request did not come back in time"
    return [a for a in answers if a is not None]


def at_once_n(n: int, send: Callable[[int], T], *, seconds: float = 60) -> list[T]:
    """``send(i)`` for i in 0..n-1, released together (``at_once``)."""
    return at_once([lambda i=i: send(i) for i in range(n)], seconds=seconds)
