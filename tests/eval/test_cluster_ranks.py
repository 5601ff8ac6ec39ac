"""Cluster ranks (app/eval/cluster_ranks.py): cluster-recall@k and unique-clusters@k from one
number per judged document equal the measures on the full rankings (evaluate_clusters), at
every k, on generated rankings with duplicate clusters, judged documents outside the corpus
and judged documents found only through a cluster-mate."""

from __future__ import annotations

import random

import polars as pl
import pytest

from app.eval import Judgments, golden_from_frame
from app.eval.cluster_profile import ClusterCorpus, trace_ranking
from app.eval.cluster_ranks import (
    evaluate_cluster_ranks,
    judged_cluster_ranks,
    no_cluster_ranks,
)
from app.eval.clusters import ClusterEvaluation, clusters_frame, evaluate_clusters

RANKED = {"qid": pl.String, "doc_id": pl.String, "rank": pl.Int64}


def _golden(rows: list[tuple[str, str, int]]) -> Judgments:
    return golden_from_frame(
        pl.DataFrame(
            rows, schema={"qid": pl.String, "doc_id": pl.String, "grade": pl.Int64}, orient="row"
        )
    )


def _top(ranking: dict[str, list[str]]) -> pl.DataFrame:
    rows = [(q, d, r) for q, docs in ranking.items() for r, d in enumerate(docs, 1)]
    return pl.DataFrame(rows, schema=RANKED, orient="row")


def _by_ranks(
    gold: Judgments, ranking: dict[str, list[str]], clusters: dict[str, str], k: int
) -> tuple[ClusterEvaluation, pl.DataFrame]:
    """The measures from the stored numbers, and the cluster ranks they used."""
    top = _top(ranking)
    corpus = ClusterCorpus.of(clusters)
    judged = gold.judgments.select("qid", "doc_id")
    ranks = judged_cluster_ranks(top.select("qid", "rank", "doc_id"), judged, corpus.documents)
    traces = trace_ranking(top, {q: len(d) for q, d in ranking.items()}, corpus).queries
    judged_ranks = top.join(judged, on=["qid", "doc_id"])
    evaluation = evaluate_cluster_ranks(
        gold, traces, judged_ranks, ranks, clusters_frame(clusters), k
    )
    return evaluation, ranks


def test_a_cluster_mate_deeper_in_the_ranking_gives_the_cluster_rank() -> None:
    gold = _golden([("q1", "page", 2), ("q1", "faq", 1), ("q1", "ghost", 1), ("q2", "x", 1)])
    clusters = {"page": "A", "wiki": "A", "pdf": "A"}
    ranking = {"q1": ["n1", "n2", "pdf", "faq", "page", "wiki", "ghost"]}
    evaluation, ranks = _by_ranks(gold, ranking, clusters, k=3)
    # page (rank 5) is found at 3 through its copy pdf; faq, ghost: their own ranks
    assert ranks.rows() == [("q1", "page", 3)]
    assert evaluation.recall == {"q1": pytest.approx(1 / 3), "q2": 0.0}  # q2: not answered
    assert (evaluation.relevant_clusters, evaluation.found_clusters) == (4, 1)
    assert evaluation.unique == {"q1": 3, "q2": 0}
    # the relevant document not returned, its copy is: the copy's rank
    evaluation, ranks = _by_ranks(gold, {"q1": ["n1", "wiki", "faq"]}, clusters, k=2)
    assert ranks.rows() == [("q1", "page", 2)]
    assert evaluation.recall["q1"] == pytest.approx(1 / 3)


def test_no_clusters_no_cluster_ranks() -> None:
    gold = _golden([("q1", "a", 1), ("q1", "b", 1)])
    _, ranks = _by_ranks(gold, {"q1": ["b", "c", "a"]}, {}, k=1)
    assert ranks.is_empty()
    assert ranks.schema == no_cluster_ranks().schema


@pytest.mark.parametrize("seed", range(40))
def test_cluster_ranks_equal_the_full_rankings_at_every_k(seed: int) -> None:
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(30)]
    clusters = {d: f"c{rng.randrange(6)}" for d in docs if rng.random() < 0.6}
    ghosts = [f"ghost{i}" for i in range(4)]  # judged, absent from the corpus
    rows = []
    for q in range(6):
        for d in rng.sample(docs + ghosts, rng.randint(1, 6)):
            rows.append((f"q{q}", d, rng.choice([0, 1, 2])))
    rows.append(("q0", "d0", 1))  # at least one evaluated query
    gold = _golden(list({(q, d): (q, d, g) for q, d, g in rows}.values()))
    ranking = {
        f"q{q}": rng.sample(docs + ghosts + ["x1", "x2"], rng.randint(1, 25))
        for q in range(6)
        if rng.random() < 0.85
    }
    top = _top(ranking)
    deepest = max(len(r) for r in ranking.values())
    for k in range(1, deepest + 3):
        expected = evaluate_clusters(gold, top, clusters_frame(clusters), k)
        evaluation, _ = _by_ranks(gold, ranking, clusters, k)
        assert evaluation == expected, k
