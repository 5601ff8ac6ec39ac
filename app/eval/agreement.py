"""Agreement between reviewers who labelled the same misses, overall and per cause.

Input: units (misses), each with its reviewers' labels ``{reviewer: category}`` (any number of
reviewers per unit; a reviewer absent from a unit, or mapped to ``None``, did not label it)
and optionally its final label. Output: frozen dataclasses, every coefficient with a bootstrap
percentile interval (units resampled; ``app.eval.agreement_bootstrap``).

* **percent agreement**: for each unit with two or more labels, the share of its pairs of
  labels that agree; the mean over those units (each unit weighs the same; Fleiss' ``P``).
* **Cohen's kappa** (Cohen 1960): ``(p_o - p_e) / (1 - p_e)`` with each reviewer's own
  marginals; defined only when exactly two reviewers labelled the units, over the units both
  labelled (statsmodels ``cohens_kappa``).
* **Fleiss' kappa** (Fleiss 1971): needs the same number of ratings ``r`` on every unit; it uses
  the units with the most common number of labels (two or more; a tie goes to the larger
  number) and says which (``fleiss_units``, ``fleiss_ratings``) (statsmodels ``fleiss_kappa``).
* **Krippendorff's alpha**, nominal: any number of reviewers, missing labels allowed; units
  with a single label carry no pairable value and drop out (the ``krippendorff`` package).
* **per cause**: each cause coded one-vs-rest ("this cause or not"), and the same coefficients
  on that binary coding (Fleiss' kappa of the binary coding is his category kappa ``kappa_j``).
* **confusion**: the pairs of labels on the same unit, counted once per pair of reviewers:
  the cell ``(a, a)`` counts agreeing pairs; a disagreeing pair ``{a, b}`` is counted in both
  ``(a, b)`` and ``(b, a)``, so the matrix is symmetric (the upper triangle sums to ``pairs``).
* **per reviewer**: on the units with a final label, the share of the reviewer's labels equal
  to it and Cohen's kappa between the reviewer and the final labels, where defined.

Edge-case policy: an undefined figure is ``None`` with a ``reason``, never a division error.
No unit with two labels: every coefficient is undefined. All labels the same cause (chance
agreement 1, so kappa and alpha are 0/0): percent agreement is 1.0 and the coefficients are
undefined; a cause on every label or on none is undefined per cause in the same way. Cohen's
kappa with other than two reviewers, or two with no unit in common: undefined. A replicate in
which a coefficient is undefined is left out of its interval (see the bootstrap module).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import krippendorff
import numpy as np

from app.eval import agreement_bootstrap as boot
from app.eval.agreement_bootstrap import FloatArray, IntArray
from app.eval.agreement_table import LabelTable, ReviewerId, Unit, UnitId, tabulate, tally

__all__ = [
    "Agreement",
    "CauseAgreement",
    "Confusion",
    "Estimate",
    "ReviewerAgreement",
    "ReviewerId",
    "Unit",
    "UnitId",
    "measure_agreement",
]

NO_UNITS = "no unit has labels from two reviewers"
ONE_CATEGORY = "every label is the same cause: chance agreement is 1, the coefficient is 0/0"
ONE_SIDE = "the cause is on every label or on none: chance agreement is 1, the coefficient is 0/0"
NOT_TWO_REVIEWERS = "Cohen's kappa compares exactly two reviewers; {count} labelled these units"
NO_COMMON_UNITS = "the two reviewers labelled no unit in common"
NO_FINAL_LABELS = "no unit this reviewer labelled has a final label"
NO_RESAMPLES = "no resamples were asked for"


@dataclass(frozen=True, slots=True)
class Estimate:
    """A coefficient over ``units`` units, its interval, and why either is ``None``."""

    value: float | None
    ci: tuple[float, float] | None
    units: int
    reason: str | None = None
    #: Bootstrap replicates in which the coefficient was defined.
    resamples: int = 0


@dataclass(frozen=True, slots=True)
class CauseAgreement:
    """One cause coded one-vs-rest; ``labels``: how many labels name it."""

    category: str
    labels: int
    percent_agreement: Estimate
    cohen_kappa: Estimate
    fleiss_kappa: Estimate
    krippendorff_alpha: Estimate


@dataclass(frozen=True, slots=True)
class Confusion:
    """Pairs of labels on the same unit between causes (symmetric; see the module docstring)."""

    categories: tuple[str, ...]
    counts: tuple[tuple[int, ...], ...]
    pairs: int

    def as_dict(self) -> dict[str, dict[str, int]]:
        """``{row cause: {column cause: pairs}}``."""
        return {
            row: dict(zip(self.categories, cells, strict=True))
            for row, cells in zip(self.categories, self.counts, strict=True)
        }


@dataclass(frozen=True, slots=True)
class ReviewerAgreement:
    """One reviewer against the final labels, on the ``compared`` units that have one."""

    reviewer: ReviewerId
    labelled: int
    compared: int
    equal: int
    share: float | None
    cohen_kappa: float | None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Agreement:
    """Everything measured; ``reviewers_per_unit``: units by their number of labels."""

    units: int
    compared_units: int
    reviewers: tuple[ReviewerId, ...]
    reviewers_per_unit: Mapping[int, int]
    categories: tuple[str, ...]
    percent_agreement: Estimate
    cohen_kappa: Estimate
    fleiss_kappa: Estimate
    fleiss_ratings: int | None
    fleiss_units: tuple[UnitId, ...]
    krippendorff_alpha: Estimate
    per_cause: tuple[CauseAgreement, ...]
    confusion: Confusion
    per_reviewer: tuple[ReviewerAgreement, ...]
    confidence: float
    resamples: int
    seed: int

    @property
    def by_cause(self) -> dict[str, CauseAgreement]:
        """``per_cause`` by the cause's name."""
        return {cause.category: cause for cause in self.per_cause}


@dataclass(frozen=True, slots=True)
class _Sample:
    """The rows one family of coefficients rests on, grouped into patterns and resampled."""

    rows: IntArray
    patterns: IntArray
    weights: IntArray | None


def measure_agreement(
    units: Sequence[Unit],
    *,
    categories: Sequence[str] = (),
    resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> Agreement:
    """Agreement among the reviewers of ``units``, overall, per cause and per reviewer.

    ``categories``: the taxonomy's causes in display order; causes found in the labels but not
    listed follow in sorted order. ``resamples`` bootstrap replicates (0: no intervals) drawn
    from ``numpy.random.default_rng(seed)``: the same input and seed give the same intervals.
    """
    if resamples < 0:
        raise ValueError(f"resamples must be 0 or more, not {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    table = tabulate(units, categories)
    order, width, counts = table.categories, max(len(table.categories), 1), table.counts
    ratings = counts.sum(axis=1)
    compared = ratings >= 2
    fleiss_ratings = _modal_ratings(ratings[compared])
    fleiss_rows = ratings == fleiss_ratings if fleiss_ratings else np.zeros_like(compared)

    def sample(rows: IntArray) -> _Sample:
        if rows.shape[0] == 0 or resamples == 0:
            return _Sample(rows, rows, None)
        patterns, shares = boot.patterns(rows)
        return _Sample(rows, patterns, boot.draws(shares, rows.shape[0], resamples, seed))

    pairable = sample(counts[compared])
    fleiss_sample = sample(counts[fleiss_rows])
    pairs, cohen_reason = _cohen_pairs(table.matrix)
    cohen_sample = sample(pairs)

    def estimates(position: int | None) -> tuple[Estimate, Estimate, Estimate, Estimate]:
        """Percent agreement, Cohen's and Fleiss' kappa and alpha: overall or for one cause."""
        code, pair_code, kinds, flat = (
            (_same, _same, width, ONE_CATEGORY)
            if position is None
            else (_one_vs_rest(position), _pair_code(position), 2, ONE_SIDE)
        )
        return (
            _estimate(pairable, code, _percent, boot.percent_kernel, confidence, None),
            _cohen_estimate(cohen_sample, cohen_reason, pair_code, kinds, confidence, flat),
            _estimate(fleiss_sample, code, _fleiss, boot.fleiss_kernel, confidence, flat),
            _estimate(pairable, code, _alpha, boot.alpha_kernel, confidence, flat),
        )

    percent, cohen, fleiss, alpha = estimates(None)
    per_cause = [
        CauseAgreement(category, int(counts[:, position].sum()), *estimates(position))
        for position, category in enumerate(order)
    ]
    return Agreement(
        units=len(units),
        compared_units=int(compared.sum()),
        reviewers=table.reviewers,
        reviewers_per_unit=tally(ratings),
        categories=order,
        percent_agreement=percent,
        cohen_kappa=cohen,
        fleiss_kappa=fleiss,
        fleiss_ratings=fleiss_ratings,
        fleiss_units=tuple(units[int(row)].unit_id for row in np.flatnonzero(fleiss_rows)),
        krippendorff_alpha=alpha,
        per_cause=tuple(per_cause),
        confusion=_confusion(order, counts[compared]),
        per_reviewer=_per_reviewer(table, width),
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )


def _modal_ratings(ratings: IntArray) -> int | None:
    """The most common number of labels among compared units (a tie: the larger number)."""
    counted = tally(ratings)
    return max(counted, key=lambda m: (counted[m], m)) if counted else None


def _same(rows: IntArray) -> IntArray:
    return rows


def _one_vs_rest(position: int) -> Callable[[IntArray], IntArray]:
    """Count rows (units by causes) to (this cause, any other): the binary coding of a cause."""

    def code(rows: IntArray) -> IntArray:
        this = rows[:, position]
        return np.stack([this, rows.sum(axis=1) - this], axis=1)

    return code


def _pair_code(position: int) -> Callable[[IntArray], IntArray]:
    """(first, second) label indices to 0 (this cause) or 1 (another)."""

    def code(pairs: IntArray) -> IntArray:
        return np.where(pairs == position, 0, 1).astype(np.int64)

    return code


def _percent(rows: IntArray) -> float:
    m = rows.sum(axis=1)
    return float(((rows * (rows - 1)).sum(axis=1) / (m * (m - 1))).mean())


def warm_up() -> None:
    """Import the statistics libraries the figures use (seconds: statsmodels brings pandas
    and scipy), so that a server's first agreement does not pay for it."""
    import statsmodels.stats.inter_rater  # noqa: F401


def _fleiss(rows: IntArray) -> float:
    # Imported here, not at the top: statsmodels brings pandas and scipy, seconds of start-up
    # that every process of the app would pay, though only the agreement figures need them.
    from statsmodels.stats.inter_rater import fleiss_kappa

    return float(fleiss_kappa(rows, method="fleiss"))


def _alpha(rows: IntArray) -> float:
    return float(krippendorff.alpha(value_counts=rows, level_of_measurement="nominal"))


def _interval(
    sample: _Sample,
    kernel: Callable[[IntArray, IntArray], FloatArray],
    code: Callable[..., IntArray],
    confidence: float,
) -> boot.Interval:
    if sample.weights is None:
        return boot.Interval(None, 0, NO_RESAMPLES)
    return boot.percentile_interval(kernel(code(sample.patterns), sample.weights), confidence)


def _estimate(
    sample: _Sample,
    code: Callable[[IntArray], IntArray],
    point: Callable[[IntArray], float],
    kernel: Callable[[IntArray, IntArray], FloatArray],
    confidence: float,
    flat: str | None,
) -> Estimate:
    """A coefficient on count rows (units by categories); ``flat``: why it is undefined when
    every label falls in one category (``None``: it is defined then, as percent agreement)."""
    units = sample.rows.shape[0]
    if units == 0:
        return Estimate(None, None, 0, NO_UNITS)
    rows = code(sample.rows)
    if flat is not None and int((rows.sum(axis=0) > 0).sum()) < 2:
        return Estimate(None, None, units, flat)
    interval = _interval(sample, kernel, code, confidence)
    return Estimate(point(rows), interval.ci, units, interval.reason, interval.defined)


def _cohen_pairs(matrix: IntArray) -> tuple[IntArray, str | None]:
    """(first reviewer's, second reviewer's) label indices on the units both labelled."""
    if matrix.shape[1] != 2:
        return np.zeros((0, 2), dtype=np.int64), NOT_TWO_REVIEWERS.format(count=matrix.shape[1])
    pairs = matrix[(matrix >= 0).all(axis=1)]
    return pairs, None if pairs.shape[0] else NO_COMMON_UNITS


def _cohen(pairs: IntArray, kinds: int) -> float:
    table = np.zeros((kinds, kinds), dtype=np.float64)
    np.add.at(table, (pairs[:, 0], pairs[:, 1]), 1.0)
    from statsmodels.stats.inter_rater import cohens_kappa  # (see _fleiss)

    return float(cohens_kappa(table, return_results=False))


def _cohen_estimate(
    sample: _Sample,
    reason: str | None,
    code: Callable[[IntArray], IntArray],
    kinds: int,
    confidence: float,
    flat: str,
) -> Estimate:
    """Cohen's kappa on the two reviewers' label pairs (or their one-vs-rest coding)."""
    units = sample.rows.shape[0]
    if reason is not None:
        return Estimate(None, None, units, reason)
    pairs = code(sample.rows)
    if np.unique(pairs).size < 2:
        return Estimate(None, None, units, flat)

    def kernel(patterns: IntArray, weights: IntArray) -> FloatArray:
        return boot.cohen_kernel(patterns, kinds, weights)

    interval = _interval(sample, kernel, code, confidence)
    return Estimate(_cohen(pairs, kinds), interval.ci, units, interval.reason, interval.defined)


def _confusion(order: tuple[str, ...], rows: IntArray) -> Confusion:
    """Pairs of labels per pair of causes: ``C^T C`` off the diagonal, ``C(c, 2)`` on it."""
    cells = rows.T @ rows
    np.fill_diagonal(cells, (rows * (rows - 1) // 2).sum(axis=0))
    cells = cells[: len(order), : len(order)]
    pairs = int(np.triu(cells).sum())
    return Confusion(order, tuple(tuple(int(c) for c in row) for row in cells), pairs)


def _per_reviewer(table: LabelTable, width: int) -> tuple[ReviewerAgreement, ...]:
    """Each reviewer's labels against the final labels of the units they labelled."""
    answers = []
    for column, reviewer in enumerate(table.reviewers):
        own = table.matrix[:, column]
        labelled = int((own >= 0).sum())
        against = (own >= 0) & (table.finals >= 0)
        pairs = np.stack([own[against], table.finals[against]], axis=1)
        compared, equal = pairs.shape[0], int((pairs[:, 0] == pairs[:, 1]).sum())
        if compared == 0:
            answers.append(ReviewerAgreement(reviewer, labelled, 0, 0, None, None, NO_FINAL_LABELS))
            continue
        share = equal / compared
        if np.unique(pairs).size < 2:
            answers.append(
                ReviewerAgreement(reviewer, labelled, compared, equal, share, None, ONE_CATEGORY)
            )
        else:
            kappa = _cohen(pairs, width)
            answers.append(ReviewerAgreement(reviewer, labelled, compared, equal, share, kappa))
    return tuple(answers)
