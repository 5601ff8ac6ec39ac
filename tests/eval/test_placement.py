"""The one sentence about where the run put a miss (app/eval/placement.py)."""

from __future__ import annotations

import pytest

from app.eval.placement import where_the_run_put_it


@pytest.mark.parametrize(
    ("rank", "retrieved", "depth", "sentence"),
    [
        (73, 1000, 50, "rank 73 of 1000"),
        (51, 51, 50, "rank 51 of 51"),
        (None, 34, 50, "not retrieved in the top 34"),
        (None, 1000, 50, "not retrieved in the top 1000"),
        (None, 2, 50, "not retrieved in the top 2"),
        (None, 1, 50, "not retrieved: the run returned 1 result for this query"),
        (None, 0, 50, "not retrieved: the run returned nothing for this query"),
        (None, None, 50, "not retrieved: the run returned nothing for this query"),
    ],
)
def test_the_three_cases_and_the_singular(
    rank: int | None, retrieved: int | None, depth: int, sentence: str
) -> None:
    assert where_the_run_put_it(rank, retrieved, depth) == sentence


@pytest.mark.parametrize(
    ("rank", "retrieved", "depth", "why"),
    [
        (10, 1000, 50, "not a miss"),  # within the candidates
        (50, 1000, 50, "not a miss"),
        (73, 60, 50, "beyond the run's 60 results"),
        (73, None, 50, "beyond the run's 0 results"),
        (None, -1, 50, "0 or more results"),
        (None, 10, 0, "depth must be >= 1"),
    ],
)
def test_contradictions_are_refused(
    rank: int | None, retrieved: int | None, depth: int, why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        where_the_run_put_it(rank, retrieved, depth)
