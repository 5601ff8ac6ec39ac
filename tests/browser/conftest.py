"""Browser tests: Debian's Chromium driven by Playwright against a real server process.

Never ``playwright install``: the browser is /usr/bin/chromium (.ci/run installs it).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import TEST_SECRET

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing (.ci/run installs the chromium package)")
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y chromium)")
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LiveServer:
    def __init__(self, database_url: str, tmp: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "server.log"
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "MISSTRIAGE_ENVIRONMENT": "test",
            "MISSTRIAGE_SECRET_KEY": TEST_SECRET,
        }
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "app", "serve", "--port", str(self.port)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the server did not start: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture
def live_server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    server = LiveServer(database_url, tmp_path)
    yield server
    server.stop()


def screenshot(page: Any, name: str) -> Path:
    """Save a full-page screenshot under var/screenshots/ (kept for people to look at)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
