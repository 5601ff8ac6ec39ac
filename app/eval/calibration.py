"""The calibration of a near-duplicate detector from a reviewed sample (DESIGN.md, Duplicates).

The verified candidate pairs of a detection (``app.eval.dedup``) fall into similarity
**bands** of width ``BAND_WIDTH`` from the lowest similarity kept up to 1, exact copies
(similarity 1 after normalisation) in a band of their own. A stratified sample of each band
(``sample``: at most ``per_band`` pairs, chosen by a keyed hash, so the same detection always
samples the same pairs) goes to reviewers, who say whether the two texts are the same content.

Per band the table gives the pairs found, sampled and reviewed, and the share judged the
same with its Wilson 95% interval. What a count means, with groups of identical documents
(same shingle set: ``app.eval.dedup`` groups them before pairing):

* ``pairs``: the stored pairs in the band: a pair of two groups (named by their smallest ids)
  is one pair whatever their sizes; in the 1.00 band, one pair per copy, to its group's
  smallest id (n - 1 for n copies, never their n(n - 1)/2). The sample is drawn from these,
  and precision and recall weight the bands by them.
* ``documents`` and ``groups`` (``band_documents``): the documents the band's pairs join,
  every member of a group counted, and the groups they make: a group of n copies is n
  documents and one group in the 1.00 band.
* the candidate search's recall (``candidate``, per band and overall) is counted in pairs of
  documents: a pair of groups counts |A| x |B|, and the n(n - 1)/2 pairs within a group are
  in the 1.00 band, found by construction.

Without copies every pair is two groups of one document, and every count is what it was.
Wilson intervals come from ``wilson_at``, written here: importing statsmodels for it took 3 s
of every process's start; tests/eval/test_calibration.py holds it to statsmodels'.

At a threshold t (a band's lower edge), the clusters are the connected components of the
pairs with similarity >= t. Their pair **precision** is estimated by stratification: the
bands at or above t weighted by their pairs found, ``sum(N_b * p_b) / sum(N_b)``. Its interval
is Wilson's at that estimate with Kish's effective sample size ``1 / sum(W_b^2 / n_b)``
(``W_b = N_b / N``, ``n_b`` reviewed); while a band with pairs has no review, the value is not
estimated and the interval is the bands' Wilson bounds summed (every band at its bound at
once, the unreviewed ones at 0 and 1). **Recall** is of the pairs people would judge the same
among those at similarity >= the lowest band: the estimated same pairs at or above t over
those in every band, times the candidate search's recall against the exact similarity
(``candidate``);
same pairs below the lowest band are outside what the detector kept and are not counted.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: The width of a similarity band.
BAND_WIDTH = 0.05
#: Reviewed pairs per band in the sample, unless asked otherwise.
PER_BAND = 20
#: How many decimals band edges are rounded to (0.6 + 4 * 0.05 is 0.8, not 0.80000001).
_EDGE_DECIMALS = 6


@dataclass(frozen=True, slots=True)
class Band:
    """Similarities in [low, high); the last band, [1, 1], holds the exact copies."""

    index: int
    low: float
    high: float

    def label(self) -> str:
        return "1.00" if self.low >= 1.0 else f"{self.low:.2f}\u2013{self.high:.2f}"


def bands(low: float) -> list[Band]:
    """The bands from ``low`` (rounded down to a multiple of ``BAND_WIDTH``) up to 1."""
    if not 0.0 < low <= 1.0:
        raise ValueError("the lowest similarity must be in (0, 1]")
    start = math.floor(round(low / BAND_WIDTH, _EDGE_DECIMALS)) * BAND_WIDTH
    edges: list[float] = []
    edge = start
    while edge < 1.0 - 1e-9:
        edges.append(round(edge, _EDGE_DECIMALS))
        edge += BAND_WIDTH
    out = [Band(i, e, round(min(e + BAND_WIDTH, 1.0), _EDGE_DECIMALS)) for i, e in enumerate(edges)]
    out.append(Band(len(out), 1.0, 1.0))
    return out


def band_of(similarity: float, table: Sequence[Band]) -> int:
    """The index of the band ``similarity`` falls in (below the first: the first)."""
    if similarity >= 1.0:
        return table[-1].index
    for band in reversed(table[:-1]):
        if similarity >= band.low - 1e-12:
            return band.index
    return table[0].index


def _key(seed: int, a: str, b: str) -> bytes:
    return hashlib.blake2b(f"{seed}\x1f{a}\x1f{b}".encode(), digest_size=8).digest()


def sample(
    pairs: Iterable[tuple[str, str, int]], *, per_band: int = PER_BAND, seed: int = 1
) -> dict[tuple[str, str], int]:
    """The stratified sample: (doc_a, doc_b, band) -> the sampled pairs with their queue
    position. Each band's pairs are ordered by a keyed hash and the first ``per_band`` taken;
    the queue interleaves the bands (one of each, highest band first, then the next of each),
    so a partly reviewed sample already spans the bands."""
    by_band: dict[int, list[tuple[bytes, str, str]]] = {}
    for a, b, band in pairs:
        by_band.setdefault(band, []).append((_key(seed, a, b), a, b))
    chosen: dict[int, list[tuple[str, str]]] = {
        band: [(a, b) for _, a, b in sorted(items)[:per_band]] for band, items in by_band.items()
    }
    positions: dict[tuple[str, str], int] = {}
    order = sorted(chosen, reverse=True)
    depth = max((len(v) for v in chosen.values()), default=0)
    for i in range(depth):
        for band in order:
            if i < len(chosen[band]):
                positions[chosen[band][i]] = len(positions) + 1
    return positions


@dataclass(frozen=True, slots=True)
class Share:
    """A proportion with its Wilson 95% interval (None without observations)."""

    value: float | None
    low: float
    high: float

    def as_json(self) -> dict[str, object]:
        return {
            "value": None if self.value is None else round(self.value, 4),
            "ci": [round(self.low, 4), round(self.high, 4)],
        }


def wilson(successes: int, trials: int) -> Share:
    """The share ``successes / trials`` with its Wilson 95% interval; [0, 1] for no trials."""
    if trials <= 0:
        return Share(None, 0.0, 1.0)
    lo, hi = wilson_at(successes / trials, trials)
    return Share(successes / trials, lo, hi)


_Z = 1.959963984540054  # the normal quantile of a two-sided 95% interval


def wilson_at(p: float, n: float) -> tuple[float, float]:
    """The Wilson 95% interval of a proportion ``p`` observed on ``n`` (possibly an effective,
    non-integer, sample size)."""
    z2 = _Z * _Z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True, slots=True)
class BandRow:
    band: Band
    pairs: int
    sampled: int
    reviewed: int
    same: int
    #: the candidate search's recall in this band (None: not measured)
    candidate_recall: float | None = None

    @property
    def share(self) -> Share:
        return wilson(self.same, self.reviewed)


@dataclass(frozen=True, slots=True)
class Estimate:
    """An estimated proportion at a threshold; ``value`` None when a band it needs has pairs
    and no review (``missing`` says which)."""

    value: float | None
    low: float
    high: float
    reviewed: int
    how: str
    missing: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {
            "value": None if self.value is None else round(self.value, 4),
            "ci": [round(self.low, 4), round(self.high, 4)],
            "reviewed": self.reviewed,
            "how": self.how,
            "unreviewed_bands": list(self.missing),
        }


PRECISION_HOW = (
    "pairs at or above the threshold judged the same, per band weighted by the pairs found "
    "(interval: Wilson at the estimate with the sample's effective size; until every band "
    "has a review, the bands' Wilson bounds, a band without reviews counting 0 to 1)"
)
RECALL_HOW = (
    "of the pairs judged the same at similarity {low:.2f} or more, the share at or above the "
    "threshold, times the candidate search's recall ({candidate})"
)


def precision_at(rows: Sequence[BandRow], threshold: float) -> Estimate:
    """The clusters' pair precision at ``threshold`` (see the module docstring)."""
    above = [r for r in rows if r.band.low >= threshold - 1e-9 and r.pairs]
    total = sum(r.pairs for r in above)
    reviewed = sum(r.reviewed for r in above)
    missing = tuple(r.band.label() for r in above if not r.reviewed)
    if not total:
        return Estimate(None, 0.0, 1.0, 0, "no pair at or above the threshold", ())
    lo = sum(r.pairs * r.share.low for r in above) / total
    hi = sum(r.pairs * r.share.high for r in above) / total
    value = None
    if not missing:
        value = sum(r.pairs * (r.same / r.reviewed) for r in above) / total
        # Kish's effective sample size of the stratified estimate: the Wilson interval at
        # the estimate with that many observations (the bands' bounds summed are far wider)
        n_eff = 1.0 / sum((r.pairs / total) ** 2 / r.reviewed for r in above)
        lo, hi = wilson_at(value, n_eff)
    return Estimate(value, lo, hi, reviewed, PRECISION_HOW, missing)


def recall_at(rows: Sequence[BandRow], threshold: float, candidate: Share | None) -> Estimate:
    """The clusters' pair recall at ``threshold`` (see the module docstring)."""
    with_pairs = [r for r in rows if r.pairs]
    above = [r for r in with_pairs if r.band.low >= threshold - 1e-9]
    below = [r for r in with_pairs if r.band.low < threshold - 1e-9]
    missing = tuple(r.band.label() for r in with_pairs if not r.reviewed)
    reviewed = sum(r.reviewed for r in with_pairs)
    c_value = 1.0 if candidate is None or candidate.value is None else candidate.value
    c_low = 1.0 if candidate is None else candidate.low
    c_high = 1.0 if candidate is None else candidate.high
    shown = "not measured" if candidate is None else f"{c_value:.3f}"
    how = RECALL_HOW.format(low=rows[0].band.low if rows else 0.0, candidate=shown)

    def same(rs: Sequence[BandRow], bound: str) -> float:
        return float(sum(r.pairs * getattr(r.share, bound) for r in rs))

    up_lo, up_hi = same(above, "low"), same(above, "high")
    down_lo, down_hi = same(below, "low"), same(below, "high")
    lo = c_low * (up_lo / (up_lo + down_hi) if up_lo + down_hi else 0.0)
    hi = c_high * (up_hi / (up_hi + down_lo) if up_hi + down_lo else 1.0)
    value = None
    if not missing:
        est_up = sum(r.pairs * r.same / r.reviewed for r in above)
        est_all = est_up + sum(r.pairs * r.same / r.reviewed for r in below)
        value = c_value * (est_up / est_all) if est_all else None
    return Estimate(value, lo, min(hi, 1.0), reviewed, how, missing)


def candidate_recall(found: set[tuple[str, str]], exact: Iterable[tuple[str, str]]) -> Share:
    """The share of the ``exact`` pairs the candidate search ``found`` (Wilson interval: exact
    when every pair of the corpus was compared, a sample's estimate otherwise)."""
    pairs = list(exact)
    hits = sum(1 for p in pairs if p in found)
    return wilson(hits, len(pairs))


def band_documents(
    pairs: Iterable[tuple[str, str, float]], table: Sequence[Band]
) -> list[tuple[int, int]]:
    """Per band of ``table`` (by index): (documents, groups) its pairs join. A group is a set
    of identical documents (shingle sets equal: the pairs of similarity 1 link them, one link
    per copy as ``detect`` keeps them, or every pair of them as detections before kept them);
    a document with no copy is a group of one. A band's groups are those its pairs touch, its
    documents every member of those groups: the 1.00 band holds each group of copies once,
    whatever its size, and a pair of two groups stands for all their members."""
    pairs = list(pairs)
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, similarity in pairs:
        if similarity >= 1.0:
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    size: dict[str, int] = {}
    for doc in list(parent):
        r = root(doc)
        size[r] = size.get(r, 0) + 1
    touched: dict[int, set[str]] = {b.index: set() for b in table}
    for a, b, similarity in pairs:
        band = band_of(similarity, table)
        touched[band].add(root(a))
        touched[band].add(root(b))
    return [(sum(size.get(r, 1) for r in touched[b.index]), len(touched[b.index])) for b in table]
