"""Bootstrap confidence intervals for the agreement statistics, computed from unit patterns.

A bootstrap replicate draws as many units as the statistic rests on, with replacement. Every
statistic here is a function of per-unit sums, and two units with the same count vector (how
many of its labels fall in each category) contribute the same terms. So the units are grouped
into **patterns** (their distinct count vectors, or for Cohen's kappa their distinct ordered
label pairs) and a replicate is a vector of how often each pattern was drawn: one draw from
the multinomial distribution over the patterns, with their shares as probabilities, which is
the same distribution as drawing units one by one. A thousand replicates over 100,000 units
are then a (1000 by patterns) matrix product, not a thousand library calls.

The kernels below are the statistics' closed forms over such weights; the tests check them
against the libraries and against the textbook formulas on explicitly resampled tables.

* percent agreement: ``mean_u P_u`` with ``P_u = sum_v c_uv (c_uv - 1) / (m_u (m_u - 1))``;
* Krippendorff's alpha (nominal): ``1 - (n - 1) (n - sum_u a_u) / (n^2 - sum_v n_v^2)`` with
  ``n = sum_u m_u``, ``n_v = sum_u c_uv``, ``a_u = sum_v c_uv (c_uv - 1) / (m_u - 1)`` (the
  diagonal of the coincidence matrix);
* Fleiss' kappa (every unit with ``r`` ratings): ``(P - P_e) / (1 - P_e)``, ``P`` the mean of
  ``P_u``, ``P_e = sum_v p_v^2``, ``p_v = n_v / (N r)``;
* Cohen's kappa: ``(p_o - p_e) / (1 - p_e)`` over the ordered pairs (first reviewer, second).

A replicate where a statistic is undefined (its labels all fall in one category) is left out;
when that leaves fewer than half of the replicates, there is no interval (its ``reason`` says
so), because an interval over the few defined replicates would overstate what is known.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Fewer defined replicates than this share: no interval.
MIN_DEFINED_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class Interval:
    """A percentile interval, or why there is none; ``defined`` replicates it rests on."""

    ci: tuple[float, float] | None
    defined: int
    reason: str | None = None


def patterns(rows: IntArray) -> tuple[IntArray, FloatArray]:
    """The distinct rows (lexicographic order, so draws are reproducible) and their shares."""
    radix = int(rows.max(initial=0)) + 1
    if float(radix) ** rows.shape[1] < 2.0**62:
        # Each row as one integer in base ``radix`` (the same order): sorting integers is far
        # faster than numpy's row-wise unique.
        powers = radix ** np.arange(rows.shape[1] - 1, -1, -1, dtype=np.int64)
        _, first, counts = np.unique(rows @ powers, return_index=True, return_counts=True)
        distinct = rows[first]
    else:
        distinct, counts = np.unique(rows, axis=0, return_counts=True)
    return distinct.astype(np.int64), counts / counts.sum()


def draws(shares: FloatArray, units: int, resamples: int, seed: int) -> IntArray:
    """``resamples`` bootstrap replicates of ``units`` units: how often each pattern is drawn.

    A fresh generator from ``seed`` for every call: the same units and seed give the same
    replicates whatever else was computed before.
    """
    generator = np.random.default_rng(seed)
    return generator.multinomial(units, shares, size=resamples).astype(np.int64)


def percentile_interval(values: FloatArray, confidence: float) -> Interval:
    """The percentile interval of the defined (not NaN) replicate values."""
    defined = values[~np.isnan(values)]
    if defined.size == 0 or defined.size < MIN_DEFINED_SHARE * values.size:
        return Interval(
            None,
            int(defined.size),
            f"undefined in {values.size - defined.size} of {values.size} resamples",
        )
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(defined, [tail, 1.0 - tail])
    return Interval((float(low), float(high)), int(defined.size))


def _pair_agreement(counts: IntArray) -> FloatArray:
    """Per pattern: the share of its pairs of labels that agree (``P_u``); 0 for m < 2."""
    m = counts.sum(axis=1)
    agreeing = (counts * (counts - 1)).sum(axis=1).astype(np.float64)
    pairs = (m * (m - 1)).astype(np.float64)
    share: FloatArray = np.divide(agreeing, pairs, out=np.zeros_like(agreeing), where=pairs > 0)
    return share


def _one_category(totals: IntArray) -> npt.NDArray[np.bool_]:
    """Per replicate: every label falls in a single category (chance agreement is 1)."""
    return np.asarray((totals > 0).sum(axis=1) < 2)


def percent_kernel(counts: IntArray, weights: IntArray) -> FloatArray:
    """Percent agreement (mean of ``P_u``) for each row of ``weights`` over the patterns."""
    drawn = weights.sum(axis=1).astype(np.float64)
    return np.asarray(weights @ _pair_agreement(counts) / drawn, dtype=np.float64)


def alpha_kernel(counts: IntArray, weights: IntArray) -> FloatArray:
    """Krippendorff's nominal alpha for each row of ``weights``; NaN where undefined."""
    m = counts.sum(axis=1)
    diagonal = (counts * (counts - 1)).sum(axis=1).astype(np.float64)
    per_unit = np.divide(diagonal, m - 1, out=np.zeros_like(diagonal), where=m > 1)
    pairable = np.where(m > 1, m, 0)
    n = (weights @ pairable).astype(np.float64)
    n_v = weights @ (counts * (m > 1)[:, None])
    expected = n * n - (n_v.astype(np.float64) ** 2).sum(axis=1)
    observed = n - weights @ per_unit
    with np.errstate(divide="ignore", invalid="ignore"):
        value = 1.0 - (n - 1.0) * observed / expected
    return np.asarray(np.where(_one_category(n_v), np.nan, value), dtype=np.float64)


def fleiss_kernel(counts: IntArray, weights: IntArray) -> FloatArray:
    """Fleiss' kappa for each row of ``weights`` (every pattern has the same ``m``)."""
    units = weights.sum(axis=1).astype(np.float64)
    ratings = float(counts.sum(axis=1)[0])
    mean_agreement = weights @ _pair_agreement(counts) / units
    n_v = weights @ counts
    shares = n_v / (units * ratings)[:, None]
    chance = (shares**2).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (mean_agreement - chance) / (1.0 - chance)
    return np.asarray(np.where(_one_category(n_v), np.nan, value), dtype=np.float64)


def cohen_kernel(pairs: IntArray, categories: int, weights: IntArray) -> FloatArray:
    """Cohen's kappa for each row of ``weights`` over patterns of (first, second) labels."""
    units = weights.sum(axis=1).astype(np.float64)
    first = np.eye(categories, dtype=np.int64)[pairs[:, 0]]
    second = np.eye(categories, dtype=np.int64)[pairs[:, 1]]
    observed = weights @ (pairs[:, 0] == pairs[:, 1]).astype(np.float64) / units
    rows = weights @ first
    cols = weights @ second
    chance = (rows * cols).sum(axis=1) / (units * units)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (observed - chance) / (1.0 - chance)
    return np.asarray(np.where(_one_category(rows + cols), np.nan, value), dtype=np.float64)
