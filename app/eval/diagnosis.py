"""Per-query diagnosis: ranking vs candidate generation vs ingestion (DESIGN.md, "Why")."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache


class Diagnosis(StrEnum):
    #: every relevant document is in the candidates but they are ordered badly:
    #: reranker or fusion weights.
    RANKING = "ranking"
    #: relevant documents are missing from the candidates while the top is good:
    #: analyzer, chunking, query expansion, dense retriever.
    CANDIDATE_GENERATION = "candidate_generation"
    #: both low: check first that the documents are in the index at all.
    INGESTION = "ingestion"
    #: both high: nothing to do for this query.
    FINE = "fine"


DIAGNOSIS_MEANING: dict[Diagnosis, str] = {
    Diagnosis.RANKING: "ranking problem: the candidates hold the answers; tune the reranker "
    "or fusion weights",
    Diagnosis.CANDIDATE_GENERATION: "candidate-generation problem: answers miss the candidate "
    "window; look at the analyzer, chunking, query expansion or the dense retriever",
    Diagnosis.INGESTION: "ingestion problem: the missing documents are not in the index (with "
    "an index manifest or corpus that is evidence; without one, a guess from low recall and low "
    "nDCG_cand: check that the documents are in the index first)",
    Diagnosis.FINE: "fine: high recall at depth and high nDCG on the candidates",
}


DEFAULT_RECALL_THRESHOLD = 0.8
DEFAULT_NDCG_THRESHOLD = 0.5


@dataclass(frozen=True, slots=True)
class Thresholds:
    """What counts as high. Defaults: recall@depth >= 0.8 (at least four in five relevant
    documents reach the candidates) and nDCG_cand@k >= 0.5 (for a single relevant candidate:
    it is in the top 3)."""

    recall: float = DEFAULT_RECALL_THRESHOLD
    ndcg: float = DEFAULT_NDCG_THRESHOLD

    def __post_init__(self) -> None:
        for name, value in (("recall", self.recall), ("ndcg", self.ndcg)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} threshold must be within [0, 1], got {value}")


@dataclass(frozen=True, slots=True)
class MissEvidence:
    """Where a query's misses at depth lie, from an index manifest or corpus: ``misses``
    relevant documents outside the top depth, ``not_indexed`` of them outside the index."""

    misses: int
    not_indexed: int


@dataclass(frozen=True, slots=True)
class Verdict:
    """A query's diagnosis and the rule that gave it, on the query's numbers."""

    diagnosis: Diagnosis
    reason: str


def _num(value: float) -> str:
    return f"{value:.2f}"


@lru_cache(maxsize=4096)
def diagnose(
    recall_at_depth: float,
    ndcg_cand_at_k: float | None,
    thresholds: Thresholds,
    *,
    k: int,
    depth: int,
    evidence: MissEvidence | None = None,
) -> Verdict:
    """Classify one query by the method's quadrant (DESIGN.md, "Why").

    High R@depth and high nDCG_cand@k: fine. High R@depth, low nDCG_cand@k: ranking. Low
    R@depth: with ``evidence`` (an index manifest or corpus says where the misses lie),
    ingestion when every miss is outside the index, else candidate generation (a miss inside
    the index was there to be found); without evidence, candidate generation when
    nDCG_cand@k is high and ingestion (a guess, said so) when it is low too. nDCG_cand@k is
    None when no relevant document is inside the top depth: that counts as low.

    Kept for the numbers that come back (a run's queries share a few recalls and nDCGs:
    0, 0.5, 1): the verdicts are immutable.
    """
    high_recall = recall_at_depth >= thresholds.recall
    high_ndcg = ndcg_cand_at_k is not None and ndcg_cand_at_k >= thresholds.ndcg
    recall_part = (
        f"R@{depth} {_num(recall_at_depth)} {'≥' if high_recall else '<'} {thresholds.recall}"
    )
    if ndcg_cand_at_k is None:
        ndcg_part = f"nDCG_cand@{k} undefined (no relevant document in the top {depth})"
    else:
        ndcg_part = (
            f"nDCG_cand@{k} {_num(ndcg_cand_at_k)} {'≥' if high_ndcg else '<'} {thresholds.ndcg}"
        )
    numbers = f"{recall_part} and {ndcg_part}"
    if high_recall:
        return Verdict(Diagnosis.FINE if high_ndcg else Diagnosis.RANKING, numbers)
    if evidence is not None:
        inside = evidence.misses - evidence.not_indexed
        # "1 of 1 miss", "2 of 3 misses": the noun agrees with the whole
        misses = "miss" if evidence.misses == 1 else "misses"
        if inside == 0:
            where = f"{evidence.not_indexed} of {evidence.misses} {misses} not in the index"
            return Verdict(Diagnosis.INGESTION, f"{numbers}; {where}")
        where = f"{inside} of {evidence.misses} {misses} in the index"
        return Verdict(Diagnosis.CANDIDATE_GENERATION, f"{numbers}; {where}")
    if high_ndcg:
        return Verdict(Diagnosis.CANDIDATE_GENERATION, numbers)
    return Verdict(
        Diagnosis.INGESTION,
        f"{numbers}; a guess: no index manifest or corpus says whether the misses are indexed",
    )
