"""Agreement with independent implementations on seeded random inputs full of traps.

pytrec_eval (trec_eval's C code) is the oracle for recall@k and linear-gain nDCG@k; ranx's
``ndcg_burges`` for exponential gain. pytrec_eval stores scores as float32, so scores are drawn
from values float32 represents exactly; it averages only over queries the run contains, so
values are compared per query.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytrec_eval
from ranx import Qrels, Run
from ranx import evaluate as ranx_evaluate

from app.eval import Gain
from tests.eval.helpers import evaluate, golden, ranked

CUTOFFS = (1, 3, 5, 10, 20)
TOLERANCE = 1e-9


@dataclass
class Case:
    qrels_text: str
    run_text: str
    qrels: dict[str, dict[str, int]]
    run: dict[str, dict[str, float]]


def make_case(seed: int, *, ties: bool = True, grades: tuple[int, int] = (-1, 3)) -> Case:
    """Random golden set and run: tied scores, rank column disagreeing with scores, repeated
    documents, numeric-looking docnos, golden queries missing from the run and run queries
    missing from the golden set."""
    rng = random.Random(seed)
    pool = [str(n) for n in (1, 9, 10, 11, 99, 100)] + [f"doc{n}" for n in range(40)]
    qrels: dict[str, dict[str, int]] = {}
    qrels_lines = []
    for q in range(rng.randint(5, 25)):
        qid = f"q{q}"
        judged = rng.sample(pool, rng.randint(1, 12))
        qrels[qid] = {d: rng.randint(*grades) for d in judged}
        qrels_lines += [f"{qid} 0 {d} {g}" for d, g in qrels[qid].items()]
    if not any(g >= 1 for docs in qrels.values() for g in docs.values()):
        first = next(iter(qrels))
        qrels[first][next(iter(qrels[first]))] = 1
        qrels_lines = [f"{q} 0 {d} {g}" for q, docs in qrels.items() for d, g in docs.items()]
    run: dict[str, dict[str, float]] = {}
    run_lines = []
    run_qids = [q for q in qrels if rng.random() < 0.85] + ["extra1", "extra2"]
    for qid in run_qids:
        docs = [rng.choice(pool) for _ in range(rng.randint(1, 40))]
        ranks = list(range(1, len(docs) + 1))
        rng.shuffle(ranks)  # the rank column disagrees with the scores
        for doc, rank in zip(docs, ranks, strict=True):
            # Multiples of 1/4 are exact in float32; a small range makes ties common.
            score = rng.randint(0, 12) / 4 if ties else rng.randint(0, 2**20) / 4
            run_lines.append(f"{qid} Q0 {doc} {rank} {score} tag")
            run.setdefault(qid, {}).setdefault(doc, score)  # first occurrence wins
    if not ties:
        for docs in run.values():
            assert len(set(docs.values())) == len(docs), "scores must be distinct"
    return Case("\n".join(qrels_lines) + "\n", "\n".join(run_lines) + "\n", qrels, run)


@pytest.mark.parametrize("seed", range(40))
def test_recall_and_linear_ndcg_equal_pytrec_eval(tmp_path: Path, seed: int) -> None:
    case = make_case(seed)
    gold = golden(tmp_path, case.qrels_text)
    run = ranked(tmp_path, gold, case.run_text)
    measures = {f"recall.{','.join(map(str, CUTOFFS))}", f"ndcg_cut.{','.join(map(str, CUTOFFS))}"}
    oracle = pytrec_eval.RelevanceEvaluator(case.qrels, measures).evaluate(case.run)
    compared = 0
    for k in CUTOFFS:
        ours = evaluate(gold, run, k=k, depth=k, gain=Gain.LINEAR, depths=CUTOFFS)
        for query in ours.queries:
            if query.qid not in case.run:
                assert query.retrieved == 0
                assert query.recall_k == query.ndcg_k == 0.0
                continue
            expected = oracle[query.qid]
            assert query.recall_k == pytest.approx(expected[f"recall_{k}"], abs=TOLERANCE)
            assert query.ndcg_k == pytest.approx(expected[f"ndcg_cut_{k}"], abs=TOLERANCE)
            compared += 1
    assert compared > 0


@pytest.mark.parametrize("seed", range(20))
def test_exponential_ndcg_equals_ranx_ndcg_burges(tmp_path: Path, seed: int) -> None:
    case = make_case(1000 + seed, ties=False, grades=(0, 3))
    gold = golden(tmp_path, case.qrels_text)
    run = ranked(tmp_path, gold, case.run_text)
    evaluated = set(gold.evaluated_qids) & set(case.run)
    qrels = Qrels({q: case.qrels[q] for q in evaluated})
    ranx_run = Run({q: case.run[q] for q in evaluated})
    metrics = [f"ndcg_burges@{k}" for k in CUTOFFS]
    ranx_evaluate(qrels, ranx_run, metrics, return_mean=False)
    compared = 0
    for k in CUTOFFS:
        ours = evaluate(gold, run, k=k, depth=k, gain=Gain.EXP, depths=CUTOFFS)
        for query in ours.queries:
            if query.qid in evaluated:
                expected = ranx_run.scores[f"ndcg_burges@{k}"][query.qid]
                assert query.ndcg_k == pytest.approx(expected, abs=TOLERANCE)
                compared += 1
    assert compared > 0


def test_trap_generator_really_sets_traps() -> None:
    """The random cases above contain every trap they claim to."""
    texts = [make_case(seed) for seed in range(40)]
    lines = [line.split() for case in texts for line in case.run_text.splitlines()]
    keys = [(f[0], f[2]) for f in lines]
    assert len(keys) > len(set(keys)), "repeated documents"
    by_query: dict[str, list[float]] = {}
    for f in lines:
        by_query.setdefault(f[0], []).append(float(f[4]))
    assert any(len(s) > len(set(s)) for s in by_query.values()), "tied scores"
    assert any(set(case.qrels) - set(case.run) for case in texts), "golden queries not in run"
    grades = {g for case in texts for docs in case.qrels.values() for g in docs.values()}
    assert grades == {-1, 0, 1, 2, 3}
