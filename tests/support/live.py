"""A real server process (``misstriage serve``) on a free loopback port, for browser and
concurrency tests."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support import tracebacks

#: Under pytest-xdist, worker gwN draws its ports from a block of its own below the kernel's
#: ephemeral range: two workers never pick the same port between the check and the bind.
WORKER_PORTS, WORKER_BLOCK = 20_000, 500


def free_port() -> int:
    """A loopback port nothing listens on (the kernel's pick, or the xdist worker's block)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])
    low = WORKER_PORTS + WORKER_BLOCK * (int(worker[2:]) % 25)
    for port in random.sample(range(low, low + WORKER_BLOCK), WORKER_BLOCK):
        if _bind_or_none(port):
            return port
    raise RuntimeError(f"no free port in {low}-{low + WORKER_BLOCK - 1}")


def _bind_or_none(port: int) -> int | None:
    """``port`` if it can be bound on loopback now, else None."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return None
        return port


def healthy_within(url: str, *, seconds: float) -> bool:
    """Whether the server at ``url`` answers ``/healthz`` with 200 within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            time.sleep(0.2)
    return False


class LiveServer:
    def __init__(
        self,
        database_url: str,
        tmp: Path,
        *,
        secret: str,
        workers: int = 1,
        env: dict[str, str] | None = None,
        log_name: str = "server.log",
    ) -> None:
        #: Set by a test that provokes tracebacks on purpose (a database stopped under it).
        self.expect_tracebacks = False
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / log_name
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "MISSTRIAGE_ENVIRONMENT": "test",
            "MISSTRIAGE_SECRET_KEY": secret,
            **(env or {}),
        }
        self.env = env
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "app",
                    "serve",
                    "--port",
                    str(self.port),
                    "--workers",
                    str(workers),
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        if not healthy_within(self.url, seconds=60):
            self.stop()
            raise RuntimeError(f"the server did not start: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        """Stop the server; AssertionError when its log holds a traceback the test did not
        expect (``expect_tracebacks``)."""
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        if not self.expect_tracebacks:
            tracebacks.check_log(self.log, what="the server")
