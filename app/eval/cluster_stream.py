"""unique-clusters@k over a log of any length, in bounded memory.

A production log holds every query the system served (months of traffic: a hundred million
lines and more), written query by query. It is read in blocks of whole queries
(``app.eval.streaming.whole_queries``), from TREC, JSONL or Parquet, plain or gzip; each block
is ranked under the conventions (``rank_every_query``), joined with the corpus's clusters and
tallied (``ClusterTally``: per k the histogram of distinct clusters, per rank the totals), and
the tallies add up. Memory holds a few blocks, the corpus and 8 bytes per query seen (to find a
query whose lines are not together), not the log.

A log whose queries are not contiguous, or a TREC file the fast reader refuses, is read whole
(``load_log_run``): the same figures, the same worded errors, memory that grows with the file.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from app.eval.cluster_profile import (
    ClusterCorpus,
    ClusterTally,
    CorpusSource,
    RankTotals,
    add_totals,
    repeats_a_cluster,
    tally_of_joined,
    tally_of_ranked,
    trace_totals,
)
from app.eval.conventions import Order
from app.eval.golden import IdLimits
from app.eval.jsonl import HIT_FORMAT, jsonl_run_blocks
from app.eval.jsonl_fast import hit_blocks
from app.eval.log_fast import COMPILED_FROM_BYTES, NotTaken, compiled_tally
from app.eval.parquet import RunColumns, parquet_blocks
from app.eval.ranking import (
    RunReport,
    check_order_columns,
    effective_order,
    rank_every_query,
    repeat_warnings,
)
from app.eval.repeats import exact_repeats
from app.eval.sources import check_ids, detect_run_format, load_log_run
from app.eval.streaming import (
    QueriesNotContiguous,
    WholeFile,
    ahead,
    trec_blocks,
    whole_queries,
)
from app.eval.textio import MAX_LINE_BYTES, ProgressFn, plain_file

_Block = tuple[pl.DataFrame, bool, int]

#: Blocks tallied at once while the reader thread parses the next: one. A block's tally is a
#: few polars operations that use every core already; two at a time on two cores took longer
#: (10M lines from Parquet: 8.3 s with two, 7.2 s with one).
RANKERS = 1


@dataclass(frozen=True, slots=True)
class LogTally:
    """A log's tally and how it was read."""

    tally: ClusterTally
    lines: int
    #: False: read whole (its queries are not contiguous, or the fast reader refused it)
    streamed: bool


def _last_marked(blocks: Iterator[pl.DataFrame]) -> Generator[_Block]:
    """(block, whether it is the last, bytes read: 0) of frames handed over one by one."""
    previous: pl.DataFrame | None = None
    for block in blocks:
        if previous is not None:
            yield previous, False, 0
        previous = block
    if previous is not None:
        yield previous, True, 0


def _one_hit_a_line(plain: Path) -> bool:
    """True when a JSONL run's first non-blank line is one hit, as the careful reader
    decides the shape (a JSON object with "docs" is a ranking list); a first line it cannot
    read goes to it, which words the error."""
    with plain.open("rb") as handle:
        while raw := handle.readline(MAX_LINE_BYTES + 1):
            if raw.strip():
                try:
                    value = json.loads(raw)
                except (ValueError, RecursionError):
                    return False
                return not (isinstance(value, dict) and "docs" in value)
    return False


def _parsed_blocks(
    plain: Path, source: str, fmt: str, order: Order, columns: RunColumns
) -> tuple[Generator[_Block], str]:
    """The file's parsed lines in blocks, and the format read (a JSONL file's shape)."""
    if fmt == "trec":
        return trec_blocks(plain, source, order, None), "trec"
    if fmt == "parquet":
        rows = parquet_blocks(
            plain, columns, with_rank=order is Order.RANK, needs_score=order is Order.TREC_EVAL
        )
        return _last_marked(rows), "parquet"
    if _one_hit_a_line(plain):
        return _last_marked(hit_blocks(plain, source)), HIT_FORMAT
    shaped = jsonl_run_blocks(plain)
    first = next(shaped, None)
    if first is None:
        return _last_marked(iter(())), "jsonl-hits"
    frame, detail = first

    def frames() -> Iterator[pl.DataFrame]:
        yield frame
        for more, _ in shaped:
            yield more

    return _last_marked(frames()), detail


#: Mixes a block's query number into a document's hash (the golden ratio's 64 bits).
_MIX = 0x9E3779B97F4A7C15


def _coded(corpus: ClusterCorpus) -> pl.DataFrame:
    """The corpus with ``code``: its cluster as a number (null: none), so that a query's
    clusters are told apart by one exact 64-bit key (query number, cluster number)."""
    return corpus.documents.with_columns(code=pl.col("cluster_id").rank("dense").cast(pl.UInt64))


def _in_order(order: Order) -> pl.Expr:
    """True on a line that begins its query or comes after the line before it in ranking
    order (``app.eval.ordering.sort_key``): a query all of whose lines are is ranked as
    written, without a sort. (Dropping repeated lines keeps the rest in order.)"""
    begins = pl.col("begin")
    if order is Order.TREC_EVAL:
        score, before = pl.col("score"), pl.col("score").shift()
        doc = pl.col("doc_id")
        return begins | (score < before) | ((score == before) & (doc < doc.shift()))
    if order is Order.RANK:
        return begins | (pl.col("rank") >= pl.col("rank").shift())
    return pl.lit(True)


def _first_results(lines: pl.DataFrame, deepest: int) -> pl.DataFrame:
    """qidx, rank, doc_id of the first ``deepest`` results of whole queries written in
    ranking order (``lines``: qidx, doc_id, in order), a repeated document's later lines
    dropped. Repeats are found by a 64-bit hash of (query, document); a query where the hash
    repeats is checked exactly, so a collision never drops a line."""
    key = (pl.col("doc_id").hash(seed=0) ^ (pl.col("qidx") * _MIX)).is_first_distinct()
    flagged = lines.with_columns(first=key)
    suspects = flagged.filter(~pl.col("first")).get_column("qidx").unique()
    if suspects.len():
        checked = flagged.filter(pl.col("qidx").is_in(suspects.implode()))
        numbered = checked.with_row_index("pos")
        hashed = pl.col("doc_id").hash(seed=0) ^ (pl.col("qidx") * _MIX)
        later = exact_repeats(numbered, hashed, query="qidx").implode()
        kept = numbered.filter(~pl.col("pos").is_in(later))
        rest = flagged.filter(~pl.col("qidx").is_in(suspects.implode()))
        parts = [rest.select("qidx", "doc_id"), kept.select("qidx", "doc_id")]
    else:
        parts = [lines.select("qidx", "doc_id")]
    ranked = []
    for part in parts:
        row = pl.int_range(0, pl.len(), dtype=pl.UInt32)
        starts = pl.col("qidx") != pl.col("qidx").shift()
        first_row = pl.when(starts.fill_null(True)).then(row).forward_fill()
        ranked.append(part.with_columns(rank=row - first_row + 1).filter(pl.col("rank") <= deepest))
    return pl.concat(ranked)


def _block_tally(
    lines: pl.DataFrame,
    coded: pl.DataFrame,
    corpus: ClusterCorpus,
    ks: tuple[int, ...],
    *,
    order: Order,
    fmt: str,
    source: str,
) -> ClusterTally:
    """The tally of a block of whole queries' lines: the queries written in ranking order
    (as a log is) without a sort, the others through ``rank_every_query``."""
    effective = effective_order(order, fmt)
    numbered = lines.with_columns(
        begin=(pl.col("qid") != pl.col("qid").shift()).fill_null(True)
    ).with_columns(qidx=pl.col("begin").cum_sum().cast(pl.UInt64))
    check_order_columns(numbered, effective, source)
    tally = ClusterTally(ks=ks, has_text=corpus.has_text)
    # the queries with a line out of order (none, in a log as a system writes it)
    unordered = numbered.filter(~_in_order(effective)).get_column("qidx").unique().implode()
    written = numbered
    if unordered.list.len()[0]:
        others = numbered.filter(pl.col("qidx").is_in(unordered))
        ranked = rank_every_query(
            others.drop("begin", "qidx"), order=order, fmt=fmt, source=source, depth=ks[-1]
        )
        tally.add(tally_of_ranked(ranked, corpus, ks))
        written = numbered.filter(~pl.col("qidx").is_in(unordered))
    if written.height:
        first = _first_results(written.select("qidx", "doc_id"), ks[-1])
        joined = first.join(coded, on="doc_id", how="left").with_columns(
            new=pl.col("code").is_null()
            | (pl.col("qidx") * (1 << 32) + pl.col("code")).is_first_distinct()
        )
        tally.add(tally_of_joined(joined, ks, has_text=corpus.has_text, query="qidx"))
    return tally


def tally_log(
    path: Path,
    corpus: ClusterCorpus,
    ks: Sequence[int],
    *,
    order: Order = Order.TREC_EVAL,
    fmt: str | None = None,
    columns: RunColumns | None = None,
    compiled_from: int = COMPILED_FROM_BYTES,
) -> LogTally:
    """The cluster tally of every query of a log (a run without judgments) at the cutoffs
    ``ks`` (sorted, distinct), under the same conventions as ``load_log_run``.

    A file of ``compiled_from`` bytes or more is read by the compiled path
    (``app.eval.log_fast``); a file it does not take, and a smaller one, block by block
    with polars; a log whose queries are not together, whole."""
    fmt = fmt or detect_run_format(path)
    columns = columns or RunColumns()
    if fmt in ("trec", "jsonl", "parquet") and path.stat().st_size >= compiled_from:
        shape = HIT_FORMAT if fmt == "jsonl" else fmt
        try:
            tally, lines = compiled_tally(path, corpus, ks, order=order, fmt=shape, columns=columns)
            return LogTally(tally, lines=lines, streamed=True)
        except NotTaken:
            pass
        except QueriesNotContiguous:
            return _whole(path, corpus, ks, order=order, fmt=fmt, columns=columns)
    try:
        return _streamed(path, corpus, tuple(ks), order=order, fmt=fmt, columns=columns)
    except (WholeFile, QueriesNotContiguous):
        pass
    return _whole(path, corpus, ks, order=order, fmt=fmt, columns=columns)


def _whole(
    path: Path,
    corpus: ClusterCorpus,
    ks: Sequence[int],
    *,
    order: Order,
    fmt: str,
    columns: RunColumns,
) -> LogTally:
    top = load_log_run(path, depth=max(ks), order=order, fmt=fmt, columns=columns)
    return LogTally(tally_of_ranked(top, corpus, ks), lines=-1, streamed=False)


def _streamed(
    path: Path,
    corpus: ClusterCorpus,
    ks: tuple[int, ...],
    *,
    order: Order,
    fmt: str,
    columns: RunColumns,
) -> LogTally:
    source = str(path)
    total = ClusterTally(ks=ks, has_text=corpus.has_text)
    lines = 0
    pending: deque[Future[ClusterTally]] = deque()

    coded = _coded(corpus)

    def tally(queries: pl.DataFrame, detail: str) -> ClusterTally:
        return _block_tally(queries, coded, corpus, ks, order=order, fmt=detail, source=source)

    with ExitStack() as stack:
        plain = stack.enter_context(plain_file(path))
        blocks, detail = _parsed_blocks(plain, source, fmt, order, columns)
        parsed = stack.enter_context(ahead(blocks))
        rankers = stack.enter_context(ThreadPoolExecutor(RANKERS, thread_name_prefix="log-ranks"))
        try:
            for queries, read_lines, _ in whole_queries(parsed):
                lines += read_lines
                if queries.height:
                    pending.append(rankers.submit(tally, queries, detail))
                    while len(pending) >= RANKERS:
                        total.add(pending.popleft().result())
            while pending:
                total.add(pending.popleft().result())
        finally:
            for future in pending:
                future.cancel()
    if not lines:
        raise WholeFile  # "the run is empty", worded by the whole-file path
    return LogTally(total, lines=lines, streamed=True)


def _trace_rows(
    ranked: pl.DataFrame, found: ClusterCorpus | None
) -> tuple[pl.DataFrame, RankTotals]:
    """The stored form of some whole queries' traces (``trace_ranking``'s, in columns): qid,
    returned, repeats (the JSON text of the ranks at which a result repeats a cluster seen
    higher), and their per-rank totals. ``found``: None when nothing depends on which
    document sits where (no clusters, no text)."""
    if found is None:
        rows = ranked.group_by("qid").agg(pl.len().cast(pl.Int64).alias("returned"))
        return rows.with_columns(repeats=pl.lit("[]")), RankTotals()
    joined = ranked.select("qid", "rank", "doc_id").join(found.documents, on="doc_id", how="left")
    rows = (
        joined.with_columns(repeated=repeats_a_cluster())
        .group_by("qid")
        .agg(
            pl.len().cast(pl.Int64).alias("returned"),
            pl.col("rank").filter(pl.col("repeated")).sort().cast(pl.String).alias("repeats"),
        )
        .with_columns(repeats="[" + pl.col("repeats").list.join(",") + "]")
    )
    traced = trace_totals(joined, has_text=found.has_text)
    return rows, traced


def stream_log_traces(
    path: Path,
    corpus: CorpusSource,
    *,
    sink: Callable[[pl.DataFrame], None],
    order: Order = Order.TREC_EVAL,
    fmt: str | None = None,
    columns: RunColumns | None = None,
    progress: ProgressFn | None = None,
    id_limits: IdLimits | None = None,
) -> tuple[RunReport, RankTotals]:
    """A log run's cluster traces, block by block of whole queries: ``sink`` gets the stored
    rows (qid, returned, repeats) of some queries at a time, in this thread (it may write to
    a database session); the report and the per-rank totals come back. The corpus is asked,
    block by block, for the documents the block returned. WholeFile or QueriesNotContiguous
    when the file needs the whole-file path (``load_log_traces``): the caller undoes what its
    sink did and takes that path."""
    fmt = fmt or detect_run_format(path)
    source = str(path)
    lines = queries = dropped = 0
    totals = RankTotals()
    with ExitStack() as stack:
        plain = stack.enter_context(plain_file(path))
        blocks, detail = _parsed_blocks(plain, source, fmt, order, columns or RunColumns())
        parsed = stack.enter_context(ahead(blocks))
        for block, read_lines, read in whole_queries(parsed):
            if progress is not None and read:
                progress(read)
            lines += read_lines
            if not block.height:
                continue
            check_ids(block, path, id_limits)
            ranked = rank_every_query(block, order=order, fmt=detail, source=source, depth=None)
            dropped += block.height - ranked.height
            found = None
            if corpus.matters:
                found = corpus.lookup(ranked.get_column("doc_id").unique().to_list())
            rows, traced = _trace_rows(ranked, found)
            queries += rows.height
            totals = add_totals(totals, traced)
            sink(rows)
    if not lines:
        raise WholeFile  # "the run is empty", worded by the whole-file path
    if not corpus.has_text:
        totals = RankTotals(clustered=totals.clustered)
    report = RunReport(
        source=source,
        format=detail,
        order=effective_order(order, detail).value,
        lines=lines,
        queries=queries,
        duplicates_dropped=dropped,
        unknown_queries=0,
        unknown_query_lines=0,
        golden_queries_absent=0,
        warnings=repeat_warnings(dropped),
    )
    return report, totals


def warm() -> None:
    """Compile the compiled paths ahead, so that the first large log is not kept waiting
    (``make install``, the image): numba's (kept on disk), by a tiny log in each format and
    order and a tiny corpus; then the passes built ahead of time (``app.eval.aot``), checked
    to tally those logs as numba's do. Raises if a path declined its own input or the two
    disagree."""
    import tempfile

    from app.eval.aot import load_passes, passes_unbuilt
    from app.eval.ranks_fast import build_ahead

    with tempfile.TemporaryDirectory(prefix="misstriage-warm-") as tmp:
        folder = Path(tmp)
        with passes_unbuilt():
            compiled = _warm_logs(folder)
        build_ahead()  # evaluate's pass and the log pass, built ahead of time
        if load_passes() is not None and _warm_logs(folder) != compiled:
            raise RuntimeError("the log pass built ahead of time tallies otherwise than numba's")


def _warm_logs(folder: Path) -> list[ClusterTally]:
    """The tallies of a tiny log in each format and order (written in ``folder`` if not
    there), each by the log pass, and the direct calls' answers checked; raises if the pass
    declined its own input."""
    from app.eval.cluster_corpus import read_compiled
    from app.eval.passes import TREC, log_pass

    if not (folder / "corpus.jsonl").exists():
        (folder / "corpus.jsonl").write_text(
            '{"_id": "d1", "title": "t", "text": "x", "cluster_id": "c1"}\n'
            '{"_id": "d2", "title": "", "text": "y\\u00e9", "cluster_id": "c1"}\n'
            '{"_id": "d3", "text": "z"}\n'
        )
        (folder / "log.trec").write_text(
            "q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 1.5 t\nq1 Q0 d9 3 1.5 t\nq2 Q0 d3 1 1 t\n"
        )
        (folder / "log.jsonl").write_text(
            '{"qid": "q1", "doc_id": "d1", "score": 2.5, "rank": 1}\n'
            '{"qid": "q1", "doc_id": "d9", "score": 1.5, "rank": 2}\n'
        )
        # ids in their string views, and one longer than a view holds (in a data buffer)
        long_id = "d9-of-a-name-longer-than-twelve-bytes"
        results = {"qid": ["q1", "q1", "q2"], "doc_id": ["d1", "d2", "d3"], "score": [2.0, 1, 1]}
        pl.DataFrame({**results, "rank": [1, 2, 1]}).write_parquet(folder / "short.parquet")
        results = {"qid": ["q1", "q1"], "doc_id": ["d1", long_id], "score": [2.0, 1.0]}
        pl.DataFrame({**results, "rank": [1, 2]}).write_parquet(folder / "log.parquet")
    corpus = read_compiled(folder / "corpus.jsonl")
    if corpus is None:
        raise RuntimeError("the corpus was not read by its compiled pass")
    functions = log_pass()
    # a block's pieces are cut only in a block of a megabyte or more
    text = b"q1 Q0 d1 1 1 t\nq1 Q0 d2 2 1 t\nq2 Q0 d2 1 1 t\n"
    buf = np.frombuffer(bytearray(text), np.uint8)
    if functions.line_query_cut(buf, 0, len(buf), TREC, ord(" ")) != 30:
        raise RuntimeError("query_cut did not find the second query")
    # a block's last query is looked for in a block before the log's last; a Parquet
    # batch is cut in pieces from 4,096 rows
    if functions.last_line_query_start(buf, len(buf), TREC, ord(" ")) != 30:
        raise RuntimeError("last_query_start did not find the last query")
    ends = np.array([0, 2, 4, 6], np.int64)
    qids = np.frombuffer(bytearray(b"q1q1q2"), np.uint8)
    if functions.row_query_start(qids, ends, 1, 3) != 2:
        raise RuntimeError("query_start did not find the second query")
    tallies = []
    for name, fmt in _WARM_LOGS.items():
        for order in Order:
            # the compiled path itself (tally_log would read a log it declines another way)
            try:
                tally, _ = compiled_tally(folder / name, corpus, (1, 2), order=order, fmt=fmt)
            except NotTaken:
                raise RuntimeError(f"the log pass declined {name} ({order})") from None
            tallies.append(tally)
    return tallies


#: ``warm``'s logs and their formats.
_WARM_LOGS = {
    "log.trec": "trec",
    "log.jsonl": "jsonl-hits",
    "short.parquet": "parquet",
    "log.parquet": "parquet",
}
