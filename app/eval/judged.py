"""Ranks of judged documents in any run: every line joined with the judged documents of its
query, the lines that precede each counted."""

from __future__ import annotations

import polars as pl

from app.eval.conventions import Order


def _precedes(order: Order) -> pl.Expr:
    """True where a result (left columns) comes before the judged document (``_j`` columns)."""
    if order is Order.TREC_EVAL:
        return (pl.col("score") > pl.col("score_j")) | (
            (pl.col("score") == pl.col("score_j")) & (pl.col("doc_id") > pl.col("doc_id_j"))
        )
    if order is Order.RANK:
        return (pl.col("rank") < pl.col("rank_j")) | (
            (pl.col("rank") == pl.col("rank_j")) & (pl.col("pos") < pl.col("pos_j"))
        )
    return pl.col("pos") < pl.col("pos_j")


def joined_ranks(kept: pl.LazyFrame, judgments: pl.DataFrame, order: Order) -> pl.DataFrame:
    """qid, doc_id, grade, rank of every judged document among the ``kept`` lines (qid,
    doc_id, score, rank, pos), sorted by qid and rank: one plus the number of lines of its
    query that precede it under ``order``, counted by joining every line with the judged
    documents of its query (any run; ``app.eval.stretches`` counts without the join when each
    query's lines are together)."""
    # Filtering on the (few) judged document ids first avoids hashing every (qid, doc_id) pair.
    judged_docs = judgments.get_column("doc_id").unique().implode()
    judged = (
        kept.filter(pl.col("doc_id").is_in(judged_docs))
        .join(judgments.lazy(), on=["qid", "doc_id"], how="inner")
        .collect()
    )
    targets = judged.select(
        "qid",
        pl.col("doc_id").alias("doc_id_j"),
        pl.col("score").alias("score_j"),
        pl.col("rank").alias("rank_j"),
        pl.col("pos").alias("pos_j"),
    )
    before = (
        kept.select("qid", "doc_id", "score", "rank", "pos")
        .join(targets.lazy(), on="qid")
        .filter(_precedes(order))
        .group_by("qid", "doc_id_j")
        .agg(pl.len().alias("before"))
        .collect(engine="streaming")
    )
    return (
        judged.join(before, left_on=["qid", "doc_id"], right_on=["qid", "doc_id_j"], how="left")
        .select(
            "qid",
            "doc_id",
            "grade",
            (pl.col("before").fill_null(0) + 1).cast(pl.UInt32).alias("rank"),
        )
        .sort("qid", "rank")
    )
