"""``misstriage serve --workers 2`` on Linux: a listening socket per worker (SO_REUSEPORT),
so keep-alive connections opened together are shared between the workers instead of all
landing on whichever woke first; a worker that dies is replaced; a port in use is refused
with one line; SIGTERM stops the workers and the parent. Real processes on loopback."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from app.cli.workers import balances
from tests.support.live import LiveServer, healthy_within
from tests.support.service import TEST_SECRET

pytestmark = pytest.mark.skipif(not balances(), reason="SO_REUSEPORT spreads connections on Linux")

CONNECTIONS = 32


@pytest.fixture
def server(sqlite_template: Path, tmp_path: Path) -> Iterator[LiveServer]:
    database = tmp_path / "misstriage.db"
    shutil.copy(sqlite_template, database)
    live = LiveServer(f"sqlite:///{database}", tmp_path, secret=TEST_SECRET, workers=2)
    try:
        yield live
    finally:
        live.stop()


def _workers(live: LiveServer) -> list[psutil.Process]:
    """The worker processes (multiprocessing's resource tracker is a child too: it holds
    no socket of the port)."""
    return [
        child
        for child in psutil.Process(live.process.pid).children()
        if "spawn_main" in " ".join(child.cmdline())
    ]


def _established(live: LiveServer) -> Counter[int]:
    """Connections to the server's port each worker holds, by pid."""
    held: Counter[int] = Counter()
    for worker in _workers(live):
        for connection in worker.net_connections(kind="tcp"):
            if connection.status == "ESTABLISHED" and connection.laddr.port == live.port:
                held[worker.pid] += 1
    return held


def _until(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def test_connections_opened_together_are_shared_by_the_workers(server: LiveServer) -> None:
    # a burst, as reviewers (or a proxy's pool) open them: with one shared socket, the
    # worker that wakes first accepts every connection waiting
    burst = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(CONNECTIONS)]
    try:
        assert _until(lambda: sum(_established(server).values()) == CONNECTIONS, 20)
        held = _established(server)
        assert len(held) == 2, held
        # by the kernel's hash each connection goes to either socket: fewer than 4 of 32 on
        # one worker has a probability of about 3 in a million
        assert min(held.values()) >= 4, held
        for connection in burst:  # and each is served
            connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            assert connection.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        for connection in burst:
            connection.close()


def test_a_worker_that_dies_is_replaced_and_the_port_keeps_answering(server: LiveServer) -> None:
    first = {worker.pid for worker in _workers(server)}
    assert len(first) == 2
    victim = sorted(first)[0]
    psutil.Process(victim).send_signal(signal.SIGKILL)
    for _ in range(20):  # new connections: each lands on either socket
        with httpx.Client(timeout=10) as client:
            assert client.get(f"{server.url}/healthz").status_code == 200
    assert _until(lambda: len(_workers(server)) == 2 and victim not in _pids(server), 30)
    assert server.process.poll() is None
    assert "ended (exit status -9): starting another" in server.log.read_text()


def _pids(live: LiveServer) -> set[int]:
    return {worker.pid for worker in _workers(live)}


def test_a_port_in_use_is_refused_in_one_line(server: LiveServer) -> None:
    for workers in ("2", "1"):
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "app",
                "serve",
                "--port",
                str(server.port),
                "--workers",
                workers,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=server.env,
        )
        assert second.returncode != 0
        assert "Traceback" not in second.stderr
        assert str(server.port) in second.stderr  # the address it could not take
    assert healthy_within(server.url, seconds=5)  # the first server still serves


def test_sigterm_stops_the_workers_then_the_parent(server: LiveServer) -> None:
    workers = _workers(server)
    assert len(workers) == 2
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(30) == 0
    _gone, alive = psutil.wait_procs(workers, timeout=10)
    assert alive == []
    assert "Finished server process" in server.log.read_text()


def test_several_workers_on_sqlite_are_warned_against(server: LiveServer) -> None:
    started = server.log.read_text()
    assert "warning: SQLite writes one transaction at a time, so 2 processes" in started
    assert "Use --workers 1 with SQLite, or PostgreSQL" in started
