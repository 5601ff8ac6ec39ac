"""Large TREC runs in bounded memory: ranked block by block of whole queries.

Retrieval toolkits write a run query by query, best result first. Such a file is read in
blocks of about ``BLOCK_BYTES``; the complete queries of each block are ranked (the conventions
are per query: ``rank_in_order`` when the block's queries are written best first, without a
sort, ``rank_part`` otherwise) and the heads of their rankings handed to a sink as soon as they
are final, so no more than a few blocks of lines are held at once, instead of every line of the
run, and the caller can write the heads while the next blocks are parsed. A thread reads and
parses the blocks ahead, two rank them (polars and numpy let go of the GIL). The lines of the last
query of a block wait for the next block. Anything else goes to the whole-file path
(``load_run``), which words the errors and gives the same results: a query whose lines are not
contiguous, a line the fast reader refuses, an id too long for the store, a missing score,
JSONL, and a corpus with clusters or text (its traces need the whole run sorted).
"""

from __future__ import annotations

import contextvars
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from queue import Full, Queue
from typing import Any, TypeVar

import polars as pl

from app.eval.cluster_profile import CorpusSource, trace_ranking
from app.eval.cluster_ranks import no_cluster_ranks
from app.eval.conventions import Order
from app.eval.errors import InputError
from app.eval.golden import IdLimits, Judgments
from app.eval.in_order import known_qids, rank_in_order
from app.eval.parquet import RunColumns
from app.eval.ranking import (
    RankedPart,
    RankedRun,
    answered_per_query,
    check_order_columns,
    finish_ranking,
    rank_part,
    top_candidates,
    top_of_results,
)
from app.eval.sources import check_ids, detect_run_format, load_run
from app.eval.textio import (
    LineTooLong,
    ProgressFn,
    plain_file,
    read_fast,
    sniff_separator,
    whole_line_blocks,
)
from app.eval.trec import RUN_COLUMNS, run_columns

#: About this many bytes of a run are parsed at once (some 240,000 lines of an MS MARCO run):
#: at 6.98M lines, 8 MiB blocks peaked 50 MB lower than 16 MiB ones for the same CPU time.
BLOCK_BYTES = 8 << 20

#: Parsed blocks waiting to be ranked: one, while the reader parses the next.
BLOCKS_AHEAD = 1
#: Blocks ranked at once, by threads of their own: the caller hands over the heads of one
#: while the other is ranked.
RANKERS = 2

#: What the heads are turned into, block by block (a frame with a qid column): given the first
#: results of some queries (qid, rank, doc_id, score), each query's rows together in rank
#: order, the queries in no particular order.
ShapeFn = Callable[[pl.DataFrame], pl.DataFrame]
#: Where the shaped heads go, some queries at a time (each query once, whole).
SinkFn = Callable[[pl.DataFrame], None]

_T = TypeVar("_T")


class WholeFile(Exception):
    """The file needs the whole-file path."""


class HeadsSent(Exception):
    """The file needs the whole-file path, but the heads of some queries went to the sink
    already: the caller undoes what its sink did with them and calls again with
    ``streamed=False``."""


def load_run_heads(
    path: Path,
    golden: Judgments,
    *,
    name: str,
    keep_depth: int,
    shape: ShapeFn,
    order: Order = Order.TREC_EVAL,
    fmt: str | None = None,
    progress: ProgressFn | None = None,
    id_limits: IdLimits | None = None,
    corpus: CorpusSource | None = None,
    columns: RunColumns | None = None,
) -> tuple[RankedRun, pl.DataFrame]:
    """``load_run(..., keep_results=True)`` and ``shape(top_candidates(run, keep_depth))``,
    sorted by qid, in bounded memory for a TREC file written query by query (see the module);
    the run comes back without its results."""
    shaped: list[pl.DataFrame] = []
    stream = partial(
        stream_run_heads,
        path,
        golden,
        name=name,
        keep_depth=keep_depth,
        shape=shape,
        sink=shaped.append,
        order=order,
        fmt=fmt,
        progress=progress,
        id_limits=id_limits,
        corpus=corpus,
        columns=columns,
    )
    try:
        ranked = stream()
    except HeadsSent:
        shaped.clear()
        ranked = stream(streamed=False)
    return ranked, pl.concat(shaped).sort("qid")


def stream_run_heads(
    path: Path,
    golden: Judgments,
    *,
    name: str,
    keep_depth: int,
    shape: ShapeFn,
    sink: SinkFn,
    order: Order = Order.TREC_EVAL,
    fmt: str | None = None,
    progress: ProgressFn | None = None,
    id_limits: IdLimits | None = None,
    corpus: CorpusSource | None = None,
    streamed: bool = True,
    columns: RunColumns | None = None,
) -> RankedRun:
    """``load_run(..., keep_results=True)`` without its results, ``sink`` called with
    ``shape(top_candidates(run, keep_depth))`` some queries at a time: block by block as the
    file is read for a TREC file written query by query (see the module), at once from the
    whole-file path otherwise (always with ``streamed=False``). HeadsSent when the file turns
    out to need the whole-file path after some heads went to the sink; an InputError raised by
    the whole-file path comes before any call of ``sink``."""
    if keep_depth < 1:
        raise ValueError(f"depth must be >= 1, got {keep_depth}")
    if (
        streamed
        and (corpus is None or not corpus.matters)
        and (fmt or detect_run_format(path)) == "trec"
    ):
        try:
            return _streamed(
                path,
                golden,
                name=name,
                keep_depth=keep_depth,
                shape=shape,
                sink=sink,
                order=order,
                progress=progress,
                id_limits=id_limits,
                corpus=corpus,
            )
        except WholeFile:
            pass
    ranked = load_run(
        path,
        golden,
        name=name,
        order=order,
        fmt=fmt,
        keep_results=True,
        progress=progress,
        id_limits=id_limits,
        corpus=corpus,
        columns=columns,
    )
    heads = shape(top_candidates(ranked, keep_depth))
    ranked = replace(ranked, results=None)  # the lines go before the heads are written
    sink(heads)
    return ranked


def _streamed(
    path: Path,
    golden: Judgments,
    *,
    name: str,
    keep_depth: int,
    shape: ShapeFn,
    sink: SinkFn,
    order: Order,
    progress: ProgressFn | None,
    id_limits: IdLimits | None,
    corpus: CorpusSource | None,
) -> RankedRun:
    source = str(path)
    parts: list[RankedPart] = []
    lines = 0

    known = known_qids(golden)

    def rank(lines_of_queries: pl.DataFrame) -> tuple[RankedPart, pl.DataFrame]:
        numbered = lines_of_queries.with_row_index("pos")
        if (ranked := rank_in_order(numbered, golden, known, order, keep_depth)) is not None:
            part, top = ranked
            return part, shape(top)
        part = rank_part(numbered, golden, order)
        heads = shape(top_of_results(part.results, order, keep_depth))
        # The part's lines are no longer needed: only its counts and judged ranks stay.
        return replace(part, results=pl.LazyFrame()), heads

    def done(future: Future[tuple[RankedPart, pl.DataFrame]]) -> None:
        part, heads = future.result()
        parts.append(part)
        sink(heads)

    ranking: deque[Future[tuple[RankedPart, pl.DataFrame]]] = deque()
    try:
        with (
            plain_file(path) as plain,
            ahead(trec_blocks(plain, source, order, id_limits)) as blocks,
            ThreadPoolExecutor(RANKERS, thread_name_prefix="run-ranks") as rankers,
        ):
            try:
                for queries, read_lines, read in whole_queries(blocks):
                    if progress is not None and read:
                        progress(read)
                    lines += read_lines
                    if queries.height:
                        ranking.append(rankers.submit(rank, queries))
                        while len(ranking) >= RANKERS:
                            done(ranking.popleft())
                while ranking:
                    done(ranking.popleft())
            finally:
                for future in ranking:
                    future.cancel()
    except (InputError, WholeFile, QueriesNotContiguous):
        if parts:
            raise HeadsSent from None
        raise WholeFile from None  # the whole-file path words it
    if not lines:
        raise WholeFile  # "the run is empty"
    ranked = finish_ranking(
        parts, golden, order=order, name=name, source=source, fmt="trec", lines=lines
    )
    if corpus is not None:  # without clusters or text: every rank is its own cluster rank
        traces = trace_ranking(None, answered_per_query(parts))
        ranked = replace(ranked, traces=replace(traces, cluster_ranks=no_cluster_ranks()))
    return ranked


class QueriesNotContiguous(Exception):
    """A query's lines are not all together: the file needs the whole-file path."""


class SeenQueries:
    """The queries already finished, as 64-bit hashes of their ids in a few sorted arrays
    (merged as they grow, as a log-structured merge does): 8 bytes a query, where a set of
    the ids would take some 80 (a log of five million queries). Two ids of one hash make a
    file look out of order: it then takes the whole-file path, which gives the same figures."""

    def __init__(self) -> None:
        self._levels: list[Any] = []

    def seen_any(self, hashes: Any) -> bool:
        """True when any of ``hashes`` (a numpy array) was added before."""
        import numpy as np

        for level in self._levels:
            at = np.searchsorted(level, hashes)
            at[at == len(level)] = 0
            if bool((level[at] == hashes).any()):
                return True
        return False

    def add(self, hashes: Any) -> None:
        import numpy as np

        if not len(hashes):
            return
        self._levels.append(np.sort(hashes))
        while len(self._levels) > 1 and len(self._levels[-2]) <= len(self._levels[-1]) * 2:
            top = self._levels.pop()
            # two sorted runs: the stable sort (timsort) merges them in one pass
            self._levels[-1] = np.sort(np.concatenate([self._levels[-1], top]), kind="stable")


def whole_queries(
    blocks: Iterator[tuple[pl.DataFrame, bool, int]],
) -> Iterator[tuple[pl.DataFrame, int, int]]:
    """(the lines of whole queries, lines read, bytes read) from blocks of parsed lines
    ((lines, whether they are the last, bytes read)) of a file written query by query: the
    lines of the last query of a block wait for the next block. QueriesNotContiguous at a
    query whose lines are not together (seen in two runs, here or in an earlier block)."""
    finished = SeenQueries()
    carry: pl.DataFrame | None = None
    for block, last, read in blocks:
        frame = block if carry is None else pl.concat([carry, block])
        qids = frame.get_column("qid")
        # Where each run of lines of one query begins.
        begins = (qids != qids.shift(1)).fill_null(True).arg_true()
        runs = qids.gather(begins).hash(seed=0).to_numpy()
        if len(runs) and (len(set(runs.tolist())) != len(runs) or finished.seen_any(runs)):
            raise QueriesNotContiguous
        # The last query may go on in the next block: it waits (a slice, not a copy).
        cut = frame.height if last or not len(begins) else int(begins[-1])
        carry = None if last else frame.slice(cut)
        if len(runs):
            finished.add(runs if last else runs[:-1])
        yield frame.slice(0, cut), block.height, read


@contextmanager
def ahead(items: Generator[_T]) -> Iterator[Iterator[_T]]:
    """``items``, made by a thread of their own at most ``BLOCKS_AHEAD`` ahead of the caller;
    an exception raised making them is raised by the iterator. Leaving the block stops the
    thread (after the item it is making) and waits for it."""
    queue: Queue[tuple[bool, _T | BaseException | None]] = Queue(maxsize=BLOCKS_AHEAD)
    stop = threading.Event()

    def put(entry: tuple[bool, _T | BaseException | None]) -> bool:
        while not stop.is_set():
            try:
                queue.put(entry, timeout=0.05)
                return True
            except Full:
                continue
        return False

    def make() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
            put((False, None))
        except BaseException as error:  # the caller raises it
            put((False, error))
        finally:
            items.close()

    def taken() -> Iterator[_T]:
        while True:
            more, value = queue.get()
            if more:
                yield value  # type: ignore[misc]
                continue
            if value is not None:
                raise value  # type: ignore[misc]
            return

    # The caller's context (a decompression limit) holds in the thread too.
    thread = threading.Thread(
        target=contextvars.copy_context().run, args=(make,), name="run-blocks", daemon=True
    )
    thread.start()
    try:
        yield taken()
    finally:
        stop.set()
        thread.join()


def trec_blocks(
    path: Path, source: str, order: Order, id_limits: IdLimits | None
) -> Generator[tuple[pl.DataFrame, bool, int]]:
    """(parsed lines, whether they are the last, bytes read for them) of each block of whole
    lines; WholeFile at the first thing the fast reader refuses or the conventions need
    worded."""
    separator = sniff_separator(path)
    if separator is None:
        raise WholeFile
    with_rank = order is Order.RANK
    first_line = 1
    with path.open("rb") as handle:
        blocks = whole_line_blocks(handle, BLOCK_BYTES)
        while True:
            try:
                data, last, read = next(blocks)
            except StopIteration:
                return
            except LineTooLong:
                raise WholeFile from None
            if data:
                frame = read_fast(
                    data,
                    columns=RUN_COLUMNS,
                    keep=["qid", "doc_id", "score"] + (["rank"] if with_rank else []),
                    separator=separator,
                    floats=["score"],
                    ints=["rank"] if with_rank else [],
                    first_line=first_line,
                )
                if frame is None:
                    raise WholeFile
                frame = run_columns(frame, with_rank=with_rank)
                check_ids(frame, path, id_limits)
                check_order_columns(frame, order, source)
                first_line += data.count(b"\n")
                yield frame, last, read
            elif last:
                yield run_columns(_empty(with_rank), with_rank=with_rank), True, read


def _empty(with_rank: bool) -> pl.DataFrame:
    schema = {"qid": pl.String, "doc_id": pl.String, "score": pl.Float64, "line": pl.UInt32}
    if with_rank:
        schema["rank"] = pl.Int64
    return pl.DataFrame(schema=schema)
