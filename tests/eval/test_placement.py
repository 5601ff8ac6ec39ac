"""The one sentence about where the run put a miss (app/eval/placement.py)."""

from __future__ import annotations

import pytest

from app.eval.placement import where_the_run_put_it


@pytest.mark.parametrize(
    ("rank", "retrieved", "depth", "sentence"),
    [
        (73, 1000, 50, "rank 73 of 1000"),
        (51, 51, 50, "rank 51 of 51"),
        (None, 34, 50, "not retrieved: not among the run's 34 results for this query"),
        (None, 1000, 50, "not retrieved: not among the run's 1000 results for this query"),
        (None, 2, 50, "not retrieved: not among the run's 2 results for this query"),
        (None, 1, 50, "not retrieved: the run's only result for this query is another document"),
        (None, 0, 50, "not retrieved: the run returned nothing for this query"),
        (None, None, 50, "not retrieved: the run returned nothing for this query"),
        # a triage at depth 1 (the only candidate is the top result)
        (2, 10, 1, "rank 2 of 10"),
        (None, 10, 1, "not retrieved: not among the run's 10 results for this query"),
        (None, 1, 1, "not retrieved: the run's only result for this query is another document"),
        (None, 0, 1, "not retrieved: the run returned nothing for this query"),
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


@pytest.mark.parametrize("depth", [1, 2, 10, 50, 1000])
@pytest.mark.parametrize("retrieved", [None, 0, 1, 2, 34, 1000])
def test_no_sentence_names_a_top_n(depth: int, retrieved: int | None) -> None:
    """ "the top 1" read badly, and "the top 34" named a cut the run never made."""
    sentence = where_the_run_put_it(None, retrieved, depth)
    assert "top" not in sentence
    assert sentence.startswith("not retrieved: ")
    if retrieved and retrieved > 1:
        assert f"{retrieved} results" in sentence
