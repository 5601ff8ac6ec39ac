"""Ranking some whole queries of a run whose lines are in ranking order already, but for ties.

Retrieval toolkits write each query's results best first: by score descending for trec_eval's
order (ties in any order: trec_eval puts the greater docno first), by the rank column for order
``rank``, in any order for order ``file``. When every query of a part is written so, its kept
lines (known queries, repeated documents dropped) are in ranking order as they stand but for
the lines of a tied score, sorted among themselves: a result's rank is its place among its
query's kept lines. The judged ranks and the head of each ranking follow in one pass, where
``app.eval.ranking.rank_part`` compares every line with the judged documents of its query and
``top_of_results`` sorts the best lines. Anything else (a query out of order, a score of -0.0,
which a sort and a comparison may place apart from 0.0) is left to those.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from app.eval.conventions import Order
from app.eval.golden import Judgments
from app.eval.ranking import RankedPart
from app.eval.repeats import exact_repeats

#: Odd 64-bit constant mixing a query's number into its document hashes.
_MIX = 0x9E3779B97F4A7C15
#: The row number (rows in file order).
_ROW = pl.int_range(pl.len(), dtype=pl.UInt32)
#: Whether a row is its query's first line; the query's number, from 1 (the query ids are
#: compared once, for both).
_FIRST, _QUERY = pl.col("_first"), pl.col("_query")


def known_qids(golden: Judgments) -> pl.Series:
    """The golden set's queries (judged or with a text), once: every part asks."""
    return pl.concat(
        [golden.judgments.get_column("qid"), pl.Series(list(golden.queries), dtype=pl.String)]
    ).unique()


def rank_in_order(
    frame: pl.DataFrame, golden: Judgments, known: pl.Series, order: Order, depth: int
) -> tuple[RankedPart, pl.DataFrame] | None:
    """What ``rank_part`` gives for ``frame`` (lines of whole queries, each query's lines
    together, with ``pos``), without its results, and the rows ``top_of_results`` gives for
    its first ``depth`` results, each query's rows together in rank order, the queries in file
    order; None when some query's lines are not in ranking order (see the module).
    ``known``: ``known_qids(golden)``."""
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    first = (pl.col("qid") != pl.col("qid").shift(1)).fill_null(True)
    frame = frame.with_columns(first.alias("_first")).with_columns(_FIRST.cum_sum().alias("_query"))
    if not _in_order(frame, order):
        return None
    # the queries in file order, each once (row i: query number i + 1), and their lines
    per_query = (
        frame.get_column("qid")
        .rle()
        .struct.unnest()
        .select(pl.col("value").alias("qid"), pl.col("len").cast(pl.get_index_type()).alias("n"))
    )
    is_known = per_query.get_column("qid").is_in(known.implode())
    unknown = per_query.filter(~is_known)
    repeated = _repeated_pos(frame)
    marked = frame.with_columns(
        pl.col("pos").is_in(repeated.implode()).alias("_repeat"),
        pl.lit(is_known).gather(_QUERY - 1).alias("_known"),
    )
    repeats = marked.filter("_repeat")
    # A repeated line is never a query's first: the kept lines keep their queries' flags.
    kept = marked.filter(pl.col("_known") & ~pl.col("_repeat")).select(
        "qid", "doc_id", "score", "_first", "_query"
    )
    kept = kept.with_columns(_ranks(kept, order))
    judged_docs = golden.judgments.get_column("doc_id").unique().implode()
    judged = (
        kept.filter(pl.col("doc_id").is_in(judged_docs))
        .join(golden.judgments, on=["qid", "doc_id"], how="inner")
        .select("qid", "doc_id", "grade", "rank")
        .sort("qid", "rank")
    )
    # Each query's rows together in rank order: one number sorted (by numpy, several times
    # faster than polars here), not the query ids.
    top = kept.filter(pl.col("rank") <= depth)
    key = top.select(_QUERY.cast(pl.UInt64) * (1 << 32) + pl.col("rank")).to_series()
    top = top[np.argsort(key.to_numpy())].select("qid", "rank", "doc_id", "score")
    part = RankedPart(
        per_query=per_query,
        dropped=repeats.get_column("pos"),
        dropped_per_query=dict(repeats.group_by("qid").len().iter_rows()),
        unknown_queries=unknown.height,
        unknown_lines=int(unknown.get_column("n").sum()),
        judged=judged,
        results=pl.LazyFrame(),
    )
    return part, top


def _in_order(frame: pl.DataFrame, order: Order) -> bool:
    """Whether every line but the first of its query comes after the line before it in the
    query's ranking, or (order trec_eval) ties with it."""
    if order is Order.FILE:
        return True
    if order is Order.RANK:
        after = pl.col("rank") >= pl.col("rank").shift(1)  # equal ranks keep file order
    else:
        after = pl.col("score") <= pl.col("score").shift(1)
        negative_zero = (pl.col("score") == 0) & (1.0 / pl.col("score") < 0)
        if frame.select(negative_zero.any()).item():
            return False
    return bool(frame.select((_FIRST | after.fill_null(False)).all()).item())


def _ranks(kept: pl.DataFrame, order: Order) -> pl.Series:
    """The rank of each of the ``kept`` lines (in order but for ties, see ``_in_order``): its
    place among its query's lines, the lines of a tied score sorted by docno descending."""
    place = _ROW - pl.when(_FIRST).then(_ROW).forward_fill()  # from 0 in each query
    if order is not Order.TREC_EVAL or not kept.height:
        return kept.select((place + 1).alias("rank")).to_series()
    # A line ties with the one before it: same query, same score. A run of one score in one
    # query (a tie or a single line) is numbered, and knows the place of its first line.
    tied = ~_FIRST & (pl.col("score") == pl.col("score").shift(1))
    lines = kept.select(
        place.alias("place"),
        tied.alias("tied"),
        (~tied).cum_sum().alias("run"),
        pl.when(~tied).then(place).forward_fill().alias("run_place"),
        "doc_id",
    )
    ranks = (lines.get_column("place") + 1).alias("rank")
    in_tie = pl.col("tied") | pl.col("tied").shift(-1).fill_null(False)
    ties = lines.with_row_index("row").filter(in_tie)
    if not ties.height:
        return ranks
    run_start = (pl.col("run") != pl.col("run").shift(1)).fill_null(True)
    ordered = ties.sort(["run", "doc_id"], descending=[False, True]).select(
        "row",
        (pl.col("run_place") + _ROW - pl.when(run_start).then(_ROW).forward_fill() + 1).alias(
            "rank"
        ),
    )
    return ranks.scatter(ordered.get_column("row"), ordered.get_column("rank"))


def _repeated_pos(frame: pl.DataFrame) -> pl.Series:
    """``pos`` of the lines that repeat a (qid, doc_id) of an earlier line: the first wins.

    The queries' lines are together, so a 64-bit hash of the document mixed with the query's
    number finds the candidates; numpy sorts those keys several times faster than polars finds
    their repeats. Only the candidates are compared exactly, so a collision can never drop a
    line."""
    key = pl.col("doc_id").hash() ^ (_QUERY.cast(pl.UInt64) * pl.lit(_MIX, pl.UInt64))
    keys = np.sort(frame.select(key).to_series().to_numpy())
    repeated = np.unique(keys[1:][keys[1:] == keys[:-1]])
    if not len(repeated):
        return pl.Series("pos", [], dtype=frame.schema["pos"])
    candidates = frame.filter(key.is_in(pl.Series(repeated).implode()))
    return exact_repeats(candidates, key)
