"""Screenshots of browser tests, kept for people to look at."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Page

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


def screenshot(page: Any, name: str, *, full_page: bool = True, folder: Path | None = None) -> Path:
    """Save a screenshot under var/screenshots/ (or ``folder``), kept for people to look at;
    the viewport alone with ``full_page=False``, as a person sees the page (sticky bars in
    place)."""
    folder = folder or SCREENSHOTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


SHOTS = Path("/tmp/shots-a")


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
