"""Compiled passes (numba) over the bytes of large inputs: what polars would do in ten
passes and a join of strings, done in one, where the bytes lie.

It owns the byte-level readers (``scan``: ids, decimals, JSON tokens), the lines of a log
(``lines``: TREC, JSONL hits, ``qid<TAB>doc_id`` pairs), the corpus's hash table (``table``),
the cluster tally of a block of a log (``tally``), of a Parquet log's rows as polars reads
them (``columns``) and as pyarrow reads them with their dictionaries (``dictionary``), the
lines of a corpus (``corpus``) and the ranks of a run's judged documents (``ranks``). All of
it is built ahead of time into one module (``aot_build``, ``app.eval.aot``), which the drivers
call through ``app.eval.passes``, numba's own compilation where it is not built. It never
decides a figure the careful readers would not: what it is not sure to read as they do, it
refuses, and the caller reads the input their way (``app.eval.log_fast``). Importing it
imports numba: only numba's compilation and the build do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar, cast

from numba import njit
from numba.core import config

from app.eval.aot import cache_folder

_F = TypeVar("_F", bound=Callable[..., Any])

#: Where numba keeps what it compiles (``app.eval.aot.cache_folder``).
_CACHE_DIR = cache_folder()


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
