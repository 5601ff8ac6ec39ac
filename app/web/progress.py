"""The server's side of an upload's progress: while a form import reads its file, the page
polls how much the server has read (in this process; another worker answers "importing")."""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from app.http.deps import ReviewerDep

router = APIRouter(include_in_schema=False)

#: Imports remembered at once (the oldest are forgotten first), and for how long.
MAX_TRACKED = 256
KEEP_SECONDS = 600
_ID = re.compile(r"[0-9a-f]{32}")


@dataclass
class Progress:
    user_id: int
    total: int
    read: int = 0
    stage: str = "reading"
    started: float = 0.0


_lock = threading.Lock()
_tracked: OrderedDict[str, Progress] = OrderedDict()


def new_import_id() -> str:
    """A fresh id for one rendering of an upload form (the form sends it back)."""
    return secrets.token_hex(16)


@contextmanager
def tracking(
    import_id: str, user_id: int | None, paths: list[Path | None]
) -> Iterator[Callable[[int], None] | None]:
    """Track the reading of ``paths`` under ``import_id``; yields the progress callback the
    readers take (None when the form sent no usable id)."""
    if user_id is None or not _ID.fullmatch(import_id):
        yield None
        return
    total = sum(p.stat().st_size for p in paths if p is not None)
    entry = Progress(user_id=user_id, total=total, started=time.monotonic())
    with _lock:
        _tracked[import_id] = entry
        while len(_tracked) > MAX_TRACKED:
            _tracked.popitem(last=False)

    def advance(size: int) -> None:
        entry.read += size

    try:
        yield advance
    finally:
        entry.stage = "done"


def _megabytes(n: int) -> str:
    return f"{n / 1048576:,.1f} MB"


def describe(entry: Progress | None) -> str:
    """One honest sentence: what this process knows of the import."""
    if entry is None:
        return "The server is importing the file."
    if entry.stage == "done":
        return "The server has finished with the file."
    if entry.total and entry.read < entry.total:
        share = 100 * entry.read // entry.total
        return (
            f"The server is reading the file: {_megabytes(entry.read)} of "
            f"{_megabytes(entry.total)} ({share}%) so far."
        )
    return "The server has read the file; ranking and saving it."


@router.get("/imports/{import_id}/progress", name="import_progress")
def import_progress(import_id: str, principal: ReviewerDep) -> PlainTextResponse:
    """Plain text for the upload form's status line (set as text, never as HTML)."""
    now = time.monotonic()
    with _lock:
        for key in [k for k, e in _tracked.items() if now - e.started > KEEP_SECONDS]:
            del _tracked[key]
        entry = _tracked.get(import_id)
    if entry is not None and entry.user_id != principal.user.id:
        entry = None  # someone else's import: nothing to say
    return PlainTextResponse(describe(entry), headers={"Cache-Control": "no-store"})
