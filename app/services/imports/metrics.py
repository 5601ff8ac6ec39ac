"""The metrics of a run, in one shape: the API's metrics answer, the pages' numbers and
``misstriage evaluate --format json`` are all built here from an ``app.eval`` evaluation.

Measure names are canonical keys (``R@10``, ``nDCG@10``), so the rows and the cluster figures
have keys that depend on k and depth: they are typed as the model's extra fields
(``__pydantic_extra__``), which /openapi.json documents as ``additionalProperties``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Self

from pydantic import ConfigDict, Field, JsonValue

from app.eval import Conventions, Diagnosis, Gain, Order, QueryEvaluation, RunEvaluation
from app.eval.clusters import FEW, ClusterEvaluation
from app.eval.conventions import AVERAGING, DUPLICATES, IDEAL, NDCG_GRADES
from app.eval.depth_cost import DepthAdvice
from app.eval.diagnosis import Thresholds
from app.eval.measures import Measure, MeasureKind
from app.provenance import DetectorRunRef
from app.readmodel import ReadModel, absent_when_none

#: A per-query value: nDCG_cand is undefined (null) when no relevant document is in the top depth.
QueryValue = float | None


class ConventionsPublic(ReadModel):
    """The rules every number was computed under, echoed next to the numbers."""

    order: Order
    gain: Gain
    ideal: str
    min_grade: int
    relevant: str
    averaging: str
    averaged_queries: str
    #: judged queries without a relevant document averaged too (trec_eval -c)
    all_judged_queries: bool
    #: the grades nDCG's gains come from (trec_eval -l changes binary measures only)
    ndcg_grades: str
    duplicates: str

    @classmethod
    def of(cls, conventions: Conventions) -> Self:
        return cls(
            order=conventions.order,
            gain=conventions.gain,
            ideal=IDEAL,
            min_grade=conventions.min_grade,
            relevant=f"grade >= {conventions.min_grade}",
            averaging=AVERAGING,
            averaged_queries=conventions.averaged_queries,
            all_judged_queries=conventions.all_judged_queries,
            ndcg_grades=NDCG_GRADES,
            duplicates=DUPLICATES,
        )


class ThresholdsPublic(ReadModel):
    """What counts as high for the diagnosis: recall@depth and nDCG@k."""

    recall: float
    ndcg: float


class UniqueClusters(ReadModel):
    """unique-clusters@k over the evaluated queries: its median, and the share of queries
    with ``FEW`` (4) or fewer distinct clusters in the top k."""

    model_config = ConfigDict(frozen=True, serialize_by_alias=True, validate_by_name=True)

    median: float
    share_few: float = Field(alias=f"share_at_most_{FEW}")


class ClusterMetrics(ReadModel):
    """Duplicate clusters at k: ``unique-clusters@k`` (a ``UniqueClusters``), ``cluster-R@k``
    (macro) and ``micro`` {``cluster-R@k``}. The two measure names carry k, so they are the
    model's extra fields."""

    model_config = ConfigDict(frozen=True, extra="allow")
    __pydantic_extra__: dict[str, UniqueClusters | float]

    k: int
    micro: dict[str, float]
    #: The detector run the cluster ids come from, with its error rates (a stored run's;
    #: absent for files, whose ids are as given).
    detector_run: DetectorRunRef | None = Field(default=None, exclude_if=absent_when_none)

    @classmethod
    def of(cls, clusters: ClusterEvaluation, detector_run: DetectorRunRef | None = None) -> Self:
        k = clusters.k
        return cls.model_validate(
            {
                "k": k,
                "detector_run": detector_run,
                f"unique-clusters@{k}": UniqueClusters(
                    median=clusters.median_unique, share_few=clusters.share_few
                ),
                f"cluster-R@{k}": clusters.cluster_recall,
                "micro": {f"cluster-R@{k}": clusters.cluster_recall_micro},
            }
        )

    @property
    def unique(self) -> UniqueClusters:
        found = self.__pydantic_extra__[f"unique-clusters@{self.k}"]
        assert isinstance(found, UniqueClusters)
        return found

    @property
    def cluster_recall(self) -> float:
        found = self.__pydantic_extra__[f"cluster-R@{self.k}"]
        assert isinstance(found, float)
        return found

    @property
    def cluster_recall_micro(self) -> float:
        return self.micro[f"cluster-R@{self.k}"]


class DepthCostRow(ReadModel):
    """One depth of the curve with its reranking cost: ``cost_ms`` = depth x cost per
    candidate (ms per query), ``gain_per_ms`` = recall gained per added ms since the previous
    depth (null at the first depth, 0 on a flat step)."""

    depth: int
    recall: float
    cost_ms: float
    gain_per_ms: float | None


class DepthCost(ReadModel):
    """The depth advisor for a reranking cost per candidate: the cost at every depth of the
    curve, the advised depth (the smallest whose recall is within ``tolerance`` of the best on
    the curve), one sentence per step ("depth 200 buys +0.030 R for +465 ms per query") and
    where depth stops paying (``advice``)."""

    cost_per_candidate_ms: float
    tolerance: float
    per_depth: list[DepthCostRow]
    advised_depth: int
    best_recall: float
    steps: list[str]
    advice: str

    @classmethod
    def of(cls, advice: DepthAdvice) -> Self:
        return cls(
            cost_per_candidate_ms=advice.cost_per_candidate_ms,
            tolerance=advice.tolerance,
            per_depth=[
                DepthCostRow(
                    depth=p.depth, recall=p.recall, cost_ms=p.cost_ms, gain_per_ms=p.gain_per_ms
                )
                for p in advice.points
            ],
            advised_depth=advice.advised_depth,
            best_recall=advice.best_recall,
            steps=advice.sentences(),
            advice=advice.advice(),
        )


def depth_cost(advice: DepthAdvice | None) -> DepthCost | None:
    """The read model of a depth advice; None (no cost given) stays None."""
    return None if advice is None else DepthCost.of(advice)


class QueryRow(ReadModel):
    """One golden query under a run: the measures under their canonical names (``R@k``,
    ``R@depth``, ``nDCG@k``, ``nDCG_cand@k``: the extra fields), misses at depth, the
    diagnosis and its ``reason``: which rule fired, on which numbers."""

    model_config = ConfigDict(frozen=True, extra="allow")
    __pydantic_extra__: dict[str, QueryValue]

    qid: str
    text: str | None
    relevant: int
    retrieved: int
    misses: int
    diagnosis: Diagnosis
    reason: str

    @classmethod
    def of(cls, query: QueryEvaluation, k: int, depth: int) -> Self:
        return cls.model_validate(
            {
                "qid": query.qid,
                "text": query.text,
                "relevant": query.relevant,
                "retrieved": query.retrieved,
                **dict(zip(measure_names(k, depth), _values(query), strict=True)),
                "misses": query.misses,
                "diagnosis": query.diagnosis,
                "reason": query.reason,
            }
        )

    def measure(self, name: str) -> QueryValue:
        """The value of a measure by its canonical name (``R@10``)."""
        return self.__pydantic_extra__[name]

    def in_reading_order(self) -> dict[str, str | int | float | None]:
        """The row's values as a table shows them: the query, then its measures, then the
        misses and the diagnosis (CSV columns)."""
        return {
            "qid": self.qid,
            "text": self.text,
            "relevant": self.relevant,
            "retrieved": self.retrieved,
            **self.__pydantic_extra__,
            "misses": self.misses,
            "diagnosis": self.diagnosis.value,
            "reason": self.reason,
        }


def measure_names(k: int, depth: int) -> tuple[str, str, str, str]:
    """The canonical names of a row's measures: R@k, R@depth, nDCG@k, nDCG_cand@k."""
    return (
        str(Measure(MeasureKind.RECALL, k)),
        str(Measure(MeasureKind.RECALL, depth)),
        str(Measure(MeasureKind.NDCG, k)),
        str(Measure(MeasureKind.NDCG_CANDIDATE, k)),
    )


def _values(query: QueryEvaluation) -> tuple[float, float, float, QueryValue]:
    return query.recall_k, query.recall_depth, query.ndcg_k, query.ndcg_cand_k


class Metrics(ReadModel):
    """A run's numbers at (k, depth): macro ``measures`` and ``micro`` by canonical name, the
    depth curves (macro and micro recall by depth), the misses at depth and the diagnosis
    counts, with the conventions they were computed under."""

    k: int
    depth: int
    conventions: ConventionsPublic
    #: The averaged queries (those with a relevant document).
    queries: int
    #: Relevant (query, document) pairs.
    relevant: int
    measures: dict[str, float]
    micro: dict[str, float]
    depth_curve: dict[int, float]
    micro_depth_curve: dict[int, float]
    misses: int
    diagnosis: dict[Diagnosis, int]
    #: The diagnosis had an index manifest or corpus to say where the misses lie (else its
    #: "ingestion" is a guess).
    diagnosis_evidence: bool
    #: Queries with no relevant document in the top depth: nDCG_cand@k is undefined (null)
    #: for them and they are left out of its mean.
    no_relevant_candidate: int

    @classmethod
    def of(cls, evaluation: RunEvaluation, **more: object) -> Self:
        """The metrics of ``evaluation``; ``more``: the fields a subclass adds."""
        counts = evaluation.diagnosis_counts
        return cls.model_validate(
            {
                "k": evaluation.k,
                "depth": evaluation.depth,
                "conventions": ConventionsPublic.of(evaluation.conventions),
                "queries": len(evaluation.queries),
                "relevant": evaluation.relevant,
                "measures": evaluation.measures,
                "micro": evaluation.micro,
                "depth_curve": evaluation.depth_curve,
                "micro_depth_curve": evaluation.micro_depth_curve,
                "misses": evaluation.misses,
                "diagnosis": {d: counts[d.value] for d in Diagnosis},
                "diagnosis_evidence": evaluation.index_evidence,
                "no_relevant_candidate": evaluation.no_candidate,
                **more,
            }
        )


class RunMetrics(Metrics):
    """The API's metrics of a stored run (API.md); ``clusters`` at any k (from the cluster
    ranks stored at import), null only for a run imported before they were stored when k is
    deeper than the kept head of its rankings; ``cost`` (the depth advisor) null when no
    reranking cost per candidate was given."""

    run_id: int
    clusters: ClusterMetrics | None
    cost: DepthCost | None

    @classmethod
    def of_run(
        cls,
        evaluation: RunEvaluation,
        *,
        run_id: int,
        clusters: ClusterEvaluation | None,
        cost: DepthAdvice | None = None,
        detector_run: DetectorRunRef | None = None,
    ) -> Self:
        return cls.of(
            evaluation,
            run_id=run_id,
            clusters=None if clusters is None else ClusterMetrics.of(clusters, detector_run),
            cost=depth_cost(cost),
        )


class EvaluatedRun(Metrics):
    """A run in ``misstriage evaluate --format json`` (docs/evaluate.md): the metrics, the
    run's name, the diagnosis thresholds and the reader's report; ``per_query`` with
    ``--per-query``, ``clusters`` with ``--corpus``, ``cost`` with ``--cost-ms`` (absent
    otherwise, not null)."""

    name: str
    thresholds: ThresholdsPublic
    report: dict[str, JsonValue]
    per_query: list[QueryRow] | None = None
    clusters: ClusterMetrics | None = None
    cost: DepthCost | None = None

    @classmethod
    def of_evaluation(
        cls,
        evaluation: RunEvaluation,
        *,
        per_query: bool = False,
        clusters: ClusterEvaluation | None = None,
        cost: DepthAdvice | None = None,
        detector_run: DetectorRunRef | None = None,
    ) -> Self:
        return cls.of(
            evaluation,
            name=evaluation.name,
            thresholds=_thresholds(evaluation.thresholds),
            report=evaluation.report.as_dict(),
            per_query=[QueryRow.of(q, evaluation.k, evaluation.depth) for q in evaluation.queries]
            if per_query
            else None,
            clusters=None if clusters is None else ClusterMetrics.of(clusters, detector_run),
            cost=depth_cost(cost),
        )

    def document(self) -> dict[str, JsonValue]:
        """The JSON document, without the optional parts that were not asked for; the run's
        name first, for a person reading it."""
        absent = {name for name in ("per_query", "clusters", "cost") if getattr(self, name) is None}
        data = self.model_dump(mode="json", exclude=absent)
        return {"name": data.pop("name"), **data}


def _thresholds(thresholds: Thresholds) -> ThresholdsPublic:
    return ThresholdsPublic(recall=thresholds.recall, ndcg=thresholds.ndcg)


#: The per-query table's sort keys (the run page's column links): by value, a query without
#: nDCG_cand first in ascending order.
QUERY_SORTS: dict[str, Callable[[QueryEvaluation], str | float]] = {
    "qid": lambda q: q.qid,
    "recall_k": lambda q: q.recall_k,
    "recall_depth": lambda q: q.recall_depth,
    "ndcg_k": lambda q: q.ndcg_k,
    "ndcg_cand_k": lambda q: -1.0 if q.ndcg_cand_k is None else q.ndcg_cand_k,
    "misses": lambda q: q.misses,
    "diagnosis": lambda q: q.diagnosis.value,
}


def query_rows(
    evaluation: RunEvaluation,
    *,
    search: str = "",
    diagnosis: Diagnosis | None = None,
    sort: str = "qid",
    desc: bool = False,
) -> list[QueryRow]:
    """The per-query rows of an evaluation, for the API and the run page alike: those whose
    id or text contains ``search`` (case-insensitive) and with ``diagnosis``, sorted by
    ``sort`` (a key of ``QUERY_SORTS``; another value sorts by query id)."""
    queries = evaluation.queries
    needle = search.strip().lower()
    if needle:
        queries = [
            q for q in queries if needle in q.qid.lower() or needle in (q.text or "").lower()
        ]
    if diagnosis is not None:
        queries = [q for q in queries if q.diagnosis is diagnosis]
    key = QUERY_SORTS.get(sort, QUERY_SORTS["qid"])
    ordered = sorted(queries, key=key, reverse=desc)
    return [QueryRow.of(q, evaluation.k, evaluation.depth) for q in ordered]
