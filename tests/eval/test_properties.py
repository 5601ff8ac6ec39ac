"""Invariants of the measures, over generated rankings (hypothesis)."""

from __future__ import annotations

import random

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from app.eval import Gain, Order, golden_from_frame, rank_run
from app.eval.evaluate import evaluate_run
from app.eval.measures import ndcg_at, recall_at

ranks_strategy = st.lists(
    st.tuples(st.integers(1, 3), st.one_of(st.none(), st.integers(1, 300))),
    min_size=1,
    max_size=20,
    unique_by=lambda pair: pair[1] if pair[1] is not None else object(),
)


@given(ranks_strategy, st.integers(1, 299))
def test_recall_is_non_decreasing_in_depth(relevant: list[tuple[int, int | None]], k: int) -> None:
    assert recall_at(relevant, k) <= recall_at(relevant, k + 1)


@given(st.one_of(st.none(), st.integers(1, 100)), st.integers(1, 100), st.integers(1, 3))
def test_single_relevant_ndcg_at_most_recall(rank: int | None, k: int, grade: int) -> None:
    relevant = [(grade, rank)]
    for gain in Gain:
        ndcg, recall = ndcg_at(relevant, k, gain), recall_at(relevant, k)
        assert ndcg <= recall
        assert (ndcg == recall) == (rank == 1 or recall == 0.0)


@st.composite
def run_and_qrels(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    n_queries = draw(st.integers(1, 6))
    qrels_rows: list[tuple[str, str, int]] = []
    run_rows: list[tuple[str, str, float]] = []
    for q in range(n_queries):
        docs = [f"d{i}" for i in range(draw(st.integers(2, 40)))]
        relevant = draw(st.lists(st.sampled_from(docs), min_size=1, max_size=8, unique=True))
        qrels_rows += [(f"q{q}", d, draw(st.integers(1, 3))) for d in relevant]
        returned = draw(st.permutations(docs))[: draw(st.integers(0, len(docs)))]
        run_rows += [(f"q{q}", d, float(draw(st.integers(0, 5)))) for d in returned]
    depth = draw(st.integers(1, 40))
    return (
        pl.DataFrame(
            qrels_rows,
            schema={"qid": pl.String, "doc_id": pl.String, "grade": pl.Int64},
            orient="row",
        ),
        pl.DataFrame(
            run_rows,
            schema={"qid": pl.String, "doc_id": pl.String, "score": pl.Float64},
            orient="row",
        ),
        depth,
    )


def _rank(qrels: pl.DataFrame, run: pl.DataFrame, order: Order = Order.TREC_EVAL):  # type: ignore[no-untyped-def]
    gold = golden_from_frame(qrels)
    frame = run.with_columns(
        pl.lit(None, dtype=pl.Int64).alias("rank"),
        pl.int_range(1, pl.len() + 1, dtype=pl.UInt32).alias("line"),
    )
    return gold, rank_run(frame, gold, order=order, name="r", source="<run>", fmt="trec")


@settings(max_examples=60, deadline=None)
@given(run_and_qrels(), st.randoms(use_true_random=False))
def test_reordering_top_depth_never_changes_recall_at_depth(
    case: tuple[pl.DataFrame, pl.DataFrame, int], rnd: random.Random
) -> None:
    qrels, run, depth = case
    gold, ranked = _rank(qrels, run)
    before = evaluate_run(gold, ranked, k=1, depth=depth)
    # Shuffle each query's top `depth` (in file order, which is what is then ranked).
    top = ranked_frame(run, depth)
    shuffled = []
    for _qid, group in top.group_by("qid", maintain_order=True):
        head, tail = group.head(depth), group.slice(depth)
        shuffled += [head.sample(fraction=1.0, shuffle=True, seed=rnd.randint(0, 10**6)), tail]
    reordered = pl.concat(shuffled) if shuffled else top
    gold2, ranked2 = _rank(qrels, reordered.select("qid", "doc_id", "score"), Order.FILE)
    after = evaluate_run(gold2, ranked2, k=1, depth=depth)
    assert after.measures[f"R@{depth}"] == before.measures[f"R@{depth}"]
    assert after.misses == before.misses


def ranked_frame(run: pl.DataFrame, depth: int) -> pl.DataFrame:
    """The run in trec_eval order, duplicates removed."""
    del depth
    return run.unique(["qid", "doc_id"], keep="first", maintain_order=True).sort(
        ["qid", "score", "doc_id"], descending=[False, True, True]
    )


@settings(max_examples=60, deadline=None)
@given(run_and_qrels())
def test_micro_recall_is_relevant_weighted_mean(
    case: tuple[pl.DataFrame, pl.DataFrame, int],
) -> None:
    qrels, run, depth = case
    gold, ranked = _rank(qrels, run)
    result = evaluate_run(gold, ranked, k=1, depth=depth)
    weighted = sum(q.recall_depth * q.relevant for q in result.queries)
    total = sum(q.relevant for q in result.queries)
    assert abs(result.micro[f"R@{depth}"] - weighted / total) < 1e-12
    curve = list(result.depth_curve.values())
    assert curve == sorted(curve)
