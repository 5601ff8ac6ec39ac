"""Agreement between reviewers (app/eval/agreement.py): published worked examples, the
bootstrap intervals and the edge cases.

Each example's table is copied from its source, named beside it; the module must give the
published figure (to its printed precision) and the exact value of the textbook formula
(tests/support/agreement_textbook.py) to 1e-9.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from fractions import Fraction

import pytest

from app.eval.agreement import (
    NO_COMMON_UNITS,
    NO_FINAL_LABELS,
    NO_RESAMPLES,
    NO_UNITS,
    ONE_CATEGORY,
    ONE_SIDE,
    Estimate,
    Unit,
    measure_agreement,
)
from tests.support.agreement_textbook import alpha, cohen, fleiss, percent

TOLERANCE = 1e-9

# Fleiss (1971), "Measuring nominal scale agreement among many raters", Psychological Bulletin
# 76(5), Table 1: 30 patients, 6 psychiatric diagnoses each (not the same six raters for every
# patient), 1 depression, 2 personality disorder, 3 schizophrenia, 4 neurosis, 5 other. The
# diagnoses as R's irr package ships them (data set `diagnoses`), one string per patient.
FLEISS_1971 = [
    "444444", "222555", "233335", "555555", "222444", "113333",
    "333355", "113334", "114444", "555555", "144444", "124444",
    "222333", "144444", "224445", "333335", "111455", "111112",
    "224444", "133555", "555555", "244444", "224555", "114444",
    "144445", "222224", "111155", "224444", "133333", "555555",
]  # fmt: skip

# Wikipedia, "Fleiss' kappa", worked example: 14 raters put 10 subjects in 5 categories; the
# number of raters per subject and category. P = 0.378, P_e = 0.213, kappa = 0.210.
WIKIPEDIA_FLEISS = [
    (0, 0, 0, 0, 14),
    (0, 2, 6, 4, 2),
    (0, 0, 3, 5, 6),
    (0, 3, 9, 2, 0),
    (2, 2, 8, 1, 1),
    (7, 7, 0, 0, 0),
    (3, 2, 6, 3, 0),
    (2, 5, 3, 2, 2),
    (6, 5, 2, 1, 0),
    (0, 2, 2, 3, 7),
]

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C (nominal data,
# any number of observers, missing data): observers A-D by 12 units, "." a missing value.
# alpha = 0.743.
KRIPPENDORFF_2011_C = ["123321412...", "1233224125.3", ".3332342251.", "12332441251."]

# Wikipedia, "Krippendorff's alpha", a computational example: 3 coders by 15 units, "." a
# missing value; nominal alpha = 0.691.
WIKIPEDIA_KRIPPENDORFF = [".....34121133.3", "1.213343.......", "..21344.21133.4"]


def rater_units(rows: Sequence[str]) -> list[Unit]:
    """One unit per string, its characters the labels of raters r0, r1, ... ("." missing)."""
    return [
        Unit(number, {f"r{i}": c for i, c in enumerate(row) if c != "."})
        for number, row in enumerate(rows)
    ]


def observer_units(observers: Sequence[str]) -> list[Unit]:
    """Observers by units (one string per observer) to units."""
    return rater_units(["".join(o[u] for o in observers) for u in range(len(observers[0]))])


def labels_of(units: Sequence[Unit]) -> list[list[str]]:
    return [[v for v in u.labels.values() if v is not None] for u in units if len(u.labels) > 1]


def equals(estimate: Estimate, exact: Fraction | None, published: float, places: int) -> None:
    assert exact is not None
    assert estimate.value is not None, estimate.reason
    assert abs(estimate.value - float(exact)) <= TOLERANCE
    assert round(estimate.value, places) == published


def test_fleiss_1971_table_gives_kappa_430_and_his_category_kappas() -> None:
    units = rater_units(FLEISS_1971)
    result = measure_agreement(units, resamples=0)
    # Exactly 5437/12637 = 0.430244..., quoted as .430.
    assert fleiss(labels_of(units)) == Fraction(5437, 12637)
    equals(result.fleiss_kappa, Fraction(5437, 12637), 0.430, 3)
    assert result.fleiss_ratings == 6
    assert len(result.fleiss_units) == 30
    # Category kappas (Fleiss 1971; also what irr::kappam.fleiss(diagnoses, detail = TRUE) prints).
    published = {"1": 0.245, "2": 0.245, "3": 0.520, "4": 0.471, "5": 0.566}
    for category, value in published.items():
        estimate = result.by_cause[category].fleiss_kappa
        assert estimate.value is not None
        assert round(estimate.value, 3) == value
    assert result.cohen_kappa.value is None  # six raters: not Cohen's case


def test_wikipedia_fleiss_example_gives_kappa_210() -> None:
    rows = ["".join(str(c) * n for c, n in enumerate(counts)) for counts in WIKIPEDIA_FLEISS]
    units = rater_units(rows)
    result = measure_agreement(units, resamples=0)
    equals(result.fleiss_kappa, fleiss(labels_of(units)), 0.210, 3)
    equals(result.percent_agreement, percent(labels_of(units)), 0.378, 3)  # Wikipedia's P


def test_krippendorff_2011_nominal_example_gives_alpha_743() -> None:
    units = observer_units(KRIPPENDORFF_2011_C)
    result = measure_agreement(units, resamples=0)
    equals(result.krippendorff_alpha, alpha(labels_of(units)), 0.743, 3)
    assert result.compared_units == 11  # unit 12 has one value: nothing to pair


def test_wikipedia_krippendorff_example_gives_alpha_691() -> None:
    units = observer_units(WIKIPEDIA_KRIPPENDORFF)
    result = measure_agreement(units, resamples=0)
    equals(result.krippendorff_alpha, alpha(labels_of(units)), 0.691, 3)


@pytest.mark.parametrize(
    ("cells", "published", "exact"),
    [
        # Wikipedia, "Cohen's kappa", simple example (also worked on howcodex.com's "Cohen's
        # kappa coefficient" page): 50 grant proposals, readers A and B; (yes, yes) 20,
        # (yes, no) 5, (no, yes) 10, (no, no) 15: p_o 0.7, p_e 0.5, kappa 0.4.
        ((20, 5, 10, 15), 0.4, Fraction(2, 5)),
        # Two tables with the same p_o = 0.6 and other marginals, worked by hand (kappa's
        # dependence on the marginals): p_e = .6 x .7 + .4 x .3 = .54, kappa = .06 / .46 = 3/23;
        # p_e = .6 x .3 + .4 x .7 = .46, kappa = .14 / .54 = 7/27.
        ((45, 15, 25, 15), 0.1304, Fraction(3, 23)),
        ((25, 35, 5, 35), 0.2593, Fraction(7, 27)),
    ],
)
def test_cohen_textbook_examples(
    cells: tuple[int, int, int, int], published: float, exact: Fraction
) -> None:
    pairs = [("yes", "yes"), ("yes", "no"), ("no", "yes"), ("no", "no")]
    labels = [pair for pair, count in zip(pairs, cells, strict=True) for _ in range(count)]
    units = [Unit(n, {"A": a, "B": b}) for n, (a, b) in enumerate(labels)]
    result = measure_agreement(units, resamples=0)
    assert cohen(labels) == exact
    equals(result.cohen_kappa, exact, published, len(str(published)) - 2)
    assert result.cohen_kappa.units == sum(cells)


def typical_table() -> list[Unit]:
    """80 misses, two reviewers, three causes, about four in five labels agreeing."""
    causes = ("not-indexed", "vocabulary-mismatch", "chunk-boundary")
    units = []
    for number in range(80):
        first = causes[number % 3]
        second = causes[(number + 1) % 3] if number % 5 == 0 else first
        units.append(Unit(number, {"ana": first, "ben": second}, final=first))
    return units


def all_estimates(units: Sequence[Unit], seed: int) -> list[Estimate]:
    result = measure_agreement(units, seed=seed, resamples=300)
    overall = [
        result.percent_agreement,
        result.cohen_kappa,
        result.fleiss_kappa,
        result.krippendorff_alpha,
    ]
    return overall + [
        estimate
        for cause in result.per_cause
        for estimate in (cause.cohen_kappa, cause.fleiss_kappa, cause.krippendorff_alpha)
    ]


def test_the_interval_is_reproducible_with_a_seed_and_holds_the_estimate() -> None:
    units = typical_table()
    first, again, other = (all_estimates(units, seed) for seed in (7, 7, 8))
    assert first == again
    assert [e.ci for e in first] != [e.ci for e in other]
    for estimate in first:
        assert estimate.value is not None
        assert estimate.ci is not None, estimate.reason
        low, high = estimate.ci
        assert low <= estimate.value <= high
        assert low < high
        assert estimate.resamples == 300


def test_resampling_follows_the_units_not_their_order() -> None:
    """The replicates depend on the units drawn, so listing them in another order (the
    patterns are sorted) gives the same intervals."""
    units = typical_table()
    assert all_estimates(units, 3) == all_estimates(list(reversed(units)), 3)


def test_no_units_and_single_labels_leave_every_coefficient_undefined() -> None:
    for units in ([], [Unit(1, {"ana": "x"}), Unit(2, {"ben": "y", "cy": None})]):
        result = measure_agreement(units)
        for estimate in (
            result.percent_agreement,
            result.fleiss_kappa,
            result.krippendorff_alpha,
        ):
            assert estimate == Estimate(None, None, 0, NO_UNITS)
        assert result.cohen_kappa.value is None
        assert result.compared_units == 0
        assert result.fleiss_units == ()
        assert result.confusion.pairs == 0
    assert measure_agreement([]).reviewers_per_unit == {}


def test_all_agreeing_on_one_cause_is_full_agreement_and_an_undefined_kappa() -> None:
    units = [
        Unit(n, {"ana": "vocabulary-mismatch", "ben": "vocabulary-mismatch"}) for n in range(5)
    ]
    result = measure_agreement(units, categories=["not-indexed", "vocabulary-mismatch"])
    assert result.percent_agreement.value == 1.0
    assert result.percent_agreement.ci == (1.0, 1.0)
    for estimate in (result.cohen_kappa, result.fleiss_kappa, result.krippendorff_alpha):
        assert estimate == Estimate(None, None, 5, ONE_CATEGORY)
    assert result.categories == ("not-indexed", "vocabulary-mismatch")
    unused = result.by_cause["not-indexed"]
    assert unused.labels == 0
    assert unused.krippendorff_alpha == Estimate(None, None, 5, ONE_SIDE)
    assert result.confusion.as_dict()["vocabulary-mismatch"] == {
        "not-indexed": 0,
        "vocabulary-mismatch": 5,
    }


def test_perfect_agreement_over_two_causes_is_kappa_one() -> None:
    units = [Unit(n, {"ana": "ab"[n % 2], "ben": "ab"[n % 2]}) for n in range(10)]
    result = measure_agreement(units, resamples=200)
    for estimate in (result.cohen_kappa, result.fleiss_kappa, result.krippendorff_alpha):
        assert estimate.value == pytest.approx(1.0, abs=TOLERANCE)
        assert estimate.ci == pytest.approx((1.0, 1.0), abs=TOLERANCE)


def test_cohen_needs_the_same_two_reviewers() -> None:
    three = [Unit(1, {"ana": "a", "ben": "b"}), Unit(2, {"ben": "a", "cy": "a"})]
    result = measure_agreement(three)
    assert result.cohen_kappa.value is None
    assert result.cohen_kappa.reason is not None
    assert "3" in result.cohen_kappa.reason
    apart = [Unit(1, {"ana": "a"}), Unit(2, {"ben": "b"})]
    assert measure_agreement(apart).cohen_kappa == Estimate(None, None, 0, NO_COMMON_UNITS)


def test_fleiss_uses_the_most_common_number_of_labels_and_says_which_units() -> None:
    units = [
        Unit("m1", {"ana": "a", "ben": "a"}),
        Unit("m2", {"ana": "a", "ben": "b", "cy": "b"}),
        Unit("m3", {"ana": "b", "cy": "b"}),
        Unit("m4", {"ben": "a"}),
        Unit("m5", {"ana": "b", "ben": "a", "cy": "a"}),
    ]
    result = measure_agreement(units, resamples=0)
    assert result.reviewers_per_unit == {1: 1, 2: 2, 3: 2}
    assert result.fleiss_ratings == 3  # a tie between 2 and 3 goes to the larger number
    assert result.fleiss_units == ("m2", "m5")
    assert result.fleiss_kappa.units == 2
    assert result.krippendorff_alpha.units == 4  # every unit with two labels
    assert result.fleiss_kappa.reason == NO_RESAMPLES
    assert result.fleiss_kappa.ci is None


def test_each_reviewer_against_the_final_labels() -> None:
    units = [
        Unit(1, {"ana": "a", "ben": "a"}, final="a"),
        Unit(2, {"ana": "b", "ben": "a"}, final="b"),
        Unit(3, {"ana": "b", "ben": "b"}, final="b"),
        Unit(4, {"ana": "a", "ben": "b"}, final="a"),
        Unit(5, {"ana": "a", "ben": "b"}),
        Unit(6, {"cy": "a"}),
    ]
    ana, ben, cy = measure_agreement(units, resamples=0).per_reviewer
    assert (ana.reviewer, ana.labelled, ana.compared, ana.equal, ana.share) == ("ana", 5, 4, 4, 1.0)
    assert ana.cohen_kappa == pytest.approx(1.0, abs=TOLERANCE)
    assert (ben.compared, ben.equal, ben.share) == (4, 2, 0.5)
    assert ben.cohen_kappa == pytest.approx(0.0, abs=TOLERANCE)
    assert (cy.compared, cy.share, cy.cohen_kappa, cy.reason) == (0, None, None, NO_FINAL_LABELS)


@pytest.mark.parametrize(("resamples", "confidence"), [(-1, 0.95), (10, 0.0), (10, 1.0)])
def test_bad_settings_are_refused(resamples: int, confidence: float) -> None:
    with pytest.raises(ValueError, match="must be"):
        measure_agreement([], resamples=resamples, confidence=confidence)


def test_importing_the_module_leaves_statsmodels_unloaded() -> None:
    """statsmodels (with pandas and scipy) is seconds of start-up: loaded when measured only."""
    probe = (
        "import sys, app.eval.agreement; print(sorted({'statsmodels', 'scipy'} & set(sys.modules)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"
