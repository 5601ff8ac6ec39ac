"""Rankings in order: the sort keys of the orders, the head of each query's ranking, every
result ranked."""

from __future__ import annotations

import polars as pl

from app.eval.conventions import Order


def sort_key(order: Order) -> tuple[list[str], list[bool]]:
    """Columns and directions that sort results into ranking order within a query."""
    if order is Order.TREC_EVAL:
        return ["qid", "score", "doc_id"], [False, True, True]
    if order is Order.RANK:
        return ["qid", "rank", "pos"], [False, False, False]
    return ["qid", "pos"], [False, False]


def top_of_results(results: pl.LazyFrame, order: Order, depth: int) -> pl.DataFrame:
    """The first ``depth`` of the kept ``results`` of every query: qid, rank, doc_id, score.

    Sorting seven million lines to keep two hundred per query would copy the run twice; the
    first sort key alone finds, per query, the value of its ``depth``-th best result, and only
    the results at least that good (ties included) are sorted.
    """
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    columns, descending = sort_key(order)
    first, best_first = columns[1], descending[1]
    cut = pl.col(first).top_k(depth).min() if best_first else pl.col(first).bottom_k(depth).max()
    threshold = results.group_by("qid").agg(cut.alias("_cut"))
    keep = pl.col(first) >= pl.col("_cut") if best_first else pl.col(first) <= pl.col("_cut")
    kept = results.join(threshold, on="qid").filter(keep).collect(engine="streaming")
    return (
        _sorted(kept, columns, descending)
        .with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.UInt32).over("qid").alias("rank"))
        .filter(pl.col("rank") <= depth)
        .select("qid", "rank", "doc_id", "score")
    )


def _sorted(frame: pl.DataFrame, columns: list[str], descending: list[bool]) -> pl.DataFrame:
    """``frame`` sorted by ``columns``, eagerly: a lazy sort on several columns copies each
    row's values into one row key, and rows that share one long id (a Parquet dictionary's
    value, held once) each became a copy of it (1M rows of 1,200-byte ids: 5.8 GB, against
    0.16 GB for the eager sort, which compares the columns in place)."""
    return frame.sort(columns, descending=descending)


def rank_all(frame: pl.DataFrame, dropped: pl.Series, order: Order) -> pl.DataFrame:
    """qid, rank, doc_id of every result of ``frame`` (with its ``pos``) but the ``dropped``
    repeated lines. Only the columns the order needs are sorted (a run's lines carry more)."""
    columns, descending = sort_key(order)
    needed = ["qid", "doc_id", "pos", *(c for c in columns if c not in ("qid", "doc_id", "pos"))]
    lines = frame.select(needed)
    if dropped.len():
        lines = lines.filter(~pl.col("pos").is_in(dropped.implode()))
    return _sorted(lines, columns, descending).select(
        "qid",
        pl.int_range(1, pl.len() + 1, dtype=pl.UInt32).over("qid").alias("rank"),
        "doc_id",
    )
