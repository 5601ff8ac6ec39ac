"""`misstriage demo` on a free port in a temporary folder: log in with the printed
credentials in Chromium and label one miss."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.live import free_port


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[str, str]]:
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


def test_demo_logs_in_and_labels_one_miss(page: Page, demo: tuple[str, str]) -> None:
    url, printed = demo
    account = re.search(r"reviewer\s+(\S+)\s+password\s+(\S+)", printed)
    review = re.search(r"(http://\S+/review)", printed)
    assert account is not None, printed
    assert review is not None, printed
    email, password = account.groups()
    assert review.group(1).startswith(url)
    page.goto(review.group(1))
    page.fill('input[name="email"]', email)
    page.fill('input[name="password"]', password)
    page.keyboard.press("Enter")
    expect(page.locator("#query-text")).to_be_visible()
    page.keyboard.press("2")
    expect(page.locator("#message")).to_contain_text("Saved:")
    expect(page.locator("#progress")).to_contain_text("mine 1")
