"""Ranking queries written in ranking order (app.eval.in_order) gives what rank_part and
top_of_results give, for every order, with ties written in any order, repeated documents,
queries outside the golden set and a head shorter or longer than the queries; anything else is
left to them (None)."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from app.eval import Order
from app.eval.in_order import known_qids, rank_in_order
from app.eval.ranking import rank_part, top_of_results
from tests.support.evaluation import golden

QUERIES = 40


def written_in_order(seed: int, order: Order) -> tuple[str, pl.DataFrame]:
    """A qrels and run lines (qid, doc_id, score, rank, pos) written best first for
    ``order``: scores descending with many ties (one decimal) in random docno order, ranks
    ascending with repeats; repeated documents; a query of one line; queries not judged."""
    rng = random.Random(seed)
    qrels: list[str] = []
    rows: list[tuple[str, str, float, int]] = []
    for q in range(QUERIES):
        qid = f"q{q:03d}"
        n = 1 if q == 5 else rng.randrange(2, 60)
        docs = [f"d{rng.randrange(300)}" for _ in range(n)]  # repeats within a query
        # (+ 0.0: no -0.0, which the sort and the comparisons may place apart)
        scores = sorted((round(rng.uniform(-2, 3), 1) + 0.0 for _ in range(n)), reverse=True)
        ranks = sorted(rng.randrange(1, n + 1) for _ in range(n))
        if order is Order.FILE:
            rng.shuffle(scores)
        if q % 7 != 3:  # every seventh query is not in the golden set
            judged = {*rng.sample(docs, min(3, n)), f"d{rng.randrange(300)}"}
            qrels.extend(f"{qid} 0 {doc} {rng.choice((0, 1, 2))}\n" for doc in sorted(judged))
        rows.extend((qid, d, s, r) for d, s, r in zip(docs, scores, ranks, strict=True))
    frame = pl.DataFrame(
        rows,
        schema={"qid": pl.String, "doc_id": pl.String, "score": pl.Float64, "rank": pl.Int64},
        orient="row",
    ).with_row_index("pos")
    return "".join(qrels), frame


def sorted_way(
    frame: pl.DataFrame, gold: object, order: Order, depth: int
) -> tuple[object, pl.DataFrame]:
    part = rank_part(frame, gold, order)  # type: ignore[arg-type]
    return part, top_of_results(part.results, order, depth)


@pytest.mark.parametrize("depth", [1, 5, 1000])
@pytest.mark.parametrize("order", list(Order))
@pytest.mark.parametrize("seed", range(4))
def test_in_order_ranks_as_the_sort(tmp_path: Path, seed: int, order: Order, depth: int) -> None:
    qrels, frame = written_in_order(seed, order)
    gold = golden(tmp_path, qrels)
    ranked = rank_in_order(frame, gold, known_qids(gold), order, depth)
    assert ranked is not None
    part, top = ranked
    expected, expected_top = sorted_way(frame, gold, order, depth)
    assert_frame_equal(part.per_query, expected.per_query, check_row_order=False)  # type: ignore[attr-defined]
    assert_frame_equal(part.judged, expected.judged)  # type: ignore[attr-defined]
    assert part.dropped.sort().to_list() == expected.dropped.sort().to_list()  # type: ignore[attr-defined]
    assert part.dropped.len() > 0
    assert part.dropped_per_query == expected.dropped_per_query  # type: ignore[attr-defined]
    assert (part.unknown_queries, part.unknown_lines) == (
        expected.unknown_queries,  # type: ignore[attr-defined]
        expected.unknown_lines,  # type: ignore[attr-defined]
    )
    assert part.unknown_queries > 0
    assert_frame_equal(top.sort("qid", "rank"), expected_top)


@pytest.mark.parametrize(
    ("order", "lines", "apart"),
    [
        # a better score after a worse one
        (Order.TREC_EVAL, [("q1", "d1", 1.0, 1), ("q1", "d2", 2.0, 2)], True),
        # -0.0 ties with 0.0 when compared, not always when sorted: never in order
        (Order.TREC_EVAL, [("q1", "d1", 0.0, 1), ("q1", "d2", -0.0, 2)], False),
        # a smaller rank after a greater one
        (Order.RANK, [("q1", "d1", 1.0, 2), ("q1", "d2", 1.0, 1)], True),
    ],
)
def test_anything_else_is_left_to_the_sort(
    tmp_path: Path, order: Order, lines: list[tuple[str, str, float, int]], apart: bool
) -> None:
    gold = golden(tmp_path, "q1 0 d1 1\nq1 0 d2 1\n")
    frame = pl.DataFrame(
        lines,
        schema={"qid": pl.String, "doc_id": pl.String, "score": pl.Float64, "rank": pl.Int64},
        orient="row",
    ).with_row_index("pos")
    assert rank_in_order(frame, gold, known_qids(gold), order, 10) is None
    # the next query may begin anywhere: only lines of one query are compared
    other = frame.with_columns(pl.Series("qid", ["q1", "q2"]))
    assert (rank_in_order(other, gold, known_qids(gold), order, 10) is not None) is apart
