"""Large TREC runs in bounded memory: ranked block by block of whole queries.

Retrieval toolkits write a run query by query. Such a file is read in blocks of about
``BLOCK_BYTES``; the complete queries of each block are ranked (``rank_part``: the conventions
are per query) and the heads of their rankings kept, so no more than a block of lines is held at
once, instead of every line of the run. The lines of the last query of a block wait for the
next block. Anything else goes to the whole-file path (``load_run``), which words the errors
and gives the same results: a query whose lines are not contiguous, a line the fast reader
refuses, an id too long for the store, a missing score, JSONL, and a corpus with clusters or
text (its traces need the whole run sorted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import polars as pl

from app.eval.cluster_profile import CorpusSource, trace_ranking
from app.eval.cluster_ranks import no_cluster_ranks
from app.eval.conventions import Order
from app.eval.errors import InputError
from app.eval.golden import IdLimits, Judgments
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
from app.eval.textio import MAX_LINE_BYTES, ProgressFn, plain_file, read_fast, sniff_separator
from app.eval.trec import RUN_COLUMNS, run_columns

#: About this many bytes of a run are parsed at once (some 240,000 lines of an MS MARCO run):
#: at 6.98M lines, 8 MiB blocks peaked 50 MB lower than 16 MiB ones for the same CPU time.
BLOCK_BYTES = 8 << 20

#: What the heads are turned into, block by block (a frame with a qid column).
ShapeFn = Callable[[pl.DataFrame], pl.DataFrame]


class _WholeFile(Exception):
    """The file needs the whole-file path."""


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
) -> tuple[RankedRun, pl.DataFrame]:
    """``load_run(..., keep_results=True)`` and ``shape(top_candidates(run, keep_depth))``,
    sorted by qid, in bounded memory for a TREC file written query by query (see the module);
    the run comes back without its results."""
    if keep_depth < 1:
        raise ValueError(f"depth must be >= 1, got {keep_depth}")
    if (corpus is None or not corpus.matters) and (fmt or detect_run_format(path)) == "trec":
        try:
            return _streamed(
                path,
                golden,
                name=name,
                keep_depth=keep_depth,
                shape=shape,
                order=order,
                progress=progress,
                id_limits=id_limits,
                corpus=corpus,
            )
        except _WholeFile:
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
    )
    shaped = shape(top_candidates(ranked, keep_depth)).sort("qid")
    return replace(ranked, results=None), shaped


def _streamed(
    path: Path,
    golden: Judgments,
    *,
    name: str,
    keep_depth: int,
    shape: ShapeFn,
    order: Order,
    progress: ProgressFn | None,
    id_limits: IdLimits | None,
    corpus: CorpusSource | None,
) -> tuple[RankedRun, pl.DataFrame]:
    source = str(path)
    parts: list[RankedPart] = []
    shaped: list[pl.DataFrame] = []
    finished: set[str] = set()
    lines = 0
    carry: pl.DataFrame | None = None

    def rank(lines_of_queries: pl.DataFrame) -> None:
        part = rank_part(lines_of_queries.with_row_index("pos"), golden, order)
        shaped.append(shape(top_of_results(part.results, order, keep_depth)))
        # The part's lines are no longer needed: only its counts and judged ranks stay.
        parts.append(replace(part, results=pl.LazyFrame()))

    try:
        with plain_file(path) as plain:
            for block, last in _blocks(plain, source, order, id_limits, progress):
                lines += block.height
                frame = block if carry is None else pl.concat([carry, block])
                qids = frame.get_column("qid")
                # Where each run of lines of one query begins: a query seen in two runs, here
                # or in an earlier block, is not contiguous.
                begins = (qids != qids.shift(1)).fill_null(True).arg_true()
                runs = qids.gather(begins).to_list()
                if len(set(runs)) != len(runs) or not finished.isdisjoint(runs):
                    raise _WholeFile
                # The last query may go on in the next block: it waits (a slice, not a copy).
                cut = frame.height if last or not len(begins) else int(begins[-1])
                carry = None if last else frame.slice(cut)
                if cut:
                    finished.update(runs if last else runs[:-1])
                    rank(frame.slice(0, cut))
    except InputError:
        raise _WholeFile from None  # the whole-file path words it
    if not lines:
        raise _WholeFile  # "the run is empty"
    ranked = finish_ranking(
        parts, golden, order=order, name=name, source=source, fmt="trec", lines=lines
    )
    if corpus is not None:  # without clusters or text: every rank is its own cluster rank
        traces = trace_ranking(None, answered_per_query(parts))
        ranked = replace(ranked, traces=replace(traces, cluster_ranks=no_cluster_ranks()))
    return ranked, pl.concat(shaped).sort("qid")


def _blocks(
    path: Path,
    source: str,
    order: Order,
    id_limits: IdLimits | None,
    progress: ProgressFn | None,
) -> Iterator[tuple[pl.DataFrame, bool]]:
    """(parsed lines, whether they are the last) of each block of whole lines; _WholeFile
    at the first thing the fast reader refuses or the conventions need worded."""
    separator = sniff_separator(path)
    if separator is None:
        raise _WholeFile
    with_rank = order is Order.RANK
    first_line, rest = 1, b""
    with path.open("rb") as handle:
        while True:
            data = handle.read(BLOCK_BYTES)
            if progress is not None and data:
                progress(len(data))
            last = not data
            data = rest + data
            if not last:
                cut = data.rfind(b"\n") + 1
                if not cut:
                    if len(data) > MAX_LINE_BYTES:
                        raise _WholeFile
                    rest = data
                    continue
                data, rest = data[:cut], data[cut:]
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
                    raise _WholeFile
                frame = run_columns(frame, with_rank=with_rank)
                check_ids(frame, path, id_limits)
                check_order_columns(frame, order, source)
                first_line += data.count(b"\n")
                yield frame, last
            elif last:
                yield run_columns(_empty(with_rank), with_rank=with_rank), True
            if last:
                return


def _empty(with_rank: bool) -> pl.DataFrame:
    schema = {"qid": pl.String, "doc_id": pl.String, "score": pl.Float64, "line": pl.UInt32}
    if with_rank:
        schema["rank"] = pl.Int64
    return pl.DataFrame(schema=schema)
