"""Per-query diagnosis: ranking vs candidate generation vs ingestion (DESIGN.md, "Why")."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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
    Diagnosis.INGESTION: "ingestion problem: little is found at any depth; check that the "
    "documents are in the index first",
    Diagnosis.FINE: "fine: high recall at depth and high nDCG",
}


DEFAULT_RECALL_THRESHOLD = 0.8
DEFAULT_NDCG_THRESHOLD = 0.5


@dataclass(frozen=True, slots=True)
class Thresholds:
    """What counts as high. Defaults: recall@depth >= 0.8 (at least four in five relevant
    documents reach the candidates) and nDCG@k >= 0.5 (for a single relevant document: it is
    in the top 3)."""

    recall: float = DEFAULT_RECALL_THRESHOLD
    ndcg: float = DEFAULT_NDCG_THRESHOLD

    def __post_init__(self) -> None:
        for name, value in (("recall", self.recall), ("ndcg", self.ndcg)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} threshold must be within [0, 1], got {value}")


def diagnose(recall_at_depth: float, ndcg_at_k: float, thresholds: Thresholds) -> Diagnosis:
    """Classify one query from its recall at the candidate depth and its nDCG@k."""
    high_recall = recall_at_depth >= thresholds.recall
    high_ndcg = ndcg_at_k >= thresholds.ndcg
    if high_recall and high_ndcg:
        return Diagnosis.FINE
    if high_recall:
        return Diagnosis.RANKING
    if high_ndcg:
        return Diagnosis.CANDIDATE_GENERATION
    return Diagnosis.INGESTION
