"""The compiled path of a Parquet log's cluster tally (``app.eval.log_fast``).

polars reads the log's columns a batch at a time (its own threads); a thread of this path
reads each batch's ids where polars keeps them, through the Arrow C stream interface
(``nanoarrow``): a column's string views, where its ids lie when none is longer than 12
bytes, or else its ids copied into one buffer of bytes (``compiled.columns.strings``); and
checks its rows as ``app.eval.parquet`` does; the batch's whole queries are then cut in
pieces that two threads tally, as they come free, by the same compiled pass as a text log's
lines (documents found in the corpus by their bytes). A batch's last query goes with the
next.

``Declined`` (the whole log to the careful paths, which word the error or read it) for a row
the careful reader refuses (an id missing, empty, too long or with a blank or a control
character, a score not finite), for a rank beyond 32 bits (the pass holds 32; the careful
path reads 64), for a result without the score (or rank) its order needs, for a query longer
than the pass holds, for ids polars does not hand over as string views, and for a file that
is not plain Parquet (a gzip one: the careful path inflates it).
"""

from __future__ import annotations

import queue
from collections import deque
from collections.abc import Callable, Generator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from app.eval.conventions import Order
from app.eval.parquet import (
    FORBIDDEN_IN_ID,
    MAX_PARQUET_ID_BYTES,
    RunColumns,
    unchecked_batches,
)
from app.eval.passes import (
    BLANK_OR_CONTROL,
    DONE,
    MAX_QUERY_LINES,
    PAST_ASCII,
    log_pass,
)
from app.eval.streaming import ahead
from app.eval.values import INT32_MAX

#: Rows read at once.
PARQUET_ROWS = 250_000
#: The most bytes of one column's ids a batch copies: many rows may share one long id
#: (a Parquet dictionary's), which polars holds once; past this, the careful path reads it.
MAX_BATCH_ID_BYTES = 256 << 20
#: A batch of at least this many rows is tallied in ``PIECES`` pieces, two at a time.
PIECES_FROM = 4_096
PIECES = 4


class Declined(Exception):
    """The compiled path does not read this log (see the module)."""


@dataclass(frozen=True)
class Rows:
    """A batch's rows as the compiled pass takes them: each id column as ``_copied`` gives
    it (its views, or its values end to end and their ends), scores, ranks."""

    qids: np.ndarray
    qid_ends: np.ndarray
    docs: np.ndarray
    doc_ends: np.ndarray
    scores: np.ndarray
    ranks: np.ndarray

    def __post_init__(self) -> None:
        # the pass built ahead of time takes its arrays unchecked (numba's would compile
        # another version): a wrong type or order would be read as garbage, not refused
        for values, dtype in zip(
            (self.qids, self.qid_ends, self.docs, self.doc_ends, self.scores, self.ranks),
            (np.uint8, np.int64, np.uint8, np.int64, np.float64, np.int64),
            strict=True,
        ):
            if values.dtype != dtype or values.ndim != 1 or not values.flags.c_contiguous:
                raise TypeError(f"rows of {values.dtype} {values.shape}: {np.dtype(dtype)} wanted")


#: A worker's tally of rows ``first`` to ``last`` of a batch: (status, the queries' hashes).
TallyFn = Callable[[Rows, int, int], tuple[int, np.ndarray]]


def tally_parquet(
    path: Path,
    *,
    columns: RunColumns,
    order: Order,
    workers: queue.SimpleQueue[TallyFn],
    pool: ThreadPoolExecutor,
    seen: Any,
) -> None:
    """Tally the Parquet log at ``path``, each batch's pieces by whichever thread of
    ``pool`` is free with a worker's tally it takes from ``workers``; each query's hash goes
    to ``seen`` (which raises when one comes twice). Declined: see the module."""
    functions = log_pass()
    needed = {Order.TREC_EVAL: "score", Order.RANK: "rank"}.get(order)
    with path.open("rb") as head:
        if head.read(4) != b"PAR1":  # a gzip Parquet file: the careful path inflates it
            raise Declined("not a plain Parquet file")

    def prepared() -> Generator[tuple[Rows, int]]:
        carry: pl.DataFrame | None = None
        for batch in unchecked_batches(
            path, columns, with_rank=order is Order.RANK, rows=PARQUET_ROWS
        ):
            frame = batch if carry is None else pl.concat([carry, batch])
            rows = _rows(frame, order, needed)
            cut = functions.last_row_query_start(rows.qids, rows.qid_ends, frame.height)
            carry = frame.slice(cut)
            if carry.height > MAX_QUERY_LINES:  # (copied again with every batch it waits)
                raise Declined("a query longer than the pass holds")
            if cut:
                yield rows, cut
        if carry is not None and carry.height:
            yield _rows(carry, order, needed), carry.height

    def tally(rows: Rows, first: int, last: int) -> tuple[int, np.ndarray]:
        worker = workers.get()
        try:
            return worker(rows, first, last)
        finally:
            workers.put(worker)

    def finish(futures: list[Future[tuple[int, np.ndarray]]]) -> None:
        results = [future.result() for future in futures]
        if any(status != DONE for status, _ in results):
            raise Declined("a query longer than the pass holds")
        seen.add_new(np.concatenate([hashes for _, hashes in results]))

    # A batch's pieces are submitted before the batch before is waited for: its last
    # pieces end while this one's start (waited for in turn, one thread idled at each).
    under_way: deque[list[Future[tuple[int, np.ndarray]]]] = deque()
    with ahead(prepared()) as batches:
        for rows, count in batches:
            cuts = [0]
            if count >= PIECES_FROM:
                for j in range(1, PIECES):
                    cut = functions.row_query_start(
                        rows.qids, rows.qid_ends, max(cuts[-1] + 1, count * j // PIECES), count
                    )
                    if cut >= count:
                        break
                    cuts.append(cut)
            cuts.append(count)
            under_way.append([pool.submit(tally, rows, a, b) for a, b in pairwise(cuts)])
            while len(under_way) > 1:
                finish(under_way.popleft())
        while under_way:
            finish(under_way.popleft())


def _rows(frame: pl.DataFrame, order: Order, needed: str | None) -> Rows:
    """``frame``'s rows as the pass takes them; Declined for a row the careful reader
    refuses (it words the error) and for one without the score (or rank) ``order`` needs."""
    qids, qid_ends = _ids(frame.get_column("qid"))
    docs, doc_ends = _ids(frame.get_column("doc_id"))
    score = frame.get_column("score")
    if needed is not None and frame.get_column(needed).null_count():
        raise Declined(f"a result without a {needed}")
    # (the types the pass is built for: its module built ahead of time takes arrays unchecked)
    scores = np.ascontiguousarray(score.fill_null(0.0).to_numpy(writable=True), np.float64)
    if not np.isfinite(scores).all():
        raise Declined("a score that is not a finite number")
    if order is Order.RANK:
        ranks = np.ascontiguousarray(frame.get_column("rank").to_numpy(writable=True), np.int64)
        if len(ranks) and (int(ranks.min()) < -INT32_MAX or int(ranks.max()) > INT32_MAX):
            raise Declined("a rank beyond 32 bits")  # (not by its absolute value: -2^63 has none)
    else:
        ranks = np.zeros(frame.height, np.int64)
    return Rows(qids, qid_ends, docs, doc_ends, scores, ranks)


def _ids(column: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """A column of ids as ``_copied`` gives them; Declined for an id the careful reader
    refuses (``parquet._checked``: empty, too long, a blank or a control character)."""
    values, ends, found = _copied(column)
    if found & BLANK_OR_CONTROL:
        raise Declined("an id with a blank or a control byte")
    if found & PAST_ASCII and column.str.contains(FORBIDDEN_IN_ID).any():
        raise Declined("an id with a blank or a control character")
    return values, ends


def _copied(column: pl.Series) -> tuple[np.ndarray, np.ndarray, int]:
    """A column of ids as the pass reads them (``compiled.columns._span``) and what their
    bytes hold (its BLANK_OR_CONTROL and PAST_ASCII), taken from polars' memory through the
    Arrow C stream interface: the views themselves and no ends when every id lies in its
    view (ids of 12 bytes or fewer, as most are: nothing to copy but the views), else the
    values end to end and their ends (``compiled.columns.strings``). Declined for a missing,
    empty or too long id, and for values not handed over as string views."""
    if column.null_count():
        raise Declined("an id missing")
    try:
        import nanoarrow

        chunks = list(nanoarrow.c_array_stream(column))
    except (ImportError, TypeError, ValueError, RuntimeError):  # the careful path reads it
        raise Declined("the ids could not be taken from polars") from None
    owns: list[np.ndarray] = []
    for chunk in chunks:
        if chunk.schema.format != "vu":
            raise Declined("ids not given as string views")
        start = chunk.offset * 16
        owns.append(
            np.frombuffer(list(chunk.view().buffers)[1], np.uint8)[
                start : start + chunk.length * 16
            ]
        )
    inline_views = log_pass().inline_views
    views = np.empty(16 * column.len(), np.uint8)  # (a copy: polars' memory is let go)
    found = 0
    at = 0
    for own in owns:
        status, holds = inline_views(own, views, at)
        if status < 0:
            raise Declined("an empty id")
        if not status:
            return _joined(chunks, column.len())
        found |= holds
        at += len(own)
    return views, _IN_VIEWS, found


#: ``_copied``'s ends of a column read in its views (``compiled.columns._span``).
_IN_VIEWS = np.empty(0, np.int64)


def _joined(chunks: list[Any], rows: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The ids of ``chunks`` (string views) end to end, their ends and what their bytes
    hold (``compiled.columns.strings``); Declined for an empty or too long id."""
    strings = log_pass().strings
    ends = np.empty(rows + 1, np.int64)
    ends[0] = 0
    views: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    room = 0
    for chunk in chunks:
        buffers = list(chunk.view().buffers)
        start = chunk.offset * 16
        own = np.frombuffer(buffers[1], np.uint8)[start : start + chunk.length * 16]
        data = [np.frombuffer(b, np.uint8) for b in buffers[2:-1]]
        bases = np.zeros(max(len(data), 1), np.int64)
        if data:
            bases[1:] = np.cumsum([len(d) for d in data])[:-1]
        joined = data[0] if len(data) == 1 else np.concatenate(data or [np.zeros(0, np.uint8)])
        joined.flags.writeable = False  # as polars' own buffers: one compiled version
        views.append((own, joined, bases))
        # the values' own lengths (views may share a data buffer's bytes: a Parquet
        # dictionary's value is one place for every row that holds it)
        lengths = own.view(np.int32)[::4]
        if len(lengths) and int(lengths.max()) > MAX_PARQUET_ID_BYTES:
            raise Declined("an id too long")
        room += int(np.maximum(lengths, 0).sum(dtype=np.int64))
    if room > MAX_BATCH_ID_BYTES:  # views that share a long id: small in polars, not copied
        raise Declined("ids too long to copy")
    out = np.empty(room + 16, np.uint8)  # and the bytes written past the last value's end
    at = 0
    row = 0
    found = 0
    for own, joined, bases in views:
        at, holds = strings(own, joined, bases, out, ends, row, at)
        if at < 0:
            raise Declined("an empty id")
        found |= holds
        row += len(own) // 16
    return out, ends, found
