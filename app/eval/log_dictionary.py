"""The compiled path of a Parquet log whose ids are dictionary-encoded, as Parquet writers
keep a column of few distinct values (``app.eval.log_fast``).

pyarrow reads the log's row groups, two at a time, by two threads, each id column as its
row group's dictionary and each row's number into it (``read_dictionary``): a dictionary's
ids are checked, hashed and looked up in the corpus once, not once a row
(``compiled.dictionary``), and a batch's whole queries are tallied from the numbers. The
rows of a query cut by a batch's end (its first and its last query) are copied out, joined
in the file's order and tallied by the pass of a Parquet log's rows read by polars
(``compiled.columns.tally_rows``). Memory: two batches being read, their dictionaries, the
rows of the queries cut by their ends and, per row group read, its queries' hashes.

``Unsuited`` before anything is tallied when the file is not one this path reads (no
pyarrow, a column named twice or nested, no score column, ids not text or a row group's not
dictionary-encoded, a score not a double or a rank not a 64-bit integer): polars' path
(``app.eval.log_parquet``) then reads it. ``Declined`` (the whole log to the careful paths)
for what ``log_parquet`` declines: a row the careful reader refuses, a rank beyond 32 bits,
a result without the score (or rank) its order needs, a query longer than the pass holds;
and for a file pyarrow does not read as its metadata says (a page unreadable, a row's
number past its dictionary, a row group short of its rows).
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from app.eval.conventions import Order
from app.eval.log_parquet import MAX_BATCH_ID_BYTES, Declined, Rows, TallyFn
from app.eval.parquet import (
    FORBIDDEN_IN_ID,
    MAX_PARQUET_ID_BYTES,
    RunColumns,
    check_expansion,
)
from app.eval.passes import BLANK_OR_CONTROL, DONE, MAX_QUERY_LINES, PAST_ASCII, log_pass
from app.eval.values import INT32_MAX

#: The words of a document entry's row (``compiled.dictionary.ENTRY_WORDS``).
ENTRY_WORDS = 4
#: Rows read at once from a row group (a larger one comes in batches of this many).
BATCH_ROWS = 1 << 20
#: Row groups read or waiting to be taken at once (a row group's answer is small: its
#: queries' hashes and the rows of its first and last; more than three keep a thread that
#: ends early from waiting for the other's: 1.42-1.48x polars' scan against 1.45-1.51).
GROUPS_AHEAD = 6
#: The set of queries seen is sized at once from a first row group of this many rows or
#: more (a smaller one says too little of the file's queries).
ESTIMATE_FROM_ROWS = 1 << 16


class Unsuited(Exception):
    """This path does not read this file; polars' does (see the module)."""


@dataclass(frozen=True)
class DictionaryPass:
    """What a thread's tally of a batch's whole queries needs: the thread's accumulators
    and cutoffs (``log_fast._Worker``), in the order ``tally_indices`` takes them."""

    ks: np.ndarray
    corpus: tuple[np.ndarray, ...]
    accumulators: tuple[np.ndarray, ...]
    #: a corpus row's first entry in a dictionary (``look_up_entries``)
    row_first: np.ndarray


@dataclass
class _Entries:
    """A dictionary's ids as the pass reads them: their bytes and offsets, hashes, and for
    documents their table (``look_up_entries``)."""

    data: np.ndarray
    offsets: np.ndarray
    hashes: np.ndarray
    table: np.ndarray | None = None


@dataclass
class _Part:
    """The rows of one query a batch's end cut, copied out: its id, its documents' ids end
    to end and their ends, scores and ranks."""

    qid: bytes
    docs: np.ndarray
    doc_ends: np.ndarray
    scores: np.ndarray
    ranks: np.ndarray


@dataclass
class _Batch:
    """A batch tallied: its first query's rows, its last one's (None when the batch is all
    one query), and the hashes of the whole queries between."""

    head: _Part
    tail: _Part | None
    hashes: np.ndarray
    rows: int

    def last_qid(self) -> bytes:
        """The id of the query the batch ends in."""
        return (self.tail or self.head).qid


def readable_columns(path: Path, columns: RunColumns, order: Order) -> list[str]:
    """The columns this path reads (query id, document id, score, then rank for order rank);
    Unsuited when it does not read the file (see the module)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise Unsuited("no pyarrow") from None
    try:
        reader = pq.ParquetFile(path)
        schema = reader.schema_arrow
        metadata = reader.metadata
    except (OSError, ValueError, pa.ArrowException):
        raise Unsuited("not read by pyarrow") from None
    names = schema.names
    if len(set(names)) != len(names) or columns.qid == columns.doc_id:
        raise Unsuited("columns of one name")  # (polars' path words the second)
    check_expansion(path)  # a decompression bomb refused as the careful reader does
    wanted = [columns.qid, columns.doc_id, columns.score]
    if columns.score not in names:
        raise Unsuited("no score column")
    if order is Order.RANK:
        wanted.append(columns.rank)
    types = {name: schema.field(name).type for name in names}
    for name in wanted:
        if name not in types:
            raise Unsuited("a column missing")
    if not all(
        pa.types.is_string(types[c]) or pa.types.is_large_string(types[c]) for c in wanted[:2]
    ):
        raise Unsuited("ids not text")
    if not pa.types.is_float64(types[columns.score]):
        raise Unsuited("scores not doubles")
    if order is Order.RANK and not pa.types.is_int64(types[columns.rank]):
        raise Unsuited("ranks not 64-bit integers")
    paths = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    for name in wanted[:2]:
        at = paths.get(name)
        if at is None:
            raise Unsuited("a nested column")
        for group in range(metadata.num_row_groups):
            if not metadata.row_group(group).column(at).has_dictionary_page:
                raise Unsuited("ids not dictionary-encoded")
    return wanted


def tally_dictionary(
    path: Path,
    *,
    wanted: list[str],
    order: Order,
    passes: queue.SimpleQueue[DictionaryPass],
    joined: TallyFn,
    pool: ThreadPoolExecutor,
    seen: Any,
) -> None:
    """Tally the Parquet log at ``path`` (its columns ``wanted``, as ``readable_columns``
    gives them): each row group's batches by a thread of ``pool`` with a thread's
    accumulators it takes from ``passes``, the queries their ends cut by ``joined`` (in
    this thread); each query's hash goes to ``seen`` (which raises when one comes twice).
    Declined: see the module; and for a file pyarrow cannot read as its metadata says (a
    file cut short, a page unreadable, a row group that yields fewer rows than it holds)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    unreadable = (OSError, ValueError, IndexError, pa.ArrowException)
    try:
        metadata = pq.ParquetFile(path).metadata
    except unreadable:
        raise Declined("the file could not be read") from None  # the careful path words it
    groups = metadata.num_row_groups
    code = _order_code(order)

    readers = threading.local()  # a thread's reader (the file's footer read once a thread)

    def read_group(group: int) -> list[_Batch]:
        tally = passes.get()
        try:
            return group_read(group, tally)
        except unreadable:  # a file cut short, a page unreadable
            raise Declined("the file could not be read") from None  # the careful path words it
        finally:
            passes.put(tally)

    def group_read(group: int, tally: DictionaryPass) -> list[_Batch]:
        reader = getattr(readers, "reader", None)
        if reader is None:
            reader = readers.reader = pq.ParquetFile(path, read_dictionary=wanted[:2])
        memo: dict[int, _Entries] = {}
        batches: list[_Batch] = []
        read = 0
        open_rows = 0  # the rows of the query the batches so far end in
        for batch in reader.iter_batches(
            batch_size=BATCH_ROWS, row_groups=[group], columns=wanted, use_threads=False
        ):
            read += batch.num_rows
            if not batch.num_rows:
                continue
            tallied = _tallied(batch, order, code, tally, memo)
            if tallied.tail is not None:
                open_rows = len(tallied.tail.scores)
            elif batches and batches[-1].last_qid() == tallied.head.qid:
                open_rows += tallied.rows
            else:
                open_rows = tallied.rows
            batches.append(tallied)
            if open_rows > MAX_QUERY_LINES:  # (its rows are copied: not past the bound)
                raise Declined("a query longer than the pass holds")
        # a corrupt page may end a row group's reading early without an error (found by
        # fuzzing): the rows the metadata says, or the careful path words it
        if read != metadata.row_group(group).num_rows:
            raise Declined("a row group that yields fewer rows than it holds")
        return batches

    pending: list[_Part] = []

    def flush() -> None:
        if pending:
            rows = _joined_rows(pending)
            status, hashes = joined(rows, 0, len(rows.scores))
            if status != DONE:
                raise Declined("a query longer than the pass holds")
            seen.add_new(hashes)
            pending.clear()

    under_way: deque[Future[list[_Batch]]] = deque()
    numbers = iter(range(groups))
    first = True
    try:
        under_way.extend(pool.submit(read_group, g) for g in islice(numbers, GROUPS_AHEAD))
        while under_way:
            batches = under_way.popleft().result()
            following = next(numbers, None)
            if following is not None:
                under_way.append(pool.submit(read_group, following))
            read = sum(b.rows for b in batches)
            if first and read >= ESTIMATE_FROM_ROWS:
                # the set of queries seen made as large as the first row group says the
                # file needs (grown a doubling at a time, its pages were cleared and
                # filled some ten times over: 5% of a 100M-row log's time)
                queries = sum(len(b.hashes) for b in batches) + 1
                expected = int(metadata.num_rows * queries / read * 1.1)
                seen.expect(min(expected, metadata.num_rows))
            first = False
            for batch in batches:
                seen.add_new(batch.hashes)
                if pending and pending[0].qid != batch.head.qid:
                    flush()
                pending.append(batch.head)
                if sum(len(p.scores) for p in pending) > MAX_QUERY_LINES:
                    raise Declined("a query longer than the pass holds")
                if batch.tail is not None:
                    flush()
                    pending.append(batch.tail)
        flush()
    finally:
        for future in under_way:
            future.cancel()


def _order_code(order: Order) -> int:
    from app.eval.passes import ORDER_CODES

    return ORDER_CODES[order]


def _tallied(
    batch: Any, order: Order, code: int, tally: DictionaryPass, memo: dict[int, _Entries]
) -> _Batch:
    """A batch's whole queries tallied by ``tally``; its first and last queries' rows
    copied out."""
    functions = log_pass()
    qids, docs = batch.column(0), batch.column(1)
    if qids.null_count or docs.null_count:
        raise Declined("an id missing")
    qidx = _indices(qids)
    didx = _indices(docs)
    queries = _entries(qids.dictionary, memo, 0, None)
    documents = _entries(docs.dictionary, memo, 1, tally)
    # the passes read a row's entries unchecked: a corrupt page's numbers past its
    # dictionary (pyarrow hands them over as they are, found by fuzzing) are refused here
    for numbers, entries in ((qidx, queries), (didx, documents)):
        if len(numbers) != batch.num_rows or not (
            numbers.min() >= 0 and numbers.max() < len(entries.hashes)
        ):
            raise Declined("a row's number past its dictionary")
    scores = _numbers(batch.column(2), np.float64, order is Order.TREC_EVAL, "score")
    # (NaN or an infinity shows in the least or the greatest: no array a batch, whose
    # pages the system would clear each time)
    if len(scores) and not (np.isfinite(scores.min()) and np.isfinite(scores.max())):
        raise Declined("a score that is not a finite number")
    if order is Order.RANK:
        ranks = _numbers(batch.column(3), np.int64, True, "rank")
        if int(ranks.min()) < -INT32_MAX or int(ranks.max()) > INT32_MAX:
            raise Declined("a rank beyond 32 bits")
    else:
        ranks = _zeros(len(scores))
    n = len(qidx)
    first, last = functions.query_bounds(qidx, queries.data, queries.offsets, queries.hashes)
    hashes = np.empty(0, np.uint64)
    if first < last:
        status, hashes = functions.tally_indices(
            qidx,
            queries.data,
            queries.offsets,
            queries.hashes,
            didx,
            documents.data,
            documents.offsets,
            documents.table,
            scores,
            ranks,
            first,
            last,
            code,
            tally.ks,
            tally.accumulators,
        )
        if status != DONE:
            raise Declined("a query longer than the pass holds")

    def part(start: int, stop: int) -> _Part:
        e = int(qidx[start])
        qid = queries.data[queries.offsets[e] : queries.offsets[e + 1]].tobytes()
        data, ends = _gathered(documents, didx[start:stop])
        return _Part(qid, data, ends, scores[start:stop].copy(), ranks[start:stop].copy())

    if first >= n:  # the batch is all one query's
        return _Batch(part(0, n), None, hashes, n)
    return _Batch(part(0, first), part(last, n), hashes, n)


_ZEROS = np.zeros(0, np.int64)


def _zeros(n: int) -> np.ndarray:
    """``n`` zeros (the ranks of an order that reads none), never written: one array for
    every batch."""
    global _ZEROS
    zeros = _ZEROS  # (read once: another thread may put a larger one there meanwhile)
    if len(zeros) < n:
        zeros = np.zeros(n, np.int64)
        zeros.flags.writeable = False
        _ZEROS = zeros
    return zeros[:n]


def _indices(column: Any) -> np.ndarray:
    """A dictionary column's rows' numbers into its dictionary (int32, as pyarrow reads
    them), where pyarrow keeps them (its ``indices`` array: 0.8 ms a batch, measured)."""
    if str(column.type.index_type) != "int32":
        raise Declined("dictionary numbers not int32")
    buffer = column.buffers()[1]
    return np.frombuffer(buffer, np.int32, count=len(column), offset=4 * column.offset)


def _numbers(column: Any, dtype: type, needed: bool, what: str) -> np.ndarray:
    """A score or rank column's values where pyarrow keeps them (a missing value: 0, or
    Declined when the order needs it)."""
    if column.null_count:
        if needed:
            raise Declined(f"a result without a {what}")
        column = column.fill_null(0)
    size = np.dtype(dtype).itemsize
    return np.frombuffer(column.buffers()[1], dtype, count=len(column), offset=size * column.offset)


def _entries(
    dictionary: Any, memo: dict[int, _Entries], which: int, tally: DictionaryPass | None
) -> _Entries:
    """A dictionary's ids as the pass reads them (the last batch's when the same: a row
    group read in several batches hands its dictionary with each); Declined for an id the
    careful reader refuses (empty, too long, with a blank or a control character)."""
    buffers = dictionary.buffers()
    wide = np.int64 if str(dictionary.type) == "large_string" else np.int32
    offsets = np.frombuffer(buffers[1], wide)[
        dictionary.offset : dictionary.offset + len(dictionary) + 1
    ]
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(8, np.uint8)
    offsets = offsets.astype(np.int64)
    known = memo.get(which)
    held = _held(known, offsets, data)
    if known is not None and held == len(offsets) - 1:
        return known
    # a query ids' dictionary that goes on the last batch's (a row group whose dictionary
    # page filled, read on in plain pages: pyarrow hands each batch every id so far) is
    # checked and hashed from where that one ended, not again from its start
    start = held if tally is None and known is not None and held == len(known.hashes) else 0
    if len(offsets) > 1 and int(np.diff(offsets[start:]).max(initial=0)) > MAX_PARQUET_ID_BYTES:
        raise Declined("an id too long")
    hashes = np.empty(len(offsets) - 1, np.uint64)
    if start:
        hashes[:start] = known.hashes  # type: ignore[union-attr]
    functions = log_pass()
    status, found = functions.entries(data, offsets[start:], hashes[start:])
    if status < 0:
        raise Declined("an empty id")
    if found & BLANK_OR_CONTROL:
        raise Declined("an id with a blank or a control byte")
    if found & PAST_ASCII and (
        pl.Series(dictionary.slice(start).to_pylist()).str.contains(FORBIDDEN_IN_ID).any()
    ):
        raise Declined("an id with a blank or a control character")
    entries = _Entries(data, offsets, hashes)
    if tally is not None:
        entries.table = np.empty((len(hashes), ENTRY_WORDS), np.int64)
        functions.look_up_entries(
            data, offsets, hashes, tally.corpus, entries.table, tally.row_first
        )
    memo[which] = entries
    return entries


def _held(known: _Entries | None, offsets: np.ndarray, data: np.ndarray) -> int:
    """How many of a dictionary's first ids are ``known``'s, all of them or none (0)."""
    if known is None or len(known.offsets) > len(offsets):
        return 0
    count = len(known.offsets) - 1
    ours = offsets[: count + 1]
    if not np.array_equal(known.offsets - known.offsets[0], ours - ours[0]):
        return 0
    if not np.array_equal(
        known.data[known.offsets[0] : known.offsets[-1]], data[ours[0] : ours[-1]]
    ):
        return 0
    return count


def _gathered(documents: _Entries, numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ids of dictionary entries ``numbers`` end to end, and their ends (from 0)."""
    starts = documents.offsets[numbers]
    lengths = documents.offsets[numbers + 1] - starts
    ends = np.zeros(len(numbers) + 1, np.int64)
    np.cumsum(lengths, out=ends[1:])
    if int(ends[-1]) > MAX_BATCH_ID_BYTES:
        raise Declined("ids too long to copy")
    at = np.repeat(starts - ends[:-1], lengths) + np.arange(int(ends[-1]))
    return documents.data[at], ends


def _joined_rows(parts: list[_Part]) -> Rows:
    """One query's parts as the rows ``tally_rows`` takes (its id repeated a row)."""
    docs = np.concatenate([p.docs for p in parts] + [np.zeros(16, np.uint8)])
    ends = [np.zeros(1, np.int64)]
    base = 0
    for p in parts:
        ends.append(p.doc_ends[1:] + base)
        base += int(p.doc_ends[-1])
    doc_ends = np.concatenate(ends)
    rows = len(doc_ends) - 1
    if rows > MAX_QUERY_LINES or rows * len(parts[0].qid) > MAX_BATCH_ID_BYTES:
        raise Declined("a query longer than the pass holds")
    qid = np.frombuffer(parts[0].qid, np.uint8)
    qids = np.concatenate([np.tile(qid, rows), np.zeros(16, np.uint8)])
    qid_ends = np.arange(rows + 1, dtype=np.int64) * len(qid)
    return Rows(
        qids,
        qid_ends,
        docs,
        doc_ends,
        np.ascontiguousarray(np.concatenate([p.scores for p in parts]), np.float64),
        np.ascontiguousarray(np.concatenate([p.ranks for p in parts]), np.int64),
    )
