"""Real data: SciFact's three runs against pytrec_eval and the dataset README's figures."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytrec_eval

from app.eval import Conventions, Gain, Judgments, evaluate_run, load_golden, load_run
from app.eval.misses import enumerate_misses

RUNS = ("bm25", "dense", "hybrid")
# From ../shared/datasets/scifact/README.md (pytrec_eval 0.5.11, 4 decimals).
README = {
    "bm25": {"R@10": 0.8180, "R@50": 0.8852, "R@100": 0.9127, "R@1000": 0.9700, "nDCG@10": 0.6860},
    "dense": {"R@10": 0.7833, "R@50": 0.8920, "R@100": 0.9250, "R@1000": 0.9933, "nDCG@10": 0.6451},
    "hybrid": {
        "R@10": 0.8509,
        "R@50": 0.9377,
        "R@100": 0.9550,
        "R@1000": 0.9933,
        "nDCG@10": 0.7182,
    },
}
MISSES_AT_50 = {"bm25": (39, 30, 9), "dense": (36, 34, 2), "hybrid": (20, 18, 2)}


@pytest.fixture(scope="module")
def gold(scifact: Path) -> Judgments:
    return load_golden(scifact / "qrels.tsv", queries=scifact / "queries.jsonl")


def _read_trec(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, {}).setdefault(doc, float(score))
    return run


@pytest.mark.parametrize("name", RUNS)
def test_scifact_equals_pytrec_eval(scifact: Path, gold: Judgments, name: str) -> None:
    path = scifact / "runs" / f"{name}.trec"
    qrels = {
        q: dict(zip(group["doc_id"], group["grade"], strict=True))
        for (q,), group in (
            (k, g.to_dict(as_series=False)) for k, g in gold.judgments.group_by("qid")
        )
    }
    oracle = pytrec_eval.RelevanceEvaluator(
        qrels, {"recall.10,50,100,1000", "ndcg_cut.10"}
    ).evaluate(_read_trec(path))
    ranked = load_run(path, gold, name=name)
    for gain in Gain:  # binary judgments: both gains agree
        result = evaluate_run(
            gold,
            ranked,
            k=10,
            depth=50,
            depths=(10, 50, 100, 1000),
            conventions=Conventions(gain=gain),
        )
        assert len(result.queries) == 300
        for query in result.queries:
            expected = oracle[query.qid]
            assert query.recall_k == pytest.approx(expected["recall_10"], abs=1e-9)
            assert query.recall_depth == pytest.approx(expected["recall_50"], abs=1e-9)
            assert query.ndcg_k == pytest.approx(expected["ndcg_cut_10"], abs=1e-9)
        for depth in (10, 50, 100, 1000):
            mean = sum(v[f"recall_{depth}"] for v in oracle.values()) / len(oracle)
            assert result.depth_curve[depth] == pytest.approx(mean, abs=1e-12)
            assert round(result.depth_curve[depth], 4) == README[name][f"R@{depth}"]
        assert round(result.measures["nDCG@10"], 4) == README[name]["nDCG@10"]


@pytest.mark.parametrize("name", RUNS)
def test_scifact_misses_at_50(scifact: Path, gold: Judgments, name: str) -> None:
    ranked = load_run(scifact / "runs" / f"{name}.trec", gold, name=name)
    misses = enumerate_misses(gold, ranked, 50)
    deeper = [m for m in misses if m.rank is not None]
    assert (len(misses), len(deeper), len(misses) - len(deeper)) == MISSES_AT_50[name]
    assert all(50 < m.rank <= 1000 for m in deeper if m.rank is not None)
    if name == "bm25":
        assert ("1", "31715818") in {(m.qid, m.doc_id) for m in misses if m.rank is None}
    else:
        unretrieved = {(m.qid, m.doc_id) for m in misses if m.rank is None}
        assert unretrieved == {("437", "18399038"), ("1199", "16760369")}
