"""Ranks counted over each query's stretch of lines equal the general path's (a join of every
line with the judged documents of its query), on runs built to trap them: tied scores (docno
breaks them), repeated documents, rank columns that disagree, unknown queries."""

from __future__ import annotations

import random

import polars as pl
import pytest

from app.eval import Order, repeats
from app.eval.judged import joined_ranks
from app.eval.stretches import judged_ranks, stretches


def _run(rng: random.Random, *, together: bool) -> pl.DataFrame:
    rows = []
    for q in range(12):
        for _ in range(rng.randrange(1, 40)):
            # few documents and few scores: repeats and ties everywhere
            rows.append((f"q{q}", f"d{rng.randrange(25)}", float(rng.randrange(6)) - 2.5))
    if not together:
        rng.shuffle(rows)
    frame = pl.DataFrame(rows, schema=["qid", "doc_id", "score"], orient="row")
    return frame.with_columns(
        pl.Series("rank", [rng.randrange(1, 8) for _ in rows], dtype=pl.Int64),
        # a TREC run's positions are its line numbers: they start at 1, not 0
        pl.int_range(3, pl.len() + 3, dtype=pl.UInt32).alias("pos"),
    )


def _judgments(rng: random.Random) -> pl.DataFrame:
    pairs = {(f"q{rng.randrange(14)}", f"d{rng.randrange(25)}") for _ in range(120)}
    return pl.DataFrame(
        [(q, d, rng.randrange(0, 3)) for q, d in sorted(pairs)],
        schema={"qid": pl.String, "doc_id": pl.String, "grade": pl.Int64},
        orient="row",
    )


@pytest.mark.parametrize("order", list(Order))
@pytest.mark.parametrize("seed", range(8))
def test_stretch_ranks_equal_the_general_ranks(order: Order, seed: int) -> None:
    rng = random.Random(seed)
    frame, judgments = _run(rng, together=True), _judgments(rng)
    groups = stretches(frame)
    assert groups is not None
    dropped = repeats.repeated_lines(frame)
    assert dropped.len()
    kept = frame.lazy().filter(~pl.col("pos").is_in(dropped.implode()))
    expected = joined_ranks(kept, judgments, order)
    assert judged_ranks(frame, groups, judgments, dropped, order).equals(expected)


def test_interleaved_queries_have_no_stretches() -> None:
    frame = _run(random.Random(3), together=False)
    assert stretches(frame) is None
    assert stretches(frame.sort("qid", maintain_order=True)) is not None


def test_stretches_count_the_lines_of_each_query() -> None:
    frame = pl.DataFrame({"qid": ["b", "b", "a", "c", "c", "c"]})
    groups = stretches(frame)
    assert groups is not None
    assert groups.per_query().rows() == [("b", 2), ("a", 1), ("c", 3)]
