"""Agreement with independent implementations on seeded random inputs full of traps.

pytrec_eval (trec_eval's C code) is the oracle for recall@k and linear-gain nDCG@k; ranx's
``ndcg_burges`` for exponential gain, its values recorded by scripts/record_ranx.py (the cases
are in tests/support/oracle_cases.py). pytrec_eval stores scores as float32, so scores are drawn
from values float32 represents exactly; it averages only over queries the run contains, so
values are compared per query.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytrec_eval

from app.eval import Gain
from tests.support.evaluation import evaluate, golden, ranked
from tests.support.oracle_cases import CUTOFFS, RANX_CASES, make_case, ranx_case

TOLERANCE = 1e-9
#: ranx's values for the exponential-gain cases, recorded by scripts/record_ranx.py (ranx
#: compiles with numba on first use, about 40 s; `python scripts/record_ranx.py --check`
#: tells whether a new ranx still agrees).
RANX_EXPECTED = json.loads((Path(__file__).parent / "ranx_expected.json").read_text())


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


@pytest.mark.parametrize("seed", range(RANX_CASES))
def test_exponential_ndcg_equals_ranx_ndcg_burges(tmp_path: Path, seed: int) -> None:
    case = ranx_case(seed)
    recorded = RANX_EXPECTED["cases"][str(seed)]
    assert recorded["inputs"] == case.fingerprint(), "cases changed: python scripts/record_ranx.py"
    assert RANX_EXPECTED["cutoffs"] == list(CUTOFFS)
    gold = golden(tmp_path, case.qrels_text)
    run = ranked(tmp_path, gold, case.run_text)
    evaluated = set(gold.evaluated_qids) & set(case.run)
    assert evaluated == set(recorded["ndcg_burges"])
    compared = 0
    for i, k in enumerate(CUTOFFS):
        ours = evaluate(gold, run, k=k, depth=k, gain=Gain.EXP, depths=CUTOFFS)
        for query in ours.queries:
            if query.qid in evaluated:
                expected = recorded["ndcg_burges"][query.qid][i]
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
