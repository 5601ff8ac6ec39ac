"""Agreement between reviewers (app/eval/agreement.py) against a second implementation.

The second implementation is the textbook formulas in plain Python, in exact rational
arithmetic (tests/support/agreement_textbook.py). The module computes with the libraries
(statsmodels, krippendorff) and its bootstrap with its own closed forms; both must equal the
formulas to 1e-9 on generated label tables. The published worked examples, the intervals and
the edge cases are in test_agreement_examples.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.eval import agreement_bootstrap as boot
from app.eval.agreement import Agreement, Estimate, Unit, measure_agreement
from tests.support.agreement_textbook import alpha, cohen, confusion, fleiss, one_vs_rest, percent

TOLERANCE = 1e-9
REVIEWERS = ("ana", "ben", "cy", "dee")
CAUSES = ("not-indexed", "vocabulary-mismatch", "chunk-boundary", "other")


def close(estimate: Estimate, expected: Fraction | None) -> bool:
    if expected is None:
        return estimate.value is None and estimate.reason is not None
    return estimate.value is not None and abs(estimate.value - float(expected)) <= TOLERANCE


@st.composite
def label_tables(draw: st.DrawFn) -> list[Unit]:
    """Units labelled by a subset of 2-4 reviewers with 1-4 causes, some with a final label."""
    reviewers = REVIEWERS[: draw(st.integers(2, 4))]
    causes = CAUSES[: draw(st.integers(1, 4))]
    complete = draw(st.booleans())  # every reviewer on every unit, or any subset
    units = []
    for number in range(draw(st.integers(0, 25))):
        if complete:
            labels = {r: draw(st.sampled_from(causes)) for r in reviewers}
        else:
            labels = draw(st.dictionaries(st.sampled_from(reviewers), st.sampled_from(causes)))
        final = draw(st.none() | st.sampled_from(causes))
        units.append(Unit(number, labels, final))
    return units


def compared_labels(units: Sequence[Unit]) -> list[list[str]]:
    return [list(u.labels.values()) for u in units if len(u.labels) >= 2]


def check_against_textbook(units: Sequence[Unit], result: Agreement) -> None:
    compared = compared_labels(units)
    reviewers = list(dict.fromkeys(r for u in units for r in u.labels))
    sizes = Counter(len(labels) for labels in compared)
    ratings = max(sizes, key=lambda m: (sizes[m], m)) if sizes else None
    fleiss_units = [labels for labels in compared if len(labels) == ratings]
    pairs: list[tuple[str, str]] = []
    if len(reviewers) == 2:
        a, b = reviewers
        pairs = [(u.labels[a], u.labels[b]) for u in units if a in u.labels and b in u.labels]

    assert result.fleiss_ratings == ratings
    assert list(result.fleiss_units) == [u.unit_id for u in units if len(u.labels) == ratings]
    assert result.compared_units == len(compared)
    if not compared:
        for estimate in (result.percent_agreement, result.fleiss_kappa, result.krippendorff_alpha):
            assert estimate.value is None
            assert estimate.reason is not None
    else:
        assert close(result.percent_agreement, percent(compared))
        assert close(result.fleiss_kappa, fleiss(fleiss_units))
        assert close(result.krippendorff_alpha, alpha(compared))
    assert close(result.cohen_kappa, cohen(pairs) if pairs else None)

    for cause in result.per_cause:
        binary = one_vs_rest(compared, cause.category)
        assert cause.labels == sum(list(u.labels.values()).count(cause.category) for u in units)
        if compared:
            assert close(cause.percent_agreement, percent(binary))
            assert close(cause.fleiss_kappa, fleiss(one_vs_rest(fleiss_units, cause.category)))
            assert close(cause.krippendorff_alpha, alpha(binary))
        coded = [
            ("yes" if a == cause.category else "no", "yes" if b == cause.category else "no")
            for a, b in pairs
        ]
        assert close(cause.cohen_kappa, cohen(coded) if coded else None)

    cells = confusion(compared)
    assert result.confusion.as_dict() == {
        a: {b: cells[a, b] for b in result.categories} for a in result.categories
    }
    assert result.confusion.pairs == sum(len(list(combinations(c, 2))) for c in compared)

    assert [r.reviewer for r in result.per_reviewer] == reviewers
    for row in result.per_reviewer:
        against = [
            (u.labels[row.reviewer], u.final)
            for u in units
            if row.reviewer in u.labels and u.final is not None
        ]
        assert row.compared == len(against)
        assert row.equal == sum(a == f for a, f in against)
        if against:
            assert row.share == pytest.approx(row.equal / len(against), abs=TOLERANCE)
            expected = cohen([(a, f) for a, f in against if f is not None])
            if expected is None:
                assert row.cohen_kappa is None
            else:
                assert row.cohen_kappa == pytest.approx(float(expected), abs=TOLERANCE)
        else:
            assert row.share is None
            assert row.cohen_kappa is None


@settings(max_examples=150, deadline=None)
@given(label_tables())
def test_every_figure_equals_the_textbook_formulas(units: list[Unit]) -> None:
    check_against_textbook(units, measure_agreement(units, resamples=0))


@st.composite
def resampled(draw: st.DrawFn) -> tuple[list[list[str]], list[int]]:
    """A table of units with 2+ labels, and how often a bootstrap replicate drew each unit."""
    causes = CAUSES[: draw(st.integers(2, 4))]
    size = draw(st.integers(2, 4))
    fixed = draw(st.booleans())  # the same number of labels on every unit (Fleiss' kappa)
    units = [
        draw(st.lists(st.sampled_from(causes), min_size=size, max_size=size if fixed else 4))
        for _ in range(draw(st.integers(1, 12)))
    ]
    drawn = draw(st.lists(st.integers(0, 3), min_size=len(units), max_size=len(units)))
    return units, drawn if sum(drawn) else [1] * len(units)


def as_counts_in(causes: Sequence[str], units: Sequence[Sequence[str]]) -> np.ndarray:
    return np.asarray([[labels.count(c) for c in causes] for labels in units], dtype=np.int64)


def as_counts(units: Sequence[Sequence[str]]) -> np.ndarray:
    return as_counts_in(CAUSES, units)


@settings(max_examples=150, deadline=None)
@given(resampled())
def test_the_bootstrap_kernels_equal_the_textbook_on_a_resampled_table(
    table: tuple[list[list[str]], list[int]],
) -> None:
    """A replicate given as weights over units equals the formula on the repeated units."""
    units, drawn = table
    repeated = [labels for labels, times in zip(units, drawn, strict=True) for _ in range(times)]
    counts, weights = as_counts(units), np.asarray([drawn], dtype=np.int64)

    def matches(value: float, expected: Fraction | None) -> bool:
        return np.isnan(value) if expected is None else abs(value - float(expected)) <= TOLERANCE

    assert matches(boot.percent_kernel(counts, weights)[0], percent(repeated))
    assert matches(boot.alpha_kernel(counts, weights)[0], alpha(repeated))
    if len({len(labels) for labels in units}) == 1:
        assert matches(boot.fleiss_kernel(counts, weights)[0], fleiss(repeated))
    pairs = np.asarray([[CAUSES.index(labels[0]), CAUSES.index(labels[1])] for labels in units])
    first_two = [(labels[0], labels[1]) for labels in repeated]
    assert matches(boot.cohen_kernel(pairs, len(CAUSES), weights)[0], cohen(first_two))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 40).flatmap(
        lambda width: st.lists(
            st.lists(st.integers(0, 3), min_size=width, max_size=width), min_size=1, max_size=30
        )
    )
)
def test_patterns_are_the_distinct_rows_in_order_with_their_shares(rows: list[list[int]]) -> None:
    """Narrow rows are grouped as integers, wide ones (40 causes) row-wise: the same answer."""
    table = np.asarray(rows, dtype=np.int64)
    distinct, shares = boot.patterns(table)
    expected, counts = np.unique(table, axis=0, return_counts=True)
    assert distinct.tolist() == expected.tolist()
    assert shares.tolist() == pytest.approx((counts / len(rows)).tolist(), abs=TOLERANCE)


def replicate_tables(rows: np.ndarray, resamples: int, seed: int) -> list[list[int]]:
    """The module's own draws (same patterns, same generator): per replicate, how often each
    distinct row of ``rows`` was drawn; the test rebuilds each resampled table itself."""
    _, shares = boot.patterns(rows)
    return boot.draws(shares, rows.shape[0], resamples, seed).tolist()


def percentile(values: list[Fraction | None], confidence: float) -> tuple[float, float] | None:
    defined = [float(v) for v in values if v is not None]
    if len(defined) < len(values) / 2:
        return None
    low, high = np.quantile(defined, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


@pytest.mark.parametrize("seed", [0, 11])
def test_each_interval_is_the_percentile_of_the_textbook_on_each_resampled_table(
    seed: int,
) -> None:
    """End to end: the interval of every coefficient, overall and per cause, equals the
    percentiles of the textbook formula over the resampled tables the seed draws."""
    causes = CAUSES[:3]
    units = [
        Unit(n, {"ana": causes[n % 3], "ben": causes[(n * n) % 3 if n % 4 == 0 else n % 3]})
        for n in range(40)
    ]
    resamples, confidence = 25, 0.9
    result = measure_agreement(units, resamples=resamples, seed=seed, confidence=confidence)
    order = list(result.categories)
    counts = as_counts_in(order, [list(u.labels.values()) for u in units])
    distinct, _ = boot.patterns(counts)
    pair_rows = np.asarray(
        [[order.index(u.labels["ana"]), order.index(u.labels["ben"])] for u in units]
    )
    pair_patterns, _ = boot.patterns(pair_rows)
    tables = [
        [
            [order[c] for c, n in enumerate(p) for _ in range(n)]
            for p, w in zip(distinct.tolist(), draw, strict=True)
            for _ in range(w)
        ]
        for draw in replicate_tables(counts, resamples, seed)
    ]
    pair_tables = [
        [
            (order[a], order[b])
            for (a, b), w in zip(pair_patterns.tolist(), draw, strict=True)
            for _ in range(w)
        ]
        for draw in replicate_tables(pair_rows, resamples, seed)
    ]

    def same(ci: tuple[float, float] | None, expected: tuple[float, float] | None) -> None:
        assert (ci is None) == (expected is None)
        if ci is not None and expected is not None:
            assert ci == pytest.approx(expected, abs=TOLERANCE)

    same(result.percent_agreement.ci, percentile([percent(t) for t in tables], confidence))
    same(result.krippendorff_alpha.ci, percentile([alpha(t) for t in tables], confidence))
    same(result.fleiss_kappa.ci, percentile([fleiss(t) for t in tables], confidence))
    same(result.cohen_kappa.ci, percentile([cohen(t) for t in pair_tables], confidence))
    for cause in result.per_cause:
        binary = [one_vs_rest(t, cause.category) for t in tables]
        same(cause.percent_agreement.ci, percentile([percent(t) for t in binary], confidence))
        same(cause.krippendorff_alpha.ci, percentile([alpha(t) for t in binary], confidence))
        same(cause.fleiss_kappa.ci, percentile([fleiss(t) for t in binary], confidence))
        coded = [
            [
                ("yes" if a == cause.category else "no", "yes" if b == cause.category else "no")
                for a, b in t
            ]
            for t in pair_tables
        ]
        same(cause.cohen_kappa.ci, percentile([cohen(t) for t in coded], confidence))
