"""The domain's worked examples (issue "Evaluation core"), computed by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from app.eval import Gain
from app.eval.measures import (
    Measure,
    MeasureKind,
    candidate_ndcg_at,
    dcg_at,
    ndcg_at,
    parse_measure,
    recall_at,
)
from tests.support.evaluation import evaluate, golden, ranked


@pytest.mark.parametrize("grade", [1, 2, 3])
@pytest.mark.parametrize("gain", list(Gain))
def test_one_relevant_at_rank_nine(tmp_path: Path, grade: int, gain: Gain) -> None:
    gold = golden(tmp_path, f"q1 0 rel {grade}\n")
    run_text = "".join(f"q1 Q0 other{i} {i} {100 - i} t\n" for i in range(1, 9))
    run = ranked(tmp_path, gold, run_text + "q1 Q0 rel 9 91 t\n")
    result = evaluate(gold, run, k=10, depth=10, gain=gain)
    assert result.measures["R@10"] == 1.0
    assert result.measures["nDCG@10"] == pytest.approx(1 / math.log2(10))
    assert round(result.measures["nDCG@10"], 3) == 0.301


def test_eight_graded_documents_in_ideal_order(tmp_path: Path) -> None:
    grades = [3, 3, 3, 3, 2, 2, 2, 1]
    gold = golden(tmp_path, "".join(f"q1 0 d{i} {g}\n" for i, g in enumerate(grades)))
    run = ranked(tmp_path, gold, "".join(f"q1 Q0 d{i} {i + 1} {10 - i} t\n" for i in range(8)))
    judged = [(g, i + 1) for i, g in enumerate(grades)]
    dcg = dcg_at(judged, 10, Gain.EXP)
    # 7 * (1 + 1/log2 3 + 1/log2 4 + 1/log2 5) + 3 * (1/log2 6 + 1/log2 7 + 1/log2 8) + 1/log2 9
    expected = 7 * sum(1 / math.log2(r + 1) for r in range(1, 5))
    expected += 3 * sum(1 / math.log2(r + 1) for r in range(5, 8)) + 1 / math.log2(9)
    assert dcg == pytest.approx(expected)
    assert math.floor(dcg * 1000) / 1000 == 21.475  # the figure quoted, to three decimals
    result = evaluate(gold, run, k=10, depth=10, gain=Gain.EXP)
    assert result.measures["nDCG@10"] == pytest.approx(1.0)


def test_strict_ideal_counts_unretrieved_judgments() -> None:
    # Two relevant documents, one retrieved at rank 1: strict nDCG < 1, candidate-ideal = 1.
    judged = [(1, 1), (1, None)]
    assert ndcg_at(judged, 10, Gain.LINEAR) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert candidate_ndcg_at(judged, 10, Gain.LINEAR, depth=50) == 1.0
    assert candidate_ndcg_at([(1, None)], 10, Gain.LINEAR, depth=50) is None


def test_unjudged_documents_gain_nothing(tmp_path: Path) -> None:
    gold = golden(tmp_path, "q1 0 a 2\nq1 0 b 0\n")
    run = ranked(tmp_path, gold, "q1 Q0 x 1 9 t\nq1 Q0 b 2 8 t\nq1 Q0 a 3 7 t\n")
    result = evaluate(gold, run, k=3, depth=3, gain=Gain.EXP)
    assert result.measures["nDCG@3"] == pytest.approx(1 / math.log2(4))


def test_recall_and_ndcg_need_relevant_documents() -> None:
    with pytest.raises(ValueError, match="undefined"):
        recall_at([], 10)
    with pytest.raises(ValueError, match="undefined"):
        ndcg_at([(0, 1)], 10, Gain.EXP)
    with pytest.raises(ValueError, match="cutoff"):
        recall_at([(1, 1)], 0)


def test_measure_names_parse_back() -> None:
    for name in ["R@10", "R@50", "nDCG@10", "nDCG_cand@5", "R@1000"]:
        assert str(parse_measure(name)) == name
    assert parse_measure("R@50") == Measure(MeasureKind.RECALL, 50)
    for bad in ["R@0", "recall@10", "nDCG@", "R@-1", "P@10"]:
        with pytest.raises(ValueError, match="unknown measure"):
            parse_measure(bad)


def test_scifact_style_micro_and_macro_differ(tmp_path: Path) -> None:
    # q1: 1 of 1 found; q2: 1 of 3 found. Macro = (1 + 1/3) / 2; micro = 2 / 4.
    gold = golden(tmp_path, "q1 0 a 1\nq2 0 b 1\nq2 0 c 1\nq2 0 d 1\n")
    run = ranked(tmp_path, gold, "q1 Q0 a 1 1 t\nq2 Q0 b 1 1 t\n")
    result = evaluate(gold, run, k=10, depth=10)
    assert result.measures["R@10"] == pytest.approx(2 / 3)
    assert result.micro["R@10"] == 0.5
    assert result.misses == 2
