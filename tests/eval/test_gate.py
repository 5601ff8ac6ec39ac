"""app.eval.gate: the randomisation test against ranx, the lists against a plain recount."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from app.eval import Conventions, Gain, evaluate_run, load_golden, load_run
from app.eval.gate import gate, moved_documents, randomisation_p_value

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "scifact"
QRELS = "q1 0 a 1\nq1 0 b 2\nq1 0 c 1\nq2 0 d 1\nq2 0 e 0\nq3 0 f 1\n"
# baseline: q1 a@1 b@2 (tied scores) c@4; q2 d@1; q3 f@2
BASE = (
    "q1 Q0 a 1 5.0 base\nq1 Q0 b 2 5.0 base\nq1 Q0 x 3 4.0 base\nq1 Q0 c 4 3.0 base\n"
    "q2 Q0 d 1 9.0 base\nq3 Q0 z 1 2.0 base\nq3 Q0 f 2 1.0 base\n"
)
# new: q1 c only deeper (rank 4 > depth 3), b gone, y and a tied; q2 absent; q3 f@1
NEW = (
    "q1 Q0 y 1 5.0 new\nq1 Q0 a 2 5.0 new\nq1 Q0 x 3 4.0 new\nq1 Q0 c 4 3.0 new\n"
    "q3 Q0 f 1 2.0 new\n"
)


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    paths = []
    for name, text in (("qrels.txt", QRELS), ("base.trec", BASE), ("new.trec", NEW)):
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    return paths[0], paths[1], paths[2]


def _recount(qrels: Path, run: Path) -> dict[tuple[str, str], int]:
    """Ranks under trec_eval's order (score desc, docno desc), written plainly."""
    rel = {
        (q, d)
        for q, _, d, g in (line.split() for line in qrels.read_text().splitlines())
        if int(g) >= 1
    }
    per: dict[str, list[tuple[float, str]]] = {}
    for line in run.read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        per.setdefault(q, []).append((float(s), d))
    ranks = {}
    for q, docs in per.items():
        for i, (_, d) in enumerate(sorted(docs, reverse=True), start=1):
            if (q, d) in rel:
                ranks[q, d] = i
    return ranks


def test_lists_and_measures_match_a_recount(tmp_path: Path) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, base, new = _files(tmp_path)
    depth, k = 3, 2
    golden = load_golden(qrels)
    runs = [load_run(p, golden, name=p.stem) for p in (base, new)]
    evals = [evaluate_run(golden, r, k=k, depth=depth, conventions=Conventions()) for r in runs]
    result = gate(golden, runs[0], runs[1], *evals, permutations=2000, max_new_misses=0)

    before, after = _recount(qrels, base), _recount(qrels, new)
    rel = (
        set(before) | set(after) | {("q1", "c"), ("q1", "b"), ("q1", "a"), ("q2", "d"), ("q3", "f")}
    )

    def inside(ranks: dict[tuple[str, str], int], key: tuple[str, str]) -> bool:
        return key in ranks and ranks[key] <= depth

    left = sorted(key for key in rel if inside(before, key) and not inside(after, key))
    entered = sorted(key for key in rel if inside(after, key) and not inside(before, key))
    assert sorted((d.qid, d.doc_id) for d in result.left) == left == [("q1", "b"), ("q2", "d")]
    assert sorted((d.qid, d.doc_id) for d in result.entered) == entered == []
    by_key = {(d.qid, d.doc_id): d for d in result.left}
    assert by_key["q1", "b"].rank_after is None
    assert by_key["q1", "b"].rank_before == before["q1", "b"]
    assert by_key["q2", "d"].rank_after is None  # q2 is missing from the new run
    # the doc retrieved only deeper is neither left nor entered, its rank beyond depth
    c_rank = moved_documents(golden, runs[0], runs[1], 4)[0]
    assert [(d.doc_id, d.rank_before, d.rank_after) for d in c_rank] == [
        ("b", before["q1", "b"], None),  # tied with a at 5.0: docno descending puts b first
        ("d", 1, None),
    ]

    # the measures: pytrec_eval (recall, ndcg_cut with exp gain is not pytrec's, so recall
    # and nDCG with linear gain checked via a binary-free recount; here recall only)
    qrel: dict[str, dict[str, int]] = {}
    for q, _, d, g in (line.split() for line in QRELS.splitlines()):
        qrel.setdefault(q, {})[d] = int(g)
    for path, ev in zip((base, new), evals, strict=True):
        run: dict[str, dict[str, float]] = {}
        for line in path.read_text().splitlines():
            q, _, d, _, s, _ = line.split()
            run.setdefault(q, {})[d] = float(s)
        scores = pytrec_eval.RelevanceEvaluator(qrel, {f"recall_{depth}"}).evaluate(run)
        per_query = [scores.get(q, {}).get(f"recall_{depth}", 0.0) for q in ("q1", "q2", "q3")]
        assert ev.measures[f"R@{depth}"] == pytest.approx(sum(per_query) / 3)
    assert result.measures[f"R@{depth}"].before == pytest.approx(evals[0].measures[f"R@{depth}"])
    assert not result.passed
    assert len(result.reasons) == 3  # both measures dropped, and 2 > --max-new-misses 0


def _pytrec_inputs(
    qrels: str, run_text: str
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    qrel: dict[str, dict[str, int]] = {}
    for q, _, d, g in (line.split() for line in qrels.splitlines()):
        qrel.setdefault(q, {})[d] = int(g)
    run: dict[str, dict[str, float]] = {}
    for line in run_text.splitlines():
        q, _, d, _, s, _ = line.split()
        run.setdefault(q, {})[d] = float(s)
    return qrel, run


@pytest.mark.parametrize("k", [1, 2, 3])
def test_ndcg_before_and_after_match_pytrec_eval(tmp_path: Path, k: int) -> None:
    """nDCG@k of the gate, before and after, against pytrec_eval's ``ndcg_cut_k`` (trec_eval:
    linear gain, the ideal from the qrels, score desc then docno desc) under the linear gain;
    the traps of QRELS/BASE/NEW: graded b (grade 2), tied scores, q2 absent from the new run
    (0 for it, still averaged), a judged non-relevant e."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, base, new = _files(tmp_path)
    golden = load_golden(qrels)
    runs = [load_run(p, golden, name=p.stem) for p in (base, new)]
    conventions = Conventions(gain=Gain.LINEAR)
    evals = [evaluate_run(golden, r, k=k, depth=3, conventions=conventions) for r in runs]
    result = gate(golden, runs[0], runs[1], *evals, permutations=200)
    expected = []
    for text in (BASE, NEW):
        qrel, run = _pytrec_inputs(QRELS, text)
        scores = pytrec_eval.RelevanceEvaluator(qrel, {f"ndcg_cut_{k}"}).evaluate(run)
        per_query = [scores.get(q, {}).get(f"ndcg_cut_{k}", 0.0) for q in ("q1", "q2", "q3")]
        expected.append(sum(per_query) / 3)
    measure = result.measures[f"nDCG@{k}"]
    assert (measure.before, measure.after) == pytest.approx(expected, abs=1e-12)
    assert measure.delta == pytest.approx(expected[1] - expected[0], abs=1e-12)


def test_p_value_matches_ranx_fisher() -> None:
    fisher = pytest.importorskip("ranx.statistical_tests").fisher_randomization_test
    rng = np.random.default_rng(0)
    control = rng.uniform(size=60)
    treatment = np.clip(control + rng.normal(0.03, 0.1, size=60), 0, 1)
    n = 20_000
    ours = randomisation_p_value(control, treatment, permutations=n, seed=1)
    theirs, _ = fisher(control, treatment, n_permutations=n, random_seed=1)
    # two independent Monte Carlo estimates of one p: each has sd <= 0.5/sqrt(n); ours adds
    # at most 1/(n+1) for counting the observed assignment. 5 sd of their difference:
    tolerance = 5 * math.sqrt(2) * 0.5 / math.sqrt(n) + 1 / (n + 1)
    assert 0.0 < theirs < 1.0
    assert abs(ours - theirs) <= tolerance


def test_p_value_edges() -> None:
    assert randomisation_p_value([0.5, 0.2], [0.5, 0.2]) == 1.0
    assert randomisation_p_value([0.0] * 20, [1.0] * 20, permutations=999) == pytest.approx(
        1 / 1000, abs=2 / 1000
    )
    assert randomisation_p_value([0.1, 0.9], [0.3, 0.7], seed=3) == randomisation_p_value(
        [0.1, 0.9], [0.3, 0.7], seed=3
    )


@pytest.mark.skipif(not SCIFACT.is_dir(), reason="shared/datasets/scifact is absent")
def test_scifact_bm25_to_hybrid() -> None:
    golden = load_golden(SCIFACT / "qrels.tsv")
    runs = [load_run(SCIFACT / "runs" / f"{n}.trec", golden, name=n) for n in ("bm25", "hybrid")]
    evals = [evaluate_run(golden, r, k=10, depth=50) for r in runs]
    result = gate(golden, runs[0], runs[1], *evals, permutations=2000)
    assert result.queries == 300
    for d in result.left:
        assert d.rank_before is not None
        assert d.rank_before <= 50
        assert d.rank_after is None or d.rank_after > 50
    hits = [sum(q.relevant - q.misses for q in e.queries) for e in evals]
    assert hits[1] - hits[0] == len(result.entered) - len(result.left)
