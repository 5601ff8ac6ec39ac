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
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


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


def screenshot(page: Any, name: str, *, full_page: bool = True, folder: Path | None = None) -> Path:
    """Save a screenshot under var/screenshots/ (or ``folder``), kept for people to look at;
    the viewport alone with ``full_page=False``, as a person sees the page (sticky bars in
    place)."""
    folder = folder or SCREENSHOTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
