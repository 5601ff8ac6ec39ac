"""Uploaded files as temporary paths for app.eval, and their names for error messages.

Each request's copies live in a folder ``misstriage-upload-*`` of the temporary directory,
removed when the request ends however it ends (the import done, refused, or its client gone).
A process killed meanwhile (kill -9, out of memory, a power cut) cannot remove its folder, so
every folder holds a lock file its request keeps locked (``flock``: the kernel lets go of it
when the process dies, whatever the cause), and ``sweep_abandoned`` (run at every start-up)
removes the folders whose lock nobody holds: the folders of dead processes, never those of a
live import in another app process sharing the temporary directory.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import Request, UploadFile

from app.eval.errors import printable_name
from app.eval.textio import set_decompression_limit

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
PREFIX = "misstriage-upload-"
LOCK_NAME = ".in-use"
#: A folder without its lock file yet is being made (or is older code's): left alone this long.
UNLOCKED_GRACE_S = 300.0
log = logging.getLogger(__name__)


@dataclass
class SavedUploads:
    paths: list[Path | None]
    #: temporary path -> the name the user uploaded, so errors name the user's file
    names: dict[str, str] = field(default_factory=dict)


async def limit_decompression(request: Request) -> None:
    """A global dependency: every gzip file read while answering this request is bounded by
    the app's settings (async, so that the limit is set in the request's own context, which
    the endpoint's worker thread copies)."""
    set_decompression_limit(request.app.state.settings.decompression_limit())


def _present(upload: UploadFile | None) -> bool:
    return upload is not None and bool(upload.filename)


@contextmanager
def saved_uploads(*uploads: UploadFile | None) -> Iterator[SavedUploads]:
    """Copy each upload (already spooled to disk by the multipart parser) to a named
    temporary file; everything is removed afterwards."""
    # ignore_cleanup_errors: a start-up sweep may have removed the folder just after its unlock
    with (
        tempfile.TemporaryDirectory(prefix=PREFIX, ignore_cleanup_errors=True) as tmp,
        _held(Path(tmp)),
    ):
        saved = SavedUploads(paths=[])
        for index, upload in enumerate(uploads):
            if upload is None or not _present(upload):
                saved.paths.append(None)
                continue
            name = printable_name(upload.filename or f"upload-{index}")
            path = Path(tmp) / f"{index}-{_UNSAFE.sub('_', name)[-100:]}"
            with path.open("wb") as out:
                shutil.copyfileobj(upload.file, out, 1 << 20)
            saved.paths.append(path)
            saved.names[str(path)] = name
        yield saved


@contextmanager
def _held(folder: Path) -> Iterator[None]:
    """Hold the folder's lock while the request uses it (released by the kernel if the
    process dies; ``sweep_abandoned`` removes a folder whose lock is free). The lock file is
    made and locked under another name, then renamed: a sweep never sees it unlocked."""
    making = folder / (LOCK_NAME + ".new")
    fd = os.open(making, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        making.rename(folder / LOCK_NAME)  # the lock goes with the file
        yield
    finally:
        os.close(fd)  # unlocks


def sweep_abandoned(directory: Path | None = None) -> int:
    """Remove the upload folders of processes that died mid-request; how many were removed.
    A folder in use by a live process (its lock held) is left; so is one too new to have its
    lock file yet (within ``UNLOCKED_GRACE_S``)."""
    directory = Path(directory or tempfile.gettempdir())
    removed = 0
    try:
        candidates = [p for p in directory.glob(PREFIX + "*") if p.is_dir() and not p.is_symlink()]
    except OSError:
        return 0
    for folder in candidates:
        try:
            if _abandoned(folder):
                shutil.rmtree(folder)
                removed += 1
        except OSError as exc:  # gone meanwhile, or not ours to remove: left, said once
            log.warning("upload folder %s not swept: %s", folder.name, exc.strerror or exc)
    if removed:
        log.info("removed %d upload folders of requests that died with their process", removed)
    return removed


def _abandoned(folder: Path) -> bool:
    """Whether ``folder`` is a dead request's: ours (a folder of another user of the shared
    temporary directory is never touched), and its lock file free; a folder without a lock
    file only once it is older than ``UNLOCKED_GRACE_S``. The lock file is opened without
    following links or blocking (a FIFO put there must not hang the start-up)."""
    if folder.lstat().st_uid != os.getuid():
        return False
    lock = folder / LOCK_NAME
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return time.time() - folder.stat().st_mtime > UNLOCKED_GRACE_S
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # a live request holds it
    finally:
        os.close(fd)
    return True
