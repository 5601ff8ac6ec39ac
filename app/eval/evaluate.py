"""Evaluate a ranked run against a golden set: per query, macro and micro, depth curve."""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Set
from dataclasses import dataclass
from statistics import fmean

import polars as pl

from app.eval.conventions import DEFAULT_DEPTHS, Conventions, Gain
from app.eval.diagnosis import Diagnosis, MissEvidence, Thresholds, diagnose
from app.eval.golden import Judgments
from app.eval.measures import Judged, candidate_ndcg_at, ndcg_at
from app.eval.ranking import RankedRun, RunReport


@dataclass(frozen=True, slots=True)
class QueryEvaluation:
    """One golden query under one run."""

    qid: str
    text: str | None
    relevant: int
    retrieved: int
    recall_k: float
    recall_depth: float
    ndcg_k: float
    ndcg_cand_k: float | None
    misses: int
    diagnosis: Diagnosis
    #: Which rule of the quadrant fired, on which numbers (``diagnose``).
    reason: str

    @property
    def absent(self) -> bool:
        """The run returned nothing for this query."""
        return self.retrieved == 0


@dataclass(frozen=True)
class RunEvaluation:
    """A run's numbers at (k, depth), with the conventions and the import report."""

    name: str
    k: int
    depth: int
    conventions: Conventions
    thresholds: Thresholds
    #: The diagnosis had an index manifest or corpus to say where the misses lie.
    index_evidence: bool
    queries: list[QueryEvaluation]
    measures: dict[str, float]
    micro: dict[str, float]
    depth_curve: dict[int, float]
    micro_depth_curve: dict[int, float]
    misses: int
    relevant: int
    report: RunReport
    #: Queries without a relevant document inside the top depth: nDCG_cand@k is undefined
    #: for them and they are left out of its mean.
    no_candidate: int = 0

    @property
    def diagnosis_counts(self) -> dict[str, int]:
        counts = Counter(q.diagnosis for q in self.queries)
        return {d.value: counts.get(d, 0) for d in Diagnosis}


def relevant_ranks(golden: Judgments, ranked: RankedRun) -> dict[str, list[tuple[int, int | None]]]:
    """For every averaged query, its relevant documents as (grade, rank or None)."""
    joined = golden.relevant.join(
        ranked.judged.select("qid", "doc_id", "rank"), on=["qid", "doc_id"], how="left"
    )
    by_query: dict[str, list[tuple[int, int | None]]] = {q: [] for q in golden.evaluated_qids}
    for qid, grade, rank in joined.select("qid", "grade", "rank").iter_rows():
        by_query[qid].append((grade, rank))
    return by_query


def gained_ranks(
    golden: Judgments, ranked: RankedRun, qids: list[str]
) -> dict[str, list[tuple[int, int | None]]]:
    """For every query of ``qids``, its documents with a positive grade as (grade, rank or
    None): the gains of nDCG. Like trec_eval, whose ``-l`` changes binary measures only, a
    grade below ``min_grade`` still gains in nDCG (and in its ideal)."""
    joined = golden.judgments.filter(pl.col("grade") > 0).join(
        ranked.judged.select("qid", "doc_id", "rank"), on=["qid", "doc_id"], how="left"
    )
    by_query: dict[str, list[tuple[int, int | None]]] = {q: [] for q in qids}
    for qid, grade, rank in joined.select("qid", "grade", "rank").iter_rows():
        if qid in by_query:
            by_query[qid].append((grade, rank))
    return by_query


def _ndcg(gained: Judged, k: int, gain: Gain) -> float:
    """nDCG@k of a query's gains; 0 for a query without any (trec_eval, under ``-c``)."""
    return ndcg_at(gained, k, gain) if gained else 0.0


def _missed_doc_ids(golden: Judgments, ranked: RankedRun, depth: int) -> dict[str, list[str]]:
    """Per query, the relevant documents outside the run's top ``depth``."""
    joined = golden.relevant.join(
        ranked.judged.select("qid", "doc_id", "rank"), on=["qid", "doc_id"], how="left"
    )
    out: dict[str, list[str]] = {}
    for qid, doc_id, rank in joined.select("qid", "doc_id", "rank").iter_rows():
        if rank is None or rank > depth:
            out.setdefault(qid, []).append(doc_id)
    return out


def _evidence(missed: list[str], indexed: Set[str] | None) -> MissEvidence | None:
    if indexed is None:
        return None
    return MissEvidence(misses=len(missed), not_indexed=sum(1 for d in missed if d not in indexed))


def evaluate_run(
    golden: Judgments,
    ranked: RankedRun,
    *,
    k: int,
    depth: int,
    depths: tuple[int, ...] = DEFAULT_DEPTHS,
    conventions: Conventions | None = None,
    thresholds: Thresholds | None = None,
    indexed: Set[str] | None = None,
) -> RunEvaluation:
    """All measures of one run: per query, macro means, micro (pooled) recall, depth curve,
    and the diagnosis of each query with the rule that gave it.

    ``indexed``: the documents the index holds (an index manifest, or the corpus where there
    is none), at least those among the relevant ones; a relevant document outside it is not
    indexed. Given, the diagnosis of a low-recall query rests on where its misses lie; None:
    nothing says what the index holds, and "ingestion" is a guess (said so in the reason).
    """
    for name, value in (("k", k), ("depth", depth)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    conventions = conventions or Conventions(min_grade=golden.min_grade)
    if conventions.min_grade != golden.min_grade:
        raise ValueError("conventions.min_grade differs from the golden set's min_grade")
    thresholds = thresholds or Thresholds()
    gain = conventions.gain
    curve_depths = tuple(sorted({*depths, k, depth}))
    by_query = relevant_ranks(golden, ranked)
    if conventions.all_judged_queries:
        judged_qids = golden.judgments.get_column("qid").unique(maintain_order=True).to_list()
        by_query |= {q: [] for q in judged_qids if q not in by_query}
    gained = gained_ranks(golden, ranked, list(by_query))
    missed = _missed_doc_ids(golden, ranked, depth) if indexed is not None else {}

    rows: list[QueryEvaluation] = []
    hits: Counter[int] = Counter()
    total_relevant = 0
    curve: dict[int, list[float]] = {d: [] for d in curve_depths}
    for qid, relevant in by_query.items():
        # the hits at every cutoff (depth curve, k, depth) from the sorted ranks, not a pass
        # over the query's documents per cutoff: R@c = hits(c) / relevant, as ``recall_at``
        found_ranks = sorted(rank for _, rank in relevant if rank is not None)
        found = {d: bisect_right(found_ranks, d) for d in curve_depths}
        r_depth = found[depth] / len(relevant) if relevant else 0.0
        n_k = _ndcg(gained[qid], k, gain)
        # the same gains as nDCG@k (every positive grade), the ideal from the candidates alone
        n_cand = candidate_ndcg_at(gained[qid], k, gain, depth=depth)
        verdict = diagnose(
            r_depth,
            n_cand,
            thresholds,
            k=k,
            depth=depth,
            evidence=_evidence(missed.get(qid, []), indexed),
        )
        total_relevant += len(relevant)
        for d in curve_depths:
            hits[d] += found[d]
            curve[d].append(found[d] / len(relevant) if relevant else 0.0)
        rows.append(
            QueryEvaluation(
                qid=qid,
                text=golden.query_text(qid),
                relevant=len(relevant),
                retrieved=ranked.retrieved.get(qid, 0),
                recall_k=found[k] / len(relevant) if relevant else 0.0,
                recall_depth=r_depth,
                ndcg_k=n_k,
                ndcg_cand_k=n_cand,
                misses=len(relevant) - found[depth],
                diagnosis=verdict.diagnosis,
                reason=verdict.reason,
            )
        )
    defined_cand = [q.ndcg_cand_k for q in rows if q.ndcg_cand_k is not None]
    r_k, r_depth_name = f"R@{k}", f"R@{depth}"
    measures = {
        r_k: fmean(q.recall_k for q in rows),
        r_depth_name: fmean(q.recall_depth for q in rows),
        f"nDCG@{k}": fmean(q.ndcg_k for q in rows),
        f"nDCG_cand@{k}": fmean(defined_cand) if defined_cand else 0.0,
    }
    micro = {r_k: hits[k] / total_relevant, r_depth_name: hits[depth] / total_relevant}
    return RunEvaluation(
        name=ranked.name,
        k=k,
        depth=depth,
        conventions=conventions,
        thresholds=thresholds,
        index_evidence=indexed is not None,
        queries=rows,
        measures=measures,
        micro=micro,
        depth_curve={d: fmean(values) for d, values in curve.items()},
        micro_depth_curve={d: hits[d] / total_relevant for d in curve_depths},
        misses=total_relevant - hits[depth],
        relevant=total_relevant,
        report=ranked.report,
        no_candidate=len(rows) - len(defined_cand),
    )
