"""The compiled passes as their drivers call them: the functions of ``app.eval.compiled``
that read logs, corpora and runs, and the codes they answer in, without numba when the
passes are built ahead of time.

``log_pass()`` gives the functions a log's cluster tally (``log_fast``, ``log_parquet``)
and a corpus's compiled read (``cluster_corpus``) call: from the module built ahead of time
(``app.eval.aot.load_passes``: loaded in a millisecond, numba not loaded), else numba's own
(compiled on first use: its start and cache take some 0.5-1 s). Both are the same source,
so they give the same answers. The passes' codes (Python constants, which the built module
does not hold) are copied here, tested equal to the passes' own.

This module imports neither numba nor numpy.
"""

from __future__ import annotations

from types import ModuleType, SimpleNamespace
from typing import Any

from app.eval.aot import load_passes
from app.eval.conventions import Order

#: What a pass answers (``compiled.lines``, ``compiled.corpus``).
DONE = 0
REFUSED = 1
#: A log's format (``compiled.lines``).
TREC = 0
JSONL = 1
#: The ranking order, as the passes number it (``compiled.lines``).
ORDER_CODES = {Order.TREC_EVAL: 0, Order.RANK: 1, Order.FILE: 2}
#: The rows of a thread's scratch of lines (``compiled.lines``).
LINE_FIELDS = 12
#: A tally's counters (``compiled.tally``).
Q_QUERIES, Q_LINES, Q_DROPPED, Q_SHOWN, Q_EPOCH = range(Q_COUNTERS := 5)
#: The most lines of one query the tally holds (``compiled.tally``).
MAX_QUERY_LINES = 1 << 20
#: What the bytes of a column's ids hold (``compiled.columns``).
BLANK_OR_CONTROL = 1
PAST_ASCII = 2
#: The rows of a corpus block's documents (``compiled.corpus``).
(
    C_ID_START,
    C_ID_END,
    C_CLUSTER_START,
    C_CLUSTER_END,
    C_TITLE_CHARS,
    C_TEXT_CHARS,
) = range(CORPUS_FIELDS := 6)

#: The log pass's functions: the name each is exported as (the module built ahead of time
#: holds one name space) and its module and name in ``app.eval.compiled``.
LOG_EXPORTS = {
    "tally_rows": ("columns", "tally_rows"),
    "tally_block": ("tally", "tally_block"),
    "inline_views": ("columns", "inline_views"),
    "strings": ("columns", "strings"),
    "row_query_start": ("columns", "query_start"),
    "last_row_query_start": ("columns", "last_query_start"),
    "line_query_cut": ("lines", "query_cut"),
    "last_line_query_start": ("lines", "last_query_start"),
    "corpus_block": ("corpus", "corpus_block"),
    "corpus_table": ("table", "corpus_table"),
    "add_new": ("table", "add_new"),
    "entries": ("dictionary", "entries"),
    "look_up_entries": ("dictionary", "look_up_entries"),
    "query_bounds": ("dictionary", "query_bounds"),
    "tally_indices": ("dictionary", "tally_indices"),
}


def log_pass() -> ModuleType | SimpleNamespace:
    """The log pass's functions (``LOG_EXPORTS``' names): built ahead of time, else numba's.
    ImportError or RuntimeError when neither is here (no numba, or nowhere to keep what it
    compiles): the callers then read the way that needs no compiler."""
    module = load_passes()
    if module is not None:
        return module
    return jitted()


def jitted() -> SimpleNamespace:
    """The log pass's functions as numba compiles them on first use."""
    import importlib

    functions: dict[str, Any] = {}
    for name, (module, function) in LOG_EXPORTS.items():
        functions[name] = getattr(importlib.import_module(f"app.eval.compiled.{module}"), function)
    return SimpleNamespace(**functions)
