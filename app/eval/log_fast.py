"""The compiled path of a log's cluster tally (``app.eval.cluster_stream.tally_log``).

A log of TREC lines or JSONL hits, plain or gzip, is read a block at a time (a thread reads,
or inflates, the next block while this one is tallied); each block is cut in pieces at query
boundaries and the pieces are tallied two at a time, by two threads, by the compiled pass of
``app.eval.compiled.tally`` (which lets go of the GIL). A query's lines left at the end of a
block go with the next. A Parquet log is read with its dictionaries by pyarrow where its ids
are dictionary-encoded (``app.eval.log_dictionary``), else by polars
(``app.eval.log_parquet``). Memory: a few blocks, the corpus's table, 11 to 22 bytes a query
seen (a set of 8-byte hashes at most three quarters full) and, per thread, a block's lines
taken apart and a mark per corpus document.

``NotTaken`` when this path does not read the file: a line the compiled pass does not take,
another format, no compiler (numba) here, or no log at all. The caller then reads it the way
that words every error and gives the same figures.
"""

from __future__ import annotations

import locale
import queue
from collections import Counter, deque
from collections.abc import Generator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from app.eval.cluster_profile import ClusterCorpus, ClusterTally, RankTotals
from app.eval.conventions import Order
from app.eval.log_dictionary import DictionaryPass, Unsuited, readable_columns, tally_dictionary
from app.eval.log_parquet import Declined, Rows, TallyFn, tally_parquet
from app.eval.parquet import RunColumns
from app.eval.passes import (
    DONE,
    JSONL,
    LINE_FIELDS,
    ORDER_CODES,
    Q_COUNTERS,
    Q_LINES,
    Q_QUERIES,
    Q_SHOWN,
    TREC,
    log_pass,
)
from app.eval.streaming import BLOCKS_AHEAD, QueriesNotContiguous, ahead
from app.eval.textio import plain_stream, separator_of

#: Logs and corpora smaller than this are not worth loading the compiler for (numba's start:
#: some 0.5 s); the polars and careful readers read them.
COMPILED_FROM_BYTES = 4 << 20
#: Bytes read at once (in ``PIECES`` pieces, two tallied at a time).
BLOCK_BYTES = 16 << 20
#: Lines taken apart at a time: a batch's scratch (12 numbers a line, 1.6 MB) stays in a
#: core's cache between the passes that write and read it (100M TREC lines: 5.1 s at
#: 16,384 against 8.0 s at 250,000, most of it the cache misses and page faults of the
#: larger scratch). Not a power of two: the scratch's 12 rows (one a field, each written a
#: line at a time) would lie 128 kB apart, on the same sets of a core's first caches, which
#: hold eight lines a set; at 16,392 each begins 64 bytes past the last's set (a loop
#: writing 12 such rows: 37 ns a row against 10; a Parquet log of 100M rows: 8.6-9.3
#: CPU-seconds against 9.1-10.1, a TREC log's unchanged).
_BATCH_LINES = 16_392
#: A block at least this long is tallied in ``PIECES`` pieces, two at a time.
PIECES_FROM = 1 << 20
PIECES = 8
#: Bytes kept free before each block read: the lines of a query left by the block before
#: are put there, so that a block is not copied to be joined to them.
_RESERVE = 1 << 20
#: The blocks' buffers (``_blocks``): the reader's (``BLOCKS_AHEAD`` waiting, one made and
#: waiting to be put there, one read and held, one being read), and two being tallied.
_BUFFERS = BLOCKS_AHEAD + 5
#: The longest query the pass holds, in bytes: a longer one is the careful reader's.
MAX_QUERY_BYTES = 64 << 20


class NotTaken(Exception):
    """The compiled path does not read this file: another path does (see the module)."""


@dataclass(frozen=True)
class KernelCorpus:
    """A corpus as the compiled pass looks documents up: the ids' bytes and their offsets,
    and their table (``compiled.table.corpus_table``: slots, and a record a document with
    its cluster's number and its tokens)."""

    ids: np.ndarray
    offsets: np.ndarray
    slots: np.ndarray
    records: np.ndarray
    #: documents (rows), and clusters: their numbers run from 1 to this
    documents: int
    clusters: int

    def arrays(self) -> tuple[np.ndarray, ...]:
        """In the order ``compiled.tally.tally_block`` takes them."""
        return (self.ids, self.offsets, self.slots, self.records)


def kernel_corpus(corpus: ClusterCorpus) -> KernelCorpus:
    """The corpus's documents in the compiled pass's form."""
    documents = corpus.documents
    ids = documents.get_column("doc_id")
    ends = ids.str.len_bytes().cast(pl.Int64).cum_sum().fill_null(0).to_numpy()
    offsets = np.zeros(len(ends) + 1, np.int64)
    offsets[1:] = ends
    text = ids.str.join("").item() if ids.len() else ""
    id_bytes = np.frombuffer(text.encode("utf-8"), np.uint8)
    codes = documents.get_column("cluster_id").rank("dense").fill_null(0).cast(pl.Int64)
    tokens = documents.get_column("tokens").cast(pl.Float64).fill_null(np.nan)
    slots, records = log_pass().corpus_table(
        id_bytes, offsets, codes.to_numpy(writable=True), tokens.to_numpy(writable=True)
    )
    return KernelCorpus(
        ids=id_bytes,
        offsets=offsets,
        slots=slots,
        records=records,
        documents=documents.height,
        clusters=int(codes.max() or 0),  # type: ignore[arg-type]
    )


@dataclass
class _Worker:
    """One thread's scratch and accumulators."""

    corpus: KernelCorpus
    ks: np.ndarray
    lines: np.ndarray = field(init=False)
    accumulators: tuple[np.ndarray, ...] = field(init=False)

    def __post_init__(self) -> None:
        deepest = int(self.ks[-1])
        self.lines = np.zeros((LINE_FIELDS, _BATCH_LINES), np.int64)
        self.accumulators = (
            np.zeros((len(self.ks), deepest + 1), np.int64),  # histograms
            np.zeros(len(self.ks), np.int64),  # short
            np.zeros(deepest, np.int64),  # clustered
            np.zeros(deepest, np.int64),  # known
            np.zeros(deepest, np.float64),  # token sums
            np.zeros(Q_COUNTERS, np.int64),  # counters
            np.zeros(self.corpus.documents, np.int64),  # a mark per corpus row
            np.zeros(self.corpus.clusters + 1, np.int64),  # a mark per cluster
        )

    def rows(self, order: Order) -> TallyFn:
        """``compiled.columns.tally_rows`` of a Parquet batch's rows into this worker's
        accumulators."""
        code = ORDER_CODES[order]
        functions = log_pass()

        def tally(rows: Rows, first: int, last: int) -> tuple[int, np.ndarray]:
            return functions.tally_rows(  # type: ignore[no-any-return]
                rows.qids,
                rows.qid_ends,
                rows.docs,
                rows.doc_ends,
                rows.scores,
                rows.ranks,
                first,
                last,
                code,
                self.lines,
                self.ks,
                self.corpus.arrays(),
                self.accumulators,
            )

        return tally

    def tally(
        self, part: np.ndarray, shape: tuple[int, int, int, bool], final: bool
    ) -> tuple[int, int, np.ndarray]:
        """``compiled.tally.tally_block`` of ``part`` into this worker's accumulators."""
        return log_pass().tally_block(  # type: ignore[no-any-return]
            part,
            len(part),
            shape,
            final,
            self.lines,
            self.ks,
            self.corpus.arrays(),
            self.accumulators,
        )


def _shape(fmt: str, order: Order, head: bytes) -> tuple[int, int, int, bool]:
    """The kernel's ``shape`` of a file in ``fmt`` whose first bytes are ``head``."""
    # C's strtod reads a long decimal as Python does in the C locale's numbers (a program
    # that set another would read "0,5")
    long_ok = locale.localeconv()["decimal_point"] == "."
    if fmt == "trec":
        separator = separator_of(head)
        if separator is None:
            raise NotTaken
        return TREC, ord(separator), ORDER_CODES[order], long_ok
    if fmt == "jsonl-hits":
        return JSONL, 0, ORDER_CODES[order], long_ok
    raise NotTaken


def compiled_tally(
    path: Path,
    corpus: ClusterCorpus,
    ks: Sequence[int],
    *,
    order: Order,
    fmt: str,
    columns: RunColumns | None = None,
) -> tuple[ClusterTally, int]:
    """The cluster tally of every query of the log at ``path`` and its lines (see the
    module); ``fmt``: "trec", "jsonl-hits" or "parquet" (``columns`` naming its columns).
    NotTaken, QueriesNotContiguous, or an InputError of the file itself (a truncated gzip,
    a Parquet file that cannot be read)."""
    try:
        log_pass()
    except (ImportError, RuntimeError):  # no numba here, or nowhere to cache what it compiles
        raise NotTaken from None
    cutoffs = np.asarray(sorted(set(ks)), np.int64)
    documents = kernel_corpus(corpus)
    workers = [_Worker(documents, cutoffs) for _ in range(2)]
    if fmt == "parquet":
        workers.append(_Worker(documents, cutoffs))  # the queries joined across batches
        try:
            _tally_parquet(path, columns or RunColumns(), order, workers)
        except Declined:
            raise NotTaken from None
    else:
        _tally_text(path, fmt, order, workers)
    counters = sum(w.accumulators[5] for w in workers)
    read = int(counters[Q_LINES])  # type: ignore[index]
    if not read:
        raise NotTaken  # "the run is empty", worded by the careful reader
    return _tally_of(workers, cutoffs, has_text=corpus.has_text), read


def _tally_parquet(path: Path, columns: RunColumns, order: Order, workers: list[_Worker]) -> None:
    """A Parquet log's tally: by its dictionaries where its ids are dictionary-encoded
    (``log_dictionary``), else by polars' path (``log_parquet``). Declined: the careful
    path reads it."""
    with ThreadPoolExecutor(2, thread_name_prefix="log-tally") as pool:
        try:
            wanted = readable_columns(path, columns, order)
        except Unsuited:
            free: queue.SimpleQueue[TallyFn] = queue.SimpleQueue()
            for worker in workers[:2]:
                free.put(worker.rows(order))
            tally_parquet(path, columns=columns, order=order, workers=free, pool=pool, seen=_Seen())
            return
        passes: queue.SimpleQueue[DictionaryPass] = queue.SimpleQueue()
        for worker in workers[:2]:
            passes.put(
                DictionaryPass(
                    worker.ks,
                    worker.corpus.arrays(),
                    worker.accumulators,
                    np.empty(max(worker.corpus.documents, 1), np.int64),
                )
            )
        tally_dictionary(
            path,
            wanted=wanted,
            order=order,
            passes=passes,
            joined=workers[2].rows(order),
            pool=pool,
            seen=_Seen(),
        )


def _tally_text(path: Path, fmt: str, order: Order, workers: list[_Worker]) -> None:
    """Read the file a block at a time by a thread of its own (plain, or gzip inflated), and
    tally each block's whole queries (``_submitted``). The lines of a block's last query
    are found before its pieces are tallied (``lines.last_query_start``) and go with the
    next block: that block's pieces are under way while the one before's last pieces end
    (two blocks' buffers at most: this one's and the one before's; when each was waited
    for in turn, one thread idled at every block's end).
    (Not mapped into memory: a log cut short while it is read, as a rotation does, would
    end the process rather than the read.)"""
    functions = log_pass()
    seen = _Seen()
    free: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
    for worker in workers:
        free.put(worker)
    under_way: deque[_Pieces] = deque()
    with (
        ThreadPoolExecutor(len(workers), thread_name_prefix="log-tally") as pool,
        plain_stream(path) as stream,
        ahead(_blocks(stream)) as blocks,
    ):
        carry = np.zeros(0, np.uint8)
        shape: tuple[int, int, int, bool] | None = None
        for taken, (buffer, size, last) in enumerate(blocks):
            start = _RESERVE - len(carry)
            if start >= 0:
                buffer[start:_RESERVE] = carry
                work = buffer[start : _RESERVE + size]
            else:
                work = np.concatenate([carry, buffer[_RESERVE : _RESERVE + size]])
            if shape is None:
                shape = _shape(fmt, order, bytes(work[: 64 << 10]))
            cut = (
                len(work) if last else functions.last_line_query_start(work, len(work), *shape[:2])
            )
            if cut < 0:
                raise NotTaken
            carry = work[cut:].copy()
            if len(carry) > MAX_QUERY_BYTES:
                raise NotTaken  # one query longer than the pass holds: the careful reader
            if cut:
                under_way.append(_submitted(work[:cut], shape, free, pool, taken))
            # the blocks before this one: their buffers are read into again (a block of
            # one query's lines submits nothing)
            while under_way and under_way[0].block < taken:
                under_way.popleft().finish(seen)
        while under_way:
            under_way.popleft().finish(seen)
        if len(carry):
            raise NotTaken  # (the last block leaves nothing)


@dataclass
class _Pieces:
    """A block's whole queries, in pieces being tallied."""

    pieces: list[np.ndarray]
    futures: list[Future[tuple[int, int, np.ndarray]]]
    #: the number of the block whose buffer they lie in
    block: int

    def finish(self, seen: _Seen) -> None:
        """Wait for the pieces; their queries' hashes go to ``seen`` in the file's order.
        NotTaken when a piece was refused or left a line."""
        results = [future.result() for future in self.futures]
        for piece, (status, consumed, _) in zip(self.pieces, results, strict=True):
            if status != DONE or consumed != len(piece):
                raise NotTaken
        seen.add_new(np.concatenate([h for _, _, h in results]))


def _submitted(
    work: np.ndarray,
    shape: tuple[int, int, int, bool],
    workers: queue.SimpleQueue[_Worker],
    pool: ThreadPoolExecutor,
    block: int,
) -> _Pieces:
    """The whole queries of ``work`` (the lines of the query left before, then a block, to
    its last query) in ``PIECES`` pieces cut at query boundaries, each tallied by whichever
    thread is free with a worker it takes from ``workers`` (the pieces' times vary: with
    one half a thread, the faster waited for the slower at every block)."""
    query_cut = log_pass().line_query_cut
    n = len(work)
    cuts = [0]
    if n >= PIECES_FROM:
        for j in range(1, PIECES):
            cut = query_cut(work, max(cuts[-1], n * j // PIECES), n, shape[0], shape[1])
            if cut <= cuts[-1]:
                break
            cuts.append(cut)
    cuts.append(n)
    pieces = [work[a:b] for a, b in pairwise(cuts)]

    def tally(piece: np.ndarray) -> tuple[int, int, np.ndarray]:
        worker = workers.get()
        try:
            return worker.tally(piece, shape, True)
        finally:
            workers.put(worker)

    return _Pieces(pieces, [pool.submit(tally, piece) for piece in pieces], block)


class _Seen:
    """The queries tallied, as a set of their 64-bit hashes (compiled: a log holds millions).
    Two ids of one hash make the file look out of order: it then takes the whole-file path,
    which gives the same figures."""

    def __init__(self) -> None:
        self.slots = np.zeros(1 << 16, np.uint64)
        self.count = 0

    def expect(self, more: int) -> None:
        """Room for ``more`` hashes than it holds, made at once. (At most three quarters
        full: a lookup then probes some 2.5 slots, and 5M queries clear 64 MB of pages, not
        128: clearing them took 7% of a 100M-row Parquet log's CPU, measured.)"""
        if 4 * (self.count + more) > 3 * len(self.slots):
            size = len(self.slots)
            while 4 * (self.count + more) > 3 * size:
                size *= 2
            old = self.slots[self.slots != 0]
            self.slots = np.zeros(size, np.uint64)
            log_pass().add_new(self.slots, old)

    def add_new(self, hashes: np.ndarray) -> None:
        """Add ``hashes``; QueriesNotContiguous when one was there (or twice in them)."""
        add_new = log_pass().add_new
        self.expect(len(hashes))
        if add_new(self.slots, np.ascontiguousarray(hashes, np.uint64)) < 0:
            raise QueriesNotContiguous
        self.count += len(hashes)


def _blocks(stream: Any) -> Generator[tuple[np.ndarray, int, bool]]:
    """(buffer, bytes read into it after ``_RESERVE``, whether they are the file's last) of
    each block, ``_BUFFERS`` buffers in turn: a buffer is read into again only once the two
    blocks ``_tally_text`` may be tallying at once are done with it (each read waits for
    its block to be taken, ``ahead``)."""
    buffers = [np.empty(_RESERVE + BLOCK_BYTES, np.uint8) for _ in range(_BUFFERS)]
    turn = 0
    pending: tuple[np.ndarray, int] | None = None
    while True:
        buffer = buffers[turn % _BUFFERS]
        turn += 1
        view = buffer.data[_RESERVE:]
        size = 0
        while size < BLOCK_BYTES and (got := stream.readinto(view[size:])):
            size += got
        if pending is not None:
            yield pending[0], pending[1], size == 0
            if size == 0:
                return
        elif size == 0:
            return
        pending = (buffer, size)


def _trimmed(values: np.ndarray) -> list[Any]:
    """A per-rank list up to its last non-zero entry (``RankTotals``'s lists)."""
    nonzero = np.flatnonzero(values)
    if not len(nonzero):
        return []
    return values[: int(nonzero[-1]) + 1].tolist()  # type: ignore[no-any-return]


def _tally_of(workers: list[_Worker], ks: np.ndarray, *, has_text: bool) -> ClusterTally:
    histograms, short, clustered, known, tokens, counters = (
        sum(w.accumulators[i] for w in workers) for i in range(6)
    )
    return ClusterTally(
        ks=tuple(int(k) for k in ks),
        has_text=has_text,
        queries=int(counters[Q_QUERIES]),  # type: ignore[index]
        histograms=[
            Counter({u: int(c) for u, c in enumerate(row.tolist()) if c})
            for row in histograms  # type: ignore[union-attr]
        ],
        short=[int(v) for v in short],  # type: ignore[union-attr]
        shown=int(counters[Q_SHOWN]),  # type: ignore[index]
        totals=RankTotals(
            clustered=_trimmed(clustered),  # type: ignore[arg-type]
            known=_trimmed(known) if has_text else [],  # type: ignore[arg-type]
            tokens=[float(v) for v in _trimmed(tokens)] if has_text else None,  # type: ignore[arg-type]
        ),
    )
