"""Browser tests: Debian's Chromium driven by Playwright against a real server process.

Never ``playwright install``: the browser is /usr/bin/chromium (.ci/run installs it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.live import free_port

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


@pytest.fixture(scope="session")
def base_url(pytestconfig: pytest.Config) -> str | None:
    """pytest-playwright's own ``base_url`` (used without pytest-base-url) is a session
    fixture defined as an instance method, which pytest 9 warns about
    (PytestRemovedIn10Warning). The same fixture as a function; the tests use full URLs."""
    value = pytestconfig.getoption("--base-url", None) or pytestconfig.getini("base_url")
    return str(value) if value else None


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing (.ci/run installs the chromium package)")
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y chromium)")
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """`misstriage demo` on a free port in ``tmp_path`` (its database in ``tmp_path/var``):
    its URL and what it printed (the accounts, the links)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    log = tmp_path / "demo.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "demo", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail(f"the demo did not start: {log.read_text()[-2000:]}")
        yield url, log.read_text()
    finally:
        process.terminate()
        process.wait(10)
    assert (tmp_path / "var" / "demo.db").exists()
