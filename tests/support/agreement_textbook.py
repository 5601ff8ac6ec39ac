"""The second implementation of the agreement statistics: the textbook formulas in plain Python.

Exact rational arithmetic (``fractions.Fraction``), lists of labels in: Cohen (1960), Fleiss
(1971) and Krippendorff's coincidence-matrix alpha (Krippendorff 2011, "Computing
Krippendorff's Alpha-Reliability", section C). app/eval/agreement.py computes with the
libraries (statsmodels, krippendorff) and its bootstrap with its own closed forms; the tests
hold both to these, to 1e-9. ``None``: the coefficient is 0/0 (every label the same).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from fractions import Fraction
from itertools import combinations


def cohen(pairs: Sequence[tuple[str, str]]) -> Fraction | None:
    """Cohen (1960): kappa = (p_o - p_e) / (1 - p_e), p_e from each rater's own marginals."""
    n = len(pairs)
    causes = {label for pair in pairs for label in pair}
    observed = Fraction(sum(a == b for a, b in pairs), n)
    chance = sum(
        Fraction(sum(a == c for a, _ in pairs), n) * Fraction(sum(b == c for _, b in pairs), n)
        for c in causes
    )
    return None if chance == 1 else (observed - chance) / (1 - chance)


def fleiss(units: Sequence[Sequence[str]]) -> Fraction | None:
    """Fleiss (1971): kappa = (P - P_e) / (1 - P_e), N subjects with n ratings each."""
    big_n, n = len(units), len(units[0])
    causes = sorted({label for labels in units for label in labels})
    n_ij = [[labels.count(c) for c in causes] for labels in units]
    p_j = [Fraction(sum(row[j] for row in n_ij), big_n * n) for j in range(len(causes))]
    p_i = [Fraction(sum(x * x for x in row) - n, n * (n - 1)) for row in n_ij]
    mean, chance = sum(p_i) / big_n, sum(p * p for p in p_j)
    return None if chance == 1 else (mean - chance) / (1 - chance)


def alpha(units: Sequence[Sequence[str]]) -> Fraction | None:
    """Krippendorff: the coincidence matrix o_ck (each ordered pair of values within a unit
    weighs 1/(m_u - 1)), n_c its margins; alpha = 1 - (n - 1) sum_{c!=k} o_ck /
    sum_{c!=k} n_c n_k (nominal distance: 0 on the diagonal, 1 elsewhere)."""
    o: defaultdict[tuple[str, str], Fraction] = defaultdict(Fraction)
    for labels in units:
        for i, j in ((i, j) for i in range(len(labels)) for j in range(len(labels)) if i != j):
            o[labels[i], labels[j]] += Fraction(1, len(labels) - 1)
    causes = sorted({c for pair in o for c in pair})
    n_c = {c: sum((o[c, k] for k in causes), Fraction(0)) for c in causes}
    n = sum(n_c.values(), Fraction(0))
    expected = sum(n_c[c] * n_c[k] for c in causes for k in causes if c != k)
    if expected == 0:
        return None
    return 1 - (n - 1) * sum(o[c, k] for c in causes for k in causes if c != k) / expected


def percent(units: Sequence[Sequence[str]]) -> Fraction:
    """The mean over units of the share of agreeing pairs of labels."""
    shares = [
        Fraction(
            sum(a == b for a, b in combinations(labels, 2)), len(labels) * (len(labels) - 1) // 2
        )
        for labels in units
    ]
    return sum(shares, Fraction(0)) / len(shares)


def confusion(units: Sequence[Sequence[str]]) -> Counter[tuple[str, str]]:
    """Each pair of labels on a unit once: (a, a), or both (a, b) and (b, a)."""
    cells: Counter[tuple[str, str]] = Counter()
    for labels in units:
        for a, b in combinations(labels, 2):
            cells[a, b] += 1
            if a != b:
                cells[b, a] += 1
    return cells


def one_vs_rest(units: Sequence[Sequence[str]], cause: str) -> list[list[str]]:
    """The binary coding of one cause: "yes" for it, "no" for any other."""
    return [["yes" if label == cause else "no" for label in labels] for labels in units]
