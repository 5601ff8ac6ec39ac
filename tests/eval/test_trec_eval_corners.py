"""trec_eval's corners, decided (issue 15, item 4) and checked against pytrec_eval (trec_eval's
C code):

* ``min_grade`` > 1 is trec_eval's ``-l`` (pytrec_eval ``relevance_level``): it changes the
  binary measures only; nDCG takes its gains, and its ideal, from every positive judged grade.
* queries whose judgments hold no relevant document are left out of the means by default;
  ``Conventions.all_judged_queries`` averages them in as trec_eval ``-c`` does (R = 0, nDCG from
  their positive grades). pytrec_eval has no ``-c``: its per-query values are averaged by hand
  over every judged query, a query absent from the run counting 0.
* pytrec_eval stores run scores as float32; misstriage, like trec_eval 10, parses doubles, so
  scores that differ only beyond float32's precision rank differently there.
"""

from __future__ import annotations

from pathlib import Path
from statistics import fmean

import pytest
import pytrec_eval

from app.eval import Conventions, Gain, evaluate_run
from app.eval.conventions import ALL_JUDGED_QUERIES, AVERAGED_QUERIES
from app.services.imports.metrics import ConventionsPublic
from tests.support.evaluation import evaluate, golden, ranked
from tests.support.oracle_cases import make_case

TOLERANCE = 1e-9
K = 5
SEEDS = range(30)


def _oracle(case_qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], level: int):
    measures = {f"recall.{K}", f"ndcg_cut.{K}"}
    evaluator = pytrec_eval.RelevanceEvaluator(case_qrels, measures, relevance_level=level)
    return evaluator.evaluate(run)


@pytest.mark.parametrize("min_grade", [1, 2, 3])
def test_min_grade_is_trec_eval_l_and_changes_binary_measures_only(
    tmp_path: Path, min_grade: int
) -> None:
    compared = with_lower_gains = 0
    for seed in SEEDS:
        case = make_case(seed)
        if not any(g >= min_grade for docs in case.qrels.values() for g in docs.values()):
            continue
        gold = golden(tmp_path, case.qrels_text, min_grade=min_grade)
        run = ranked(tmp_path, gold, case.run_text)
        oracle = _oracle(case.qrels, case.run, min_grade)
        ours = evaluate(gold, run, k=K, depth=K, gain=Gain.LINEAR, depths=(K,))
        for query in ours.queries:
            if query.qid not in case.run:
                continue
            expected = oracle[query.qid]
            assert query.recall_k == pytest.approx(expected[f"recall_{K}"], abs=TOLERANCE)
            assert query.ndcg_k == pytest.approx(expected[f"ndcg_cut_{K}"], abs=TOLERANCE)
            compared += 1
            grades = case.qrels[query.qid].values()
            with_lower_gains += any(0 < g < min_grade for g in grades)
    assert compared > 0
    if min_grade > 1:  # the cases really hold grades that gain without being relevant
        assert with_lower_gains > 0


def test_a_lower_grade_gains_in_ndcg_but_is_not_relevant(tmp_path: Path) -> None:
    """Worked example: min_grade 2, "b" (grade 1) at rank 1 and "a" (grade 2) at rank 2."""
    gold = golden(tmp_path, "q1 0 a 2\nq1 0 b 1\n", min_grade=2)
    run = ranked(tmp_path, gold, "q1 Q0 b 1 3 t\nq1 Q0 a 2 2 t\n")
    result = evaluate(gold, run, k=2, depth=2, gain=Gain.LINEAR)
    # DCG = 1/log2(2) + 2/log2(3); ideal = 2/log2(2) + 1/log2(3)
    dcg, ideal = 1 + 2 / 1.584962500721156, 2 + 1 / 1.584962500721156
    assert result.measures["nDCG@2"] == pytest.approx(dcg / ideal, abs=TOLERANCE)
    assert result.measures["R@2"] == 1.0  # one relevant document (a), found; b is not
    assert result.relevant == 1


@pytest.mark.parametrize("min_grade", [1, 2])
def test_all_judged_queries_is_trec_eval_c(tmp_path: Path, min_grade: int) -> None:
    compared = 0
    for seed in SEEDS:
        case = make_case(seed)
        if not any(g >= min_grade for docs in case.qrels.values() for g in docs.values()):
            continue
        gold = golden(tmp_path, case.qrels_text, min_grade=min_grade)
        run = ranked(tmp_path, gold, case.run_text)
        oracle = _oracle(case.qrels, case.run, min_grade)
        conventions = Conventions(
            order=run.order, gain=Gain.LINEAR, min_grade=min_grade, all_judged_queries=True
        )
        ours = evaluate_run(gold, run, k=K, depth=K, depths=(K,), conventions=conventions)
        assert {q.qid for q in ours.queries} == set(case.qrels)
        for name, measure in ((f"R@{K}", f"recall_{K}"), (f"nDCG@{K}", f"ndcg_cut_{K}")):
            by_hand = fmean(oracle.get(q, {}).get(measure, 0.0) for q in case.qrels)
            assert ours.measures[name] == pytest.approx(by_hand, abs=TOLERANCE)
        # the default leaves the queries without a relevant document out
        default = evaluate(gold, run, k=K, depth=K, gain=Gain.LINEAR, depths=(K,))
        assert [q.qid for q in default.queries] == gold.evaluated_qids
        compared += len(case.qrels) > len(gold.evaluated_qids)
    assert compared > 0, "no case held a query without a relevant document"


def test_the_conventions_block_says_which_queries_are_averaged() -> None:
    default = ConventionsPublic.of(Conventions())
    assert default.all_judged_queries is False
    assert default.averaged_queries == AVERAGED_QUERIES
    switched = ConventionsPublic.of(Conventions(all_judged_queries=True))
    assert switched.all_judged_queries is True
    assert switched.averaged_queries == ALL_JUDGED_QUERIES
    assert "trec_eval -l" in default.ndcg_grades


def test_pytrec_eval_float32_scores_rank_differently(tmp_path: Path) -> None:
    """The documented exception: 1.000000001 and 1.0 are one float32 (pytrec_eval ties them
    and breaks the tie by docno descending, "y" first) but two doubles (misstriage and
    trec_eval 10 put "x" first)."""
    qrels, run_text = "q1 0 x 1\n", "q1 Q0 x 1 1.000000001 t\nq1 Q0 y 2 1.0 t\n"
    gold = golden(tmp_path, qrels)
    ours = evaluate(gold, ranked(tmp_path, gold, run_text), k=1, depth=2, gain=Gain.LINEAR)
    assert ours.measures["nDCG@1"] == 1.0
    oracle = pytrec_eval.RelevanceEvaluator({"q1": {"x": 1}}, {"ndcg_cut.1"})
    assert oracle.evaluate({"q1": {"x": 1.000000001, "y": 1.0}})["q1"]["ndcg_cut_1"] == 0.0
    # scores float32 holds exactly agree
    assert oracle.evaluate({"q1": {"x": 1.5, "y": 1.0}})["q1"]["ndcg_cut_1"] == 1.0
