"""Cluster measures against the definitions (DESIGN.md): copies count once, a document without a
cluster never collapses, and on an unclustered corpus cluster-recall@k is recall@k."""

from __future__ import annotations

import random

import polars as pl
import pytest
import pytrec_eval

from app.eval import Judgments, golden_from_frame
from app.eval.clusters import clusters_frame, evaluate_clusters


def _golden(rows: list[tuple[str, str, int]]) -> Judgments:
    return golden_from_frame(
        pl.DataFrame(
            rows, schema={"qid": pl.String, "doc_id": pl.String, "grade": pl.Int64}, orient="row"
        )
    )


def _top(ranking: dict[str, list[str]]) -> pl.DataFrame:
    rows = [(q, d, r) for q, docs in ranking.items() for r, d in enumerate(docs, 1)]
    return pl.DataFrame(
        rows, schema={"qid": pl.String, "doc_id": pl.String, "rank": pl.Int64}, orient="row"
    )


def test_two_chunks_of_one_cluster_count_once() -> None:
    gold = _golden([("q1", "page#0", 2), ("q1", "wiki#0", 2), ("q1", "faq", 1)])
    clusters = clusters_frame({"page#0": "A", "wiki#0": "A", "pdf#0": "A"})
    top = _top({"q1": ["wiki#0", "pdf#0", "page#0", "other", "faq"]})
    result = evaluate_clusters(gold, top, clusters, k=3)
    # wiki#0, pdf#0, page#0: three copies of one article are one cluster
    assert result.unique == {"q1": 1}
    # relevant clusters {A, faq}; A found in the top 3, faq (rank 5) not
    assert result.recall == {"q1": 0.5}
    assert (result.relevant_clusters, result.found_clusters) == (2, 1)
    at5 = evaluate_clusters(gold, top, clusters, k=5)
    assert at5.unique == {"q1": 3}
    assert at5.recall == {"q1": 1.0}


def test_an_unclustered_document_never_collapses() -> None:
    gold = _golden([("q1", "a", 1), ("q1", "b", 1)])
    # "b" has no cluster; a cluster named "b" must not merge with the document "b"
    clusters = clusters_frame({"a": "b", "c": "b", "b": None})
    result = evaluate_clusters(gold, _top({"q1": ["c", "b"]}), clusters, k=2)
    assert result.unique == {"q1": 2}
    assert result.recall == {"q1": 1.0}  # cluster b (via c) and document b


def test_summary_over_queries_and_unanswered_queries() -> None:
    gold = _golden([(q, f"{q}-rel", 1) for q in ("q1", "q2", "q3")])
    clusters = clusters_frame({f"copy{i}": "X" for i in range(10)})
    top = _top(
        {
            "q1": [f"copy{i}" for i in range(10)],  # one cluster in ten results
            "q2": [f"d{i}" for i in range(10)] + ["q2-rel"],  # ten clusters, relevant at 11
        }
    )
    result = evaluate_clusters(gold, top, clusters, k=10)
    assert result.unique == {"q1": 1, "q2": 10, "q3": 0}  # q3: not answered
    assert result.median_unique == 1
    assert result.share_few == pytest.approx(2 / 3)
    assert result.cluster_recall == 0.0


def test_without_clusters_cluster_recall_is_pytrec_eval_recall() -> None:
    rng = random.Random(7)
    rows, ranking = [], {}
    for q in range(30):
        qid = f"q{q}"
        docs = [f"d{i}" for i in rng.sample(range(60), 25)]
        ranking[qid] = docs
        for d in rng.sample(range(60), 5):
            rows.append((qid, f"d{d}", rng.choice([1, 2])))
    gold = _golden(rows)
    result = evaluate_clusters(gold, _top(ranking), clusters_frame({}), k=10)
    qrels: dict[str, dict[str, int]] = {q: {} for q in ranking}
    for q, d, g in rows:
        qrels[q][d] = g
    run = {q: {d: 100.0 - r for r, d in enumerate(docs)} for q, docs in ranking.items()}
    oracle = pytrec_eval.RelevanceEvaluator(qrels, {"recall.10"}).evaluate(run)
    for qid, value in result.recall.items():
        assert value == pytest.approx(oracle[qid]["recall_10"], abs=1e-12)
    assert set(result.unique.values()) == {10}


def test_k_must_be_positive() -> None:
    gold = _golden([("q1", "a", 1)])
    with pytest.raises(ValueError, match="k must be"):
        evaluate_clusters(gold, _top({"q1": ["a"]}), clusters_frame({}), k=0)
