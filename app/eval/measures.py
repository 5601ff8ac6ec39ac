"""Measures: canonical names and pure per-query kernels.

A query's evaluation input is the list of its relevant documents as (grade, rank) pairs, rank
1-based or None when the run did not return the document. That alone gives every measure at every
cutoff (DESIGN.md: "the rank of every judged document ... gives recall and nDCG at every cutoff").
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from app.eval.conventions import Gain


class MeasureKind(StrEnum):
    RECALL = "R"
    NDCG = "nDCG"
    #: nDCG on the candidate set: the ideal is built from the judged documents inside the run's
    #: top ``depth`` (the reranker's view, used by the diagnosis). Not a trec_eval measure.
    NDCG_CANDIDATE = "nDCG_cand"


_NAME = re.compile(r"^(R|nDCG|nDCG_cand)@([1-9]\d*)$")


@dataclass(frozen=True, slots=True, order=True)
class Measure:
    """A measure at a cutoff; ``str(m)`` is its canonical name (``R@50``, ``nDCG@10``)."""

    kind: MeasureKind
    cutoff: int

    def __str__(self) -> str:
        return f"{self.kind.value}@{self.cutoff}"


def parse_measure(name: str) -> Measure:
    """Parse a canonical measure name; the inverse of ``str(measure)``."""
    match = _NAME.match(name.strip())
    if not match:
        raise ValueError(
            f"unknown measure {name!r}: expected R@k, nDCG@k or nDCG_cand@k with k >= 1"
        )
    return Measure(MeasureKind(match.group(1)), int(match.group(2)))


Judged = Sequence[tuple[int, int | None]]
"""A query's relevant documents as (grade, rank or None)."""


def gain_value(grade: int, gain: Gain) -> float:
    """The gain of a document: ``2**grade - 1`` (exp) or ``grade`` (linear); 0 for grade <= 0."""
    if grade <= 0:
        return 0.0
    return float(2**grade - 1) if gain is Gain.EXP else float(grade)


def recall_at(relevant: Judged, k: int) -> float:
    """R@k = |{d relevant : rank(d) <= k}| / |{d relevant}|.

    Undefined for a query without relevant documents: such queries are not averaged, so a
    call with none is a programming error.
    """
    _check_cutoff(k)
    if not relevant:
        raise ValueError("recall is undefined for a query without relevant documents")
    hits = sum(1 for _, rank in relevant if rank is not None and rank <= k)
    return hits / len(relevant)


def dcg_at(relevant: Judged, k: int, gain: Gain) -> float:
    """DCG@k = sum over relevant d with rank(d) <= k of gain(grade(d)) / log2(rank(d) + 1).

    Documents that are unjudged or not relevant contribute 0; terms are summed in rank order,
    as trec_eval does.
    """
    _check_cutoff(k)
    terms = sorted(
        (rank, gain_value(grade, gain))
        for grade, rank in relevant
        if rank is not None and rank <= k
    )
    return sum(g / math.log2(rank + 1) for rank, g in terms)


def ideal_dcg_at(grades: Iterable[int], k: int, gain: Gain) -> float:
    """IDCG@k = sum over i = 1..k of the i-th highest gain / log2(i + 1)."""
    _check_cutoff(k)
    return _ideal_dcg(tuple(grades), k, gain)


@lru_cache(maxsize=4096)
def _ideal_dcg(grades: tuple[int, ...], k: int, gain: Gain) -> float:
    """``ideal_dcg_at``, kept for the grades that come back: most queries of a golden set
    share their grades (MS MARCO's: one document of grade 1), and a run's evaluation asks
    for each query's ideal twice."""
    gains = sorted((gain_value(g, gain) for g in grades), reverse=True)[:k]
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ndcg_at(relevant: Judged, k: int, gain: Gain) -> float:
    """nDCG@k = DCG@k / IDCG@k with the strict ideal: the k highest judged grades of the
    query, retrieved or not (trec_eval ``ndcg_cut``)."""
    ideal = ideal_dcg_at((grade for grade, _ in relevant), k, gain)
    if ideal == 0.0:
        raise ValueError("nDCG is undefined for a query without relevant documents")
    return dcg_at(relevant, k, gain) / ideal


def candidate_ndcg_at(relevant: Judged, k: int, gain: Gain, *, depth: int) -> float | None:
    """nDCG@k on the candidate set: the reranker's view of a two-stage system.

    With C = {d relevant : rank(d) <= depth} (the judged documents inside the run's top
    ``depth``, the candidates a reranker sees):

        nDCG_cand@k = DCG@k / IDCG_cand@k
        DCG@k       = sum over d in C with rank(d) <= k of gain(grade(d)) / log2(rank(d) + 1)
        IDCG_cand@k = sum over i = 1..min(k, |C|) of the i-th highest gain in C / log2(i + 1)

    The numerator is the usual DCG@k (k <= depth, so the top k are candidates); only the
    ideal differs from the strict nDCG@k: a relevant document the first stage ranked below
    ``depth`` (or never returned) is out of the ideal, because no reranker could lift it.
    So nDCG_cand@k >= nDCG@k, equal when every relevant document is inside the top ``depth``;
    1.0 means the run ordered its own candidates perfectly. None when C is empty (no relevant
    candidate: nothing to order); such queries are left out of the mean and counted.
    """
    _check_cutoff(depth)
    candidates = [(grade, rank) for grade, rank in relevant if rank is not None and rank <= depth]
    ideal = ideal_dcg_at((grade for grade, _ in candidates), k, gain)
    if ideal == 0.0:
        return None
    return dcg_at(candidates, k, gain) / ideal


def _check_cutoff(k: int) -> None:
    if k.__class__ is int and k >= 1:
        return  # the usual case, checked first: called for every query and measure
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"cutoff must be a positive integer, got {k!r}")
