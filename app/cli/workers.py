"""``misstriage serve --workers N``: N uvicorn workers, each accepting on its own socket.

Uvicorn's own supervisor hands every worker one shared listening socket. A worker's event
loop, once woken, accepts every connection waiting, so keep-alive clients that connect
together (a proxy's upstream pool, reviewers opening the review page at nine) can all land
on one worker while the other idles: 32 reviewers with ``benchmarks/queue_http.py`` left
12.9 s of CPU on one worker and 3.8 s on the other, and the busy one set everyone's
latency. Here the parent binds one listening socket per worker, all on the same address
with ``SO_REUSEPORT``, and the kernel gives each new connection to one of them by its
address hash: an even share, whoever is awake. The parent keeps the sockets open, so
connections wait in a socket's backlog while its worker restarts.

A worker that dies is started again on its socket; SIGINT or SIGTERM stops the workers
(each finishes its requests) and then the parent. Where SO_REUSEPORT does not spread
connections (it does on Linux), ``serve`` keeps uvicorn's supervisor.
"""

from __future__ import annotations

import errno
import logging
import multiprocessing
import signal
import socket
import sys
import threading
from typing import Any

logger = logging.getLogger("misstriage.workers")

#: uvicorn's exit status for a worker that failed before serving (the app, or the socket):
#: it would fail again at every restart, so the server stops instead.
STARTUP_FAILURE = 3
#: How often the parent looks for dead workers (seconds).
WATCH_INTERVAL = 0.5


def balances() -> bool:
    """Whether sockets sharing a port with SO_REUSEPORT share its connections (Linux)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


class PortInUse(Exception):
    """The address is taken by another server (including another misstriage)."""


def bind_group(host: str, port: int, count: int, backlog: int = 2048) -> list[socket.socket]:
    """``count`` listening sockets on ``host:port`` sharing it with SO_REUSEPORT. A plain
    socket binds first and is closed: SO_REUSEPORT would otherwise let this server quietly
    share a port that another misstriage already serves, instead of refusing it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUse("another server listens there") from None
            raise
        port = probe.getsockname()[1]  # port 0: the one the system chose
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            sock.listen(backlog)
            sock.set_inheritable(True)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _worker(options: dict[str, Any], sock: socket.socket) -> None:
    """One worker process: uvicorn serving the app on its own socket (``options``: the
    keyword arguments of ``uvicorn.Config``)."""
    import uvicorn

    config = uvicorn.Config(**options)
    uvicorn.Server(config).run(sockets=[sock])


def serve(options: dict[str, Any], sockets: list[socket.socket]) -> int:
    """Run a worker per socket until SIGINT or SIGTERM, starting again any that dies.
    Returns the exit status: 0, or STARTUP_FAILURE when a worker could not start."""
    spawn = multiprocessing.get_context("spawn")
    stop = threading.Event()
    status = 0

    def start(sock: socket.socket) -> multiprocessing.process.BaseProcess:
        process = spawn.Process(target=_worker, args=(options, sock), name="misstriage-worker")
        process.start()
        logger.info("worker %s started", process.pid)
        return process

    def stopping(_signum: int, _frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, stopping) for sig in (signal.SIGINT, signal.SIGTERM)}
    processes = [start(sock) for sock in sockets]
    try:
        while not stop.wait(WATCH_INTERVAL):
            for slot, process in enumerate(processes):
                if process.is_alive():
                    continue
                process.join()
                if process.exitcode == STARTUP_FAILURE:
                    logger.error("worker %s could not start: stopping", process.pid)
                    status = STARTUP_FAILURE
                    stop.set()
                    break
                logger.warning(
                    "worker %s ended (exit status %s): starting another",
                    process.pid,
                    process.exitcode,
                )
                processes[slot] = start(sockets[slot])
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()  # SIGTERM: uvicorn finishes its requests, then exits
        for process in processes:
            process.join()
        for sock in sockets:
            sock.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status
