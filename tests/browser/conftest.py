"""Browser tests: Debian's Chromium driven by Playwright against a real server process.

Never ``playwright install``: the browser is /usr/bin/chromium (.ci/run installs it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

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
