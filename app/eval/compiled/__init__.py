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
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from numba import njit
from numba.core import config

_F = TypeVar("_F", bound=Callable[..., Any])


def _cache_dir() -> str | None:
    """Where what numba compiles is kept: a folder named after the digest of this package's
    source. numba tells a stale copy by its own file's time alone, and a function compiled
    here takes in the functions it calls from the other modules: a change to any module must
    compile them all again. NUMBA_CACHE_DIR, else beside the source, else the user's cache;
    None when no folder can be written (numba's own choice then)."""
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
        except OSError:
            continue
        if os.access(folder, os.W_OK):
            return str(folder)
    return None


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
