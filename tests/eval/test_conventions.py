"""The conventions table of DESIGN.md, one trap at a time."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl
import pytest

from app.eval import InputError, Order, enumerate_misses, repeats, top_candidates
from app.eval.conventions import parse_depths
from tests.support.evaluation import evaluate, golden, ranked, ranks

QRELS = "q1 0 a 1\nq1 0 b 1\nq1 0 c 1\n"


def test_trec_eval_order_ignores_rank_column(tmp_path: Path) -> None:
    gold = golden(tmp_path, QRELS)
    # The rank column says c, b, a; the scores say a, b, c.
    run = ranked(tmp_path, gold, "q1 Q0 c 1 1.0 t\nq1 Q0 b 2 2.0 t\nq1 Q0 a 3 3.0 t\n")
    assert ranks(run) == {("q1", "a"): 1, ("q1", "b"): 2, ("q1", "c"): 3}


def test_rank_order_follows_rank_column(tmp_path: Path) -> None:
    gold = golden(tmp_path, QRELS)
    run = ranked(
        tmp_path, gold, "q1 Q0 c 3 1.0 t\nq1 Q0 b 1 2.0 t\nq1 Q0 a 2 3.0 t\n", order=Order.RANK
    )
    assert ranks(run) == {("q1", "b"): 1, ("q1", "a"): 2, ("q1", "c"): 3}


def test_file_order_follows_lines(tmp_path: Path) -> None:
    gold = golden(tmp_path, QRELS)
    run = ranked(
        tmp_path, gold, "q1 Q0 c 3 1.0 t\nq1 Q0 b 1 2.0 t\nq1 Q0 a 2 3.0 t\n", order=Order.FILE
    )
    assert ranks(run) == {("q1", "c"): 1, ("q1", "b"): 2, ("q1", "a"): 3}


def test_ties_broken_by_docno_descending_bytes(tmp_path: Path) -> None:
    # trec_eval compares docnos as strings, descending: "9" > "10" > "1", "b" > "a", "a" > "B".
    gold = golden(tmp_path, "q1 0 10 1\nq1 0 9 1\nq1 0 1 1\nq1 0 B 1\nq1 0 a 1\n")
    run = ranked(tmp_path, gold, "".join(f"q1 Q0 {d} 1 5 t\n" for d in ["1", "10", "9", "B", "a"]))
    assert ranks(run) == {
        ("q1", "a"): 1,
        ("q1", "B"): 2,
        ("q1", "9"): 3,
        ("q1", "10"): 4,
        ("q1", "1"): 5,
    }


def test_scores_compare_as_doubles(tmp_path: Path) -> None:
    # "10" > "9.5" numerically but not as text; "1.0" and "1.00" tie; -0 ties with 0.
    gold = golden(tmp_path, "q1 0 a 1\nq1 0 b 1\nq1 0 c 1\nq1 0 d 1\nq1 0 e 1\n")
    run = ranked(
        tmp_path,
        gold,
        "q1 Q0 a 1 9.5 t\nq1 Q0 b 2 10 t\nq1 Q0 c 3 1.0 t\nq1 Q0 d 4 1.00 t\n"
        "q1 Q0 e 5 -0 t\nq1 Q0 f 6 0 t\n",
    )
    assert ranks(run) == {
        ("q1", "b"): 1,
        ("q1", "a"): 2,
        ("q1", "d"): 3,
        ("q1", "c"): 4,
        ("q1", "e"): 6,  # ties with f at 0, and "f" > "e"
    }


def test_duplicates_first_occurrence_wins_and_is_counted(tmp_path: Path) -> None:
    gold = golden(tmp_path, QRELS)
    # "a" appears again with a higher score: the first line (score 1) is kept.
    run = ranked(
        tmp_path,
        gold,
        "q1 Q0 a 1 1.0 t\nq1 Q0 b 2 2.0 t\nq1 Q0 a 3 9.0 t\nq1 Q0 b 4 0.5 t\nq1 Q0 c 5 1.5 t\n",
    )
    assert ranks(run) == {("q1", "b"): 1, ("q1", "c"): 2, ("q1", "a"): 3}
    assert run.report.duplicates_dropped == 2
    assert run.retrieved == {"q1": 3}
    assert any("2 repeated documents" in w for w in run.report.warnings)


@pytest.mark.parametrize("mask", [0xFFFFFFFF, 0xF], ids=["32-bit", "16-values"])
def test_repeated_lines_are_exact_whatever_the_hashes_collide(
    mask: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Repeats are found by hashes, then compared exactly: with the hash cut to 16 values
    nearly every line collides with another, and still only true repeats are dropped, the
    first occurrence kept."""
    monkeypatch.setattr(repeats, "_LOW_32", mask)
    rng = random.Random(17)
    pairs = [(f"q{rng.randrange(30)}", f"d{rng.randrange(60)}") for _ in range(3000)]
    frame = pl.DataFrame(pairs, schema=["qid", "doc_id"], orient="row").with_row_index("pos")
    seen: set[tuple[str, str]] = set()
    expected = []
    for pos, pair in enumerate(pairs):
        if pair in seen:
            expected.append(pos)
        seen.add(pair)
    assert 0 < len(expected) < len(pairs)
    assert sorted(repeats.repeated_lines(frame).to_list()) == expected


@pytest.mark.parametrize("distinct", [1, 3, 40], ids=["one-pair", "three-pairs", "past-rounds"])
@pytest.mark.parametrize("buckets", [1, 2, 7])
def test_exact_repeats_compare_the_ids_whatever_pairs_share_a_key(
    distinct: int, buckets: int
) -> None:
    """``exact_repeats``: later rows of a (qid, doc_id) pair, whichever pairs share a key
    (all of them in one bucket too, more pairs in one than its rounds settle: polars'
    distinct then takes the rest); rows that share one long id held once by polars."""
    rng = random.Random(distinct * 10 + buckets)
    long_id = "d" + "x" * 1000
    docs = pl.Series([long_id, *(f"d{i}" for i in range(distinct))])
    picks = [rng.randrange(distinct + 1) for _ in range(600)]
    queries = [f"q{rng.randrange(3)}" for _ in picks]
    frame = pl.DataFrame(
        {"qid": queries, "doc_id": docs.gather(picks), "pos": range(len(picks))},
        schema_overrides={"pos": pl.UInt32},
    )
    seen: set[tuple[str, int]] = set()
    expected = []
    for pos, pair in enumerate(zip(queries, picks, strict=True)):
        if pair in seen:
            expected.append(pos)
        seen.add(pair)
    key = pl.col("doc_id").hash() % buckets
    assert repeats.exact_repeats(frame, key).to_list() == expected


def test_min_grade_and_negative_grades(tmp_path: Path) -> None:
    qrels = "q1 0 a 2\nq1 0 b 1\nq1 0 c -1\nq1 0 d 0\nq2 0 a 1\n"
    gold = golden(tmp_path, qrels, min_grade=2)
    assert gold.evaluated_qids == ["q1"]
    assert gold.report.queries_without_relevant == 1
    assert gold.report.negative_grades == 1
    run = ranked(tmp_path, gold, "q1 Q0 b 1 3 t\nq1 Q0 a 2 2 t\n")
    result = evaluate(gold, run, k=1, depth=2)
    # Only "a" is relevant at min_grade 2: it is at rank 2.
    assert result.measures["R@1"] == 0.0
    assert result.measures["R@2"] == 1.0
    assert result.relevant == 1


def test_golden_query_absent_from_run_counts_zero(tmp_path: Path) -> None:
    gold = golden(tmp_path, "q1 0 a 1\nq2 0 x 1\nq2 0 y 2\n")
    run = ranked(tmp_path, gold, "q1 Q0 a 1 1 t\n")
    result = evaluate(gold, run, k=10, depth=50)
    assert result.measures["R@10"] == 0.5
    assert result.report.golden_queries_absent == 1
    assert result.report.golden_queries_absent_ids == ["q2"]
    misses = enumerate_misses(gold, run, 50)
    assert [(m.qid, m.doc_id, m.grade, m.rank) for m in misses] == [
        ("q2", "y", 2, None),
        ("q2", "x", 1, None),
    ]


def test_unknown_run_queries_are_ignored_and_counted(tmp_path: Path) -> None:
    gold = golden(tmp_path, "q1 0 a 1\n")
    run = ranked(tmp_path, gold, "q1 Q0 a 1 1 t\nq9 Q0 a 1 5 t\nq9 Q0 b 2 4 t\nq8 Q0 a 1 1 t\n")
    assert run.report.unknown_queries == 2
    assert run.report.unknown_query_lines == 3
    assert run.report.queries == 3
    assert run.retrieved == {"q1": 1}


def test_jsonl_lists_use_list_order(tmp_path: Path) -> None:
    gold = golden(tmp_path, QRELS)
    run = ranked(
        tmp_path,
        gold,
        '{"qid": "q1", "docs": [{"doc_id": "c", "score": 1}, "a", "b"]}\n',
        suffix=".jsonl",
    )
    assert run.order is Order.FILE
    assert ranks(run) == {("q1", "c"): 1, ("q1", "a"): 2, ("q1", "b"): 3}


def test_jsonl_hits_use_trec_eval_order(tmp_path: Path) -> None:
    gold = golden(tmp_path, QRELS)
    lines = [("a", 1), ("b", 3), ("c", 3)]
    text = "".join(f'{{"qid": "q1", "doc_id": "{d}", "score": {s}}}\n' for d, s in lines)
    run = ranked(tmp_path, gold, text, suffix=".jsonl")
    assert ranks(run) == {("q1", "c"): 1, ("q1", "b"): 2, ("q1", "a"): 3}


def test_rank_order_needs_ranks(tmp_path: Path) -> None:
    gold = golden(tmp_path, QRELS)
    with pytest.raises(InputError, match="order 'rank' needs a rank"):
        ranked(
            tmp_path,
            gold,
            '{"qid": "q1", "doc_id": "a", "score": 1}\n',
            suffix=".jsonl",
            order=Order.RANK,
        )


def test_conflicting_judgments_name_both_lines(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        golden(tmp_path, "q1 0 a 1\nq1 0 b 1\nq1 0 a 2\n")
    assert caught.value.line == 3
    assert "different grade than on line 1" in caught.value.message


def test_repeated_identical_judgment_is_counted(tmp_path: Path) -> None:
    gold = golden(tmp_path, "q1 0 a 1\nq1 0 a 1\n")
    assert gold.report.duplicate_pairs_dropped == 1
    assert gold.judgments.height == 1


def test_nothing_relevant_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nothing to evaluate"):
        golden(tmp_path, "q1 0 a 0\n")


@pytest.mark.parametrize("order", list(Order))
def test_top_candidates_agree_with_judged_ranks(tmp_path: Path, order: Order) -> None:
    qrels = "".join(f"q{q} 0 d{d} 1\n" for q in range(3) for d in range(0, 30, 3))
    gold = golden(tmp_path, qrels)
    lines = [
        f"q{q} Q0 d{d} {(d * 7) % 31} {(d * 13) % 5}.5 t\n" for q in range(3) for d in range(30)
    ]
    run = ranked(tmp_path, gold, "".join(lines), order=order, keep_results=True)
    top = top_candidates(run, 1000)
    from_top = {(q, d): r for q, r, d, _ in top.iter_rows() if (q, d) in ranks(run)}
    assert from_top == ranks(run)
    assert top.group_by("qid").len().get_column("len").to_list() == [30, 30, 30]
    assert top_candidates(run, 5).height == 15


def test_parse_depths() -> None:
    assert parse_depths("50, 10,10,1000") == (10, 50, 1000)
    for bad in ["", "0", "ten", "-5"]:
        with pytest.raises(ValueError, match="depth"):
            parse_depths(bad)


def test_exact_repeats_take_a_missing_id_as_a_value() -> None:
    """A missing id repeats a missing id of its query (as polars' distinct has it), and a
    group whose first row has one loses none of its other pairs."""
    frame = pl.DataFrame(
        {
            "qid": ["q1", "q1", "q1", "q1", "q2"],
            "doc_id": [None, "d1", None, "d1", None],
            "pos": [0, 1, 2, 3, 4],
        },
        schema_overrides={"pos": pl.UInt32},
    )
    assert repeats.exact_repeats(frame, pl.lit(0)).to_list() == [2, 3]
