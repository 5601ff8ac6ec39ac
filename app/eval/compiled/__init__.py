"""Compiled passes (numba) over the bytes of large inputs: what polars would do in ten
passes and a join of strings, done in one, where the bytes lie.

It owns the byte-level readers (``scan``: ids, decimals, JSON tokens), the lines of a log
(``lines``: TREC, JSONL hits, ``qid<TAB>doc_id`` pairs), the corpus's hash table (``table``),
the cluster tally of a block of a log (``tally``) and the lines of a corpus (``corpus``). It
never decides a figure the careful readers would not: what it is not sure to read as they do,
it refuses, and the caller reads the input their way (``app.eval.log_fast``). Importing it
imports numba: only the compiled paths do.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from numba import njit
from numba.core import config

_F = TypeVar("_F", bound=Callable[..., Any])
#: A cache folder's name: the first 16 hexadecimal digits of its source's digest.
_DIGEST = re.compile(r"[0-9a-f]{16}")


def _cache_dir() -> str | None:
    """Where what numba compiles is kept: a folder named after the digest of this package's
    source. numba tells a stale copy by its own file's time alone, and a function compiled
    here takes in the functions it calls from the other modules: a change to any module must
    compile them all again. NUMBA_CACHE_DIR, else beside the source, else the user's cache;
    a folder only this user may write to (numba's cache holds pickles, which run code when
    read); the digests of older sources there are removed. None when no folder will do
    (numba's own choice then)."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for source in sorted(here.glob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    name = digest.hexdigest()[:16]
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "misstriage"
    bases = [os.environ.get("NUMBA_CACHE_DIR"), here / "__pycache__" / "numba", user / "numba"]
    for base in bases:
        if not base:
            continue
        folder = Path(base) / name
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not _own(folder) or not os.access(folder, os.W_OK):
                continue
            for older in Path(base).iterdir():
                if older.name != name and _DIGEST.fullmatch(older.name) and _own(older):
                    shutil.rmtree(older, ignore_errors=True)
        except OSError:
            continue
        return str(folder)
    return None


def _own(folder: Path) -> bool:
    """True when ``folder`` is this user's and no one else may write to it."""
    status = folder.stat()
    return status.st_uid == os.geteuid() and not status.st_mode & 0o022


_CACHE_DIR = _cache_dir()


def compiled(function: _F) -> _F:
    """``function`` compiled by numba on its first call, kept on disk (in ``_CACHE_DIR``),
    run without the GIL; array indexes not checked (every index is in range by
    construction)."""
    return _jitted(function, inline="never")


def inlined(function: _F) -> _F:
    """``compiled``, and written into each compiled function that calls it (numba's own
    inlining, before LLVM's): for the small functions called a line, whose call would cost
    more than their work (arrays passed to a call are counted references)."""
    return _jitted(function, inline="always")


def _jitted(function: _F, *, inline: Literal["never", "always"]) -> _F:
    previous = config.CACHE_DIR  # type: ignore[attr-defined]
    config.CACHE_DIR = _CACHE_DIR or previous  # type: ignore[attr-defined]  # read at decoration
    try:
        jitted = njit(
            cache=True, nogil=True, boundscheck=False, error_model="numpy", inline=inline
        )(function)
    finally:
        config.CACHE_DIR = previous  # type: ignore[attr-defined]
    return cast(_F, jitted)
