"""Uploaded files as temporary paths for app.eval, and their names for error messages."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import Request, UploadFile

from app.eval.errors import printable_name
from app.eval.textio import set_decompression_limit

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


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
    with tempfile.TemporaryDirectory(prefix="misstriage-upload-") as tmp:
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
