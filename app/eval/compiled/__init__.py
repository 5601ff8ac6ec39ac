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

from collections.abc import Callable
from typing import Any, TypeVar, cast

from numba import njit

_F = TypeVar("_F", bound=Callable[..., Any])


def compiled(function: _F) -> _F:
    """``function`` compiled by numba on its first call, kept on disk (``cache``), run
    without the GIL; array indexes not checked (every index is in range by construction)."""
    jitted = njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")(function)
    return cast(_F, jitted)
