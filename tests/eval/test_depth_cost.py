"""The depth advisor: worked examples by hand (the method's 3.1 ms table) and properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.eval.depth_cost import (
    advise_depth,
    fill_retrieval_p95,
    format_ms,
    parse_retrieval_p95,
    reranking_cost,
)

#: The method's table: depths 10, 50, 100, 200 at 3.1 ms per candidate.
CURVE = {10: 0.700, 50: 0.850, 100: 0.880, 200: 0.910}


def test_the_methods_table_by_hand() -> None:
    advice = advise_depth(CURVE, cost_per_candidate_ms=3.1)
    assert advice is not None
    assert [format_ms(p.cost_ms) for p in advice.points] == ["31", "155", "310", "620"]
    # Gains per ms by hand: 0.150 / 124 ms, 0.030 / 155 ms, 0.030 / 310 ms.
    gains = [p.gain_per_ms for p in advice.points]
    assert gains[0] is None
    assert gains[1:] == pytest.approx([0.15 / 124, 0.03 / 155, 0.03 / 310])
    assert advice.sentences() == [
        "depth 50 buys +0.150 R for +124 ms per query",
        "depth 100 buys +0.030 R for +155 ms per query",
        "depth 200 buys +0.030 R for +310 ms per query",
    ]
    # Best 0.910; within 0.01 only depth 200 itself.
    assert advice.advised_depth == 200
    assert advice.advice().startswith("depth still pays at 200, the deepest measured")


def test_the_methods_sentence_from_50_to_200() -> None:
    advice = advise_depth({50: 0.880, 200: 0.910}, cost_per_candidate_ms=3.1)
    assert advice is not None
    assert advice.sentences() == ["depth 200 buys +0.030 R for +465 ms per query"]


def test_a_wider_tolerance_stops_earlier() -> None:
    advice = advise_depth(CURVE, cost_per_candidate_ms=3.1, tolerance=0.03)
    assert advice is not None
    # 0.880 >= 0.910 - 0.03 (exactly at the edge: float noise must not push it out).
    assert advice.advised_depth == 100
    assert advice.advice() == (
        "depth stops paying at 100: R@100 = 0.880 is within 0.03 R of the best on the curve "
        "(0.910) at 310 ms per query; going to depth 200 adds 310 ms for +0.030 R"
    )


def test_a_flat_step_buys_nothing() -> None:
    advice = advise_depth({10: 0.5, 20: 0.5, 50: 0.6}, cost_per_candidate_ms=2)
    assert advice is not None
    assert advice.sentences()[0] == "depth 20 buys nothing for +20 ms per query"
    assert advice.points[1].gain_per_ms == 0.0
    assert advice.advised_depth == 50


def test_retrieval_p95_adds_to_the_cost() -> None:
    advice = advise_depth(
        {10: 0.5, 100: 0.7}, cost_per_candidate_ms=1, retrieval_p95_ms={10: 12, 100: 20}
    )
    assert advice is not None
    assert [p.cost_ms for p in advice.points] == [22, 120]
    assert advice.points[1].gain_per_ms == pytest.approx(0.2 / 98)


@pytest.mark.parametrize("cost", [None, 0, 0.0])
def test_no_cost_no_advisor(cost: float | None) -> None:
    assert advise_depth(CURVE, cost_per_candidate_ms=cost) is None


@pytest.mark.parametrize(
    ("curve", "cost", "tolerance", "p95", "message"),
    [
        (CURVE, -1.0, 0.01, None, "cost per candidate"),
        (CURVE, float("nan"), 0.01, None, "cost per candidate"),
        (CURVE, 3.1, -0.1, None, "tolerance"),
        ({}, 3.1, 0.01, None, "empty"),
        ({0: 0.1, 10: 0.2}, 3.1, 0.01, None, "depths must be"),
        (CURVE, 3.1, 0.01, {}, "no retrieval p95"),
        (CURVE, 3.1, 0.01, {10: -1.0}, "retrieval p95"),
    ],
)
def test_bad_arguments_raise(
    curve: dict[int, float],
    cost: float,
    tolerance: float,
    p95: dict[int, float] | None,
    message: str,
) -> None:
    with pytest.raises(ValueError, match=message):
        advise_depth(curve, cost_per_candidate_ms=cost, tolerance=tolerance, retrieval_p95_ms=p95)


curves = st.dictionaries(
    st.integers(1, 2000), st.floats(0, 1, allow_nan=False), min_size=1, max_size=8
).map(lambda c: dict(zip(sorted(c), sorted(c.values()), strict=True)))  # recall non-decreasing
costs = st.floats(0.001, 1000, allow_nan=False)
tolerances = st.floats(0, 0.5, allow_nan=False)


@given(st.integers(1, 5000), costs)
def test_cost_is_linear_in_depth(depth: int, cost: float) -> None:
    assert reranking_cost(2 * depth, cost) == pytest.approx(2 * reranking_cost(depth, cost))
    assert reranking_cost(depth, cost) == pytest.approx(depth * cost)


@given(curves, costs, tolerances)
def test_the_advised_depth_is_the_smallest_within_tolerance(
    curve: dict[int, float], cost: float, tolerance: float
) -> None:
    advice = advise_depth(curve, cost_per_candidate_ms=cost, tolerance=tolerance)
    assert advice is not None
    best = max(curve.values())
    assert curve[advice.advised_depth] >= best - tolerance - 1e-12
    assert all(curve[d] < best - tolerance for d in curve if d < advice.advised_depth)
    assert [p.cost_ms for p in advice.points] == pytest.approx([d * cost for d in sorted(curve)])


@given(curves, costs)
def test_gain_per_ms_is_zero_on_flat_steps(curve: dict[int, float], cost: float) -> None:
    advice = advise_depth(curve, cost_per_candidate_ms=cost)
    assert advice is not None
    for step, point in zip(advice.steps, advice.points[1:], strict=True):
        # Flat: no gain beyond float noise (1e-12 R, the module's margin).
        if curve[step.to_depth] - curve[step.from_depth] <= 1e-12:
            assert point.gain_per_ms == 0.0
            assert "buys nothing" in step.sentence()
        else:
            assert point.gain_per_ms is not None
            assert point.gain_per_ms > 0


def test_a_retrieval_p95_measured_at_some_depths_fills_the_curve() -> None:
    measured = parse_retrieval_p95(" 10:12, 100:30 ,1000:90")
    assert measured == {10: 12.0, 100: 30.0, 1000: 90.0}
    filled = fill_retrieval_p95([5, 10, 50, 100, 200, 1000, 2000], measured)
    # nearest beyond the ends; linear in depth in between: 12 + 40/90 * 18 = 20
    assert filled == {5: 12.0, 10: 12.0, 50: 20.0, 100: 30.0, 200: 30 + 60 / 9, 1000: 90.0,
                      2000: 90.0}  # fmt: skip
    # advise_depth fills the curve's depths itself from the depths measured
    advice = advise_depth({10: 0.5, 50: 0.7}, cost_per_candidate_ms=1.0, retrieval_p95_ms=measured)
    assert advice is not None
    assert [p.cost_ms for p in advice.points] == [22.0, 70.0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no depth:ms pair"),
        ("10", "is not depth:ms"),
        ("0:5", "depth >= 1"),
        ("10:-1", "ms >= 0"),
        ("10:nan", "ms >= 0"),
        ("10:1,10:2", "given twice"),
        ("x" * 5000, "is not depth:ms"),
    ],
)
def test_a_bad_retrieval_p95_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as refused:
        parse_retrieval_p95(text)
    assert len(str(refused.value)) < 200  # never echoes a huge value
