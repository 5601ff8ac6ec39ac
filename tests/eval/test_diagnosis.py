"""nDCG on the candidate set and the diagnosis by the method (DESIGN.md, "Why")."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.eval import Conventions, Diagnosis, Gain, Thresholds, diagnose, evaluate_run
from app.eval.diagnosis import MissEvidence
from app.eval.measures import candidate_ndcg_at, ndcg_at
from tests.support.evaluation import golden, ranked

ranks_strategy = st.lists(
    st.tuples(st.integers(1, 3), st.one_of(st.none(), st.integers(1, 300))),
    min_size=1,
    max_size=20,
    unique_by=lambda pair: pair[1] if pair[1] is not None else object(),
)


def test_a_relevant_document_below_depth_is_out_of_the_candidate_ideal() -> None:
    # Grades 1 at rank 3 and 3 at rank 70; depth 50, k 10, exponential gain.
    judged = [(1, 3), (3, 70)]
    dcg = 1 / math.log2(4)  # only the rank-3 document is in the top 10
    # The candidate ideal holds the rank-3 document alone (the rank-70 one is outside the top
    # 50 the reranker sees): IDCG_cand = 1 / log2(2) = 1.
    assert candidate_ndcg_at(judged, 10, Gain.EXP, depth=50) == pytest.approx(dcg / 1.0)
    assert candidate_ndcg_at(judged, 10, Gain.EXP, depth=50) == pytest.approx(0.5)
    # The strict ideal orders both: gains 7 then 1.
    assert ndcg_at(judged, 10, Gain.EXP) == pytest.approx(dcg / (7 + 1 / math.log2(3)))
    # At depth 100 the rank-70 document is a candidate and enters the ideal: same as strict.
    assert candidate_ndcg_at(judged, 10, Gain.EXP, depth=100) == pytest.approx(
        ndcg_at(judged, 10, Gain.EXP)
    )
    # Nothing inside the top depth: undefined.
    assert candidate_ndcg_at([(3, 70)], 10, Gain.EXP, depth=50) is None


@given(ranks_strategy, st.integers(1, 20), st.integers(0, 280), st.sampled_from(list(Gain)))
def test_candidate_ndcg_is_at_least_strict(
    relevant: list[tuple[int, int | None]], k: int, extra: int, gain: Gain
) -> None:
    depth = k + extra
    cand = candidate_ndcg_at(relevant, k, gain, depth=depth)
    strict = ndcg_at(relevant, k, gain)
    inside = [r for _, r in relevant if r is not None and r <= depth]
    if not inside:
        assert cand is None
        return
    assert cand is not None
    assert cand >= strict - 1e-12
    assert cand <= 1.0 + 1e-12
    if len(inside) == len(relevant):
        assert cand == pytest.approx(strict)


T = Thresholds(recall=0.5, ndcg=0.5)


def test_the_quadrant_and_its_reasons() -> None:
    fine = diagnose(1.0, 0.9, T, k=10, depth=50)
    assert fine.diagnosis is Diagnosis.FINE
    assert fine.reason == "R@50 1.00 ≥ 0.5 and nDCG_cand@10 0.90 ≥ 0.5"
    assert diagnose(1.0, 0.2, T, k=10, depth=50).diagnosis is Diagnosis.RANKING
    cand = diagnose(0.33, 0.82, T, k=10, depth=50)
    assert cand.diagnosis is Diagnosis.CANDIDATE_GENERATION
    assert cand.reason == "R@50 0.33 < 0.5 and nDCG_cand@10 0.82 ≥ 0.5"
    guess = diagnose(0.0, None, T, k=10, depth=50)
    assert guess.diagnosis is Diagnosis.INGESTION
    assert "undefined" in guess.reason
    assert "a guess" in guess.reason


def test_evidence_decides_low_recall() -> None:
    inside = diagnose(0.33, 0.82, T, k=10, depth=50, evidence=MissEvidence(2, 0))
    assert inside.diagnosis is Diagnosis.CANDIDATE_GENERATION
    assert (
        inside.reason == "R@50 0.33 < 0.5 and nDCG_cand@10 0.82 ≥ 0.5; 2 of 2 misses in the index"
    )
    # Both low, but the misses are in the index: the first stage did not find them.
    both_low = diagnose(0.0, None, T, k=10, depth=50, evidence=MissEvidence(1, 0))
    assert both_low.diagnosis is Diagnosis.CANDIDATE_GENERATION
    out = diagnose(0.0, None, T, k=10, depth=50, evidence=MissEvidence(2, 2))
    assert out.diagnosis is Diagnosis.INGESTION
    assert out.reason.endswith("; 2 of 2 misses not in the index")
    mixed = diagnose(0.2, 0.1, T, k=10, depth=50, evidence=MissEvidence(4, 3))
    assert mixed.diagnosis is Diagnosis.CANDIDATE_GENERATION
    assert mixed.reason.endswith("; 1 of 4 misses in the index")
    # Evidence does not touch a high-recall query.
    assert diagnose(0.8, 0.1, T, k=10, depth=50, evidence=MissEvidence(1, 1)).diagnosis is (
        Diagnosis.RANKING
    )


def test_evaluate_run_uses_the_candidate_ideal_and_the_index(tmp_path: Path) -> None:
    # q1: relevant a at rank 2 (found), b at rank 70 (outside depth 50, in the index).
    # q2: relevant c never returned, not in the index. q3: relevant d at rank 1.
    gold = golden(tmp_path, "q1 0 a 1\nq1 0 b 1\nq2 0 c 1\nq3 0 d 1\n")
    lines = ["q1 Q0 x 1 100 t\n", "q1 Q0 a 2 99 t\n"]
    lines += [f"q1 Q0 f{i} {i} {100 - i} t\n" for i in range(3, 70)]
    lines += ["q1 Q0 b 70 30 t\n", "q2 Q0 y 1 5 t\n", "q3 Q0 d 1 5 t\n"]
    run = ranked(tmp_path, gold, "".join(lines))
    conventions = Conventions(order=run.order, gain=Gain.EXP, min_grade=1)
    thresholds = Thresholds(recall=0.8, ndcg=0.5)

    def rows(indexed: set[str] | None) -> dict[str, tuple[Diagnosis, str, float | None]]:
        result = evaluate_run(
            gold,
            run,
            k=10,
            depth=50,
            conventions=conventions,
            thresholds=thresholds,
            indexed=indexed,
        )
        assert result.no_candidate == 1  # q2
        assert result.index_evidence is (indexed is not None)
        return {q.qid: (q.diagnosis, q.reason, q.ndcg_cand_k) for q in result.queries}

    guessed = rows(None)
    assert guessed["q1"][2] == pytest.approx(1 / math.log2(3))  # ideal: a alone
    assert guessed["q1"][0] is Diagnosis.CANDIDATE_GENERATION  # R@50 0.5, nDCG_cand 0.63
    assert guessed["q2"][0] is Diagnosis.INGESTION
    assert "a guess" in guessed["q2"][1]
    assert guessed["q3"][0] is Diagnosis.FINE
    known = rows({"a", "b", "d"})
    assert known["q1"][1].endswith("; 1 of 1 miss in the index")
    assert known["q2"] == (
        Diagnosis.INGESTION,
        "R@50 0.00 < 0.8 and nDCG_cand@10 undefined (no relevant document in the top 50); "
        "1 of 1 miss not in the index",
        None,
    )
    # Everything in the index: q2's miss was there to be found.
    assert rows({"a", "b", "c", "d"})["q2"][0] is Diagnosis.CANDIDATE_GENERATION
