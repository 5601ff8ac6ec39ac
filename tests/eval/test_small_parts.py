"""A small run is ranked by polars alone (``app.eval.ranking.SMALL_PART_LINES``), a large one
with numpy's arrays (stretches, hashed repeats): both give the same ranking, on runs built to
trap them (tied scores, repeated documents, rank columns that disagree, unknown queries,
queries written in pieces)."""

from __future__ import annotations

import random

import polars as pl
import pytest

from app.eval import Order, golden_from_frame, ranking, repeats
from app.eval.ranking import RankedRun, rank_run


def _lines(rng: random.Random, *, together: bool) -> pl.DataFrame:
    rows = []
    for q in range(14):
        for _ in range(rng.randrange(1, 40)):
            rows.append((f"q{q}", f"d{rng.randrange(25)}", float(rng.randrange(6)) - 2.5))
    if not together:
        rng.shuffle(rows)
    frame = pl.DataFrame(rows, schema=["qid", "doc_id", "score"], orient="row")
    return frame.with_columns(
        pl.Series("rank", [rng.randrange(1, 8) for _ in rows], dtype=pl.Int64),
        pl.int_range(1, pl.len() + 1, dtype=pl.UInt32).alias("line"),
    )


def _golden(rng: random.Random) -> pl.DataFrame:
    # q12 and q13 are not in the golden set; q14 is, and absent from the run
    pairs = {(f"q{rng.randrange(12)}", f"d{rng.randrange(25)}") for _ in range(120)}
    pairs.add(("q14", "d1"))
    return pl.DataFrame(
        [(q, d, rng.randrange(0, 3)) for q, d in sorted(pairs)],
        schema={"qid": pl.String, "doc_id": pl.String, "grade": pl.Int64},
        orient="row",
    )


def _ranked(frame: pl.DataFrame, judgments: pl.DataFrame, order: Order) -> RankedRun:
    return rank_run(
        frame, golden_from_frame(judgments), order=order, name="r", source="r.trec", fmt="trec"
    )


@pytest.mark.parametrize("together", [True, False], ids=["together", "interleaved"])
@pytest.mark.parametrize("order", list(Order))
@pytest.mark.parametrize("seed", range(6))
def test_the_small_path_ranks_as_the_large_one(
    order: Order, seed: int, together: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    frame, judgments = _lines(rng, together=together), _golden(rng)
    small = _ranked(frame, judgments, order)
    monkeypatch.setattr(ranking, "SMALL_PART_LINES", 0)
    large = _ranked(frame, judgments, order)
    assert small.report.duplicates_dropped > 0
    assert small.report.unknown_queries == 2
    assert small.judged.equals(large.judged)
    assert small.retrieved == large.retrieved
    assert small.report == large.report


def test_a_part_is_small_by_its_lines_and_its_join() -> None:
    """Small: at most SMALL_PART_LINES lines, and lines times the most judgments of a query
    at most SMALL_PART_JOINED (100 judgments: 20,000 lines)."""
    golden = golden_from_frame(
        pl.DataFrame({"qid": "q0", "doc_id": [f"d{i}" for i in range(100)], "grade": 1})
    )

    def lines(n: int) -> pl.DataFrame:
        return pl.DataFrame({"qid": "q0", "doc_id": [f"d{i}" for i in range(n)], "score": 1.0})

    joined = ranking.SMALL_PART_JOINED // 100
    assert joined < ranking.SMALL_PART_LINES
    assert ranking._is_small(lines(joined), golden)
    assert not ranking._is_small(lines(joined + 1), golden)
    few = golden_from_frame(pl.DataFrame({"qid": ["q0"], "doc_id": ["d0"], "grade": [1]}))
    assert ranking._is_small(lines(ranking.SMALL_PART_LINES), few)
    assert not ranking._is_small(lines(ranking.SMALL_PART_LINES + 1), few)


@pytest.mark.parametrize("seed", range(4))
def test_small_repeats_are_the_hashed_ones(seed: int) -> None:
    rng = random.Random(seed)
    pairs = [(f"q{rng.randrange(30)}", f"d{rng.randrange(60)}") for _ in range(3000)]
    frame = pl.DataFrame(pairs, schema=["qid", "doc_id"], orient="row").with_row_index("pos", 1)
    expected = repeats.repeated_lines(frame)
    assert expected.len()
    assert ranking.repeated_lines_small(frame).sort().equals(expected.sort())
