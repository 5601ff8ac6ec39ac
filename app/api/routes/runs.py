"""/api/v1/runs: get, delete, metrics, per-query rows, the gate, triages."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field

from app.eval import Gain, Thresholds
from app.eval.cluster_profile import DEFAULT_THRESHOLD
from app.eval.conventions import (
    DEFAULT_DEPTH,
    DEFAULT_DEPTHS,
    DEFAULT_K,
    MAX_CUTOFF,
    parse_depths,
)
from app.eval.depth_cost import DEFAULT_TOLERANCE, parse_retrieval_p95
from app.eval.gate import DEFAULT_MAX_DROP
from app.eval.values import INT32_MAX
from app.http.deps import LeadDep, ReviewerDep, SessionDep
from app.http.params import Cutoff, Id, Page, PerPage, QueryId
from app.models import RunClustersPublic
from app.models.runs import RunPublic
from app.models.triage_public import Overlap, TriagePublic
from app.readmodel import PageOf, paged
from app.services.errors import Invalid
from app.services.imports import clusters as cluster_service
from app.services.imports import runs as service
from app.services.imports.metrics import QueryRow, RunMetrics, query_rows
from app.services.paging import DEFAULT_PER_PAGE
from app.services.triage import triages as triage_service
from app.services.views import gate as gate_service

router = APIRouter(prefix="/runs", tags=["runs"])

#: Reranking cost per candidate, ms (the depth advisor); 0 or absent: no advisor.
CostMs = Annotated[float | None, Query(ge=0, lt=1e6)]
#: How close to the best recall on the curve the advised depth must be.
Tolerance = Annotated[float, Query(ge=0, lt=1)]
#: Average the judged queries without a relevant document too (trec_eval -c); off by default.
AllJudgedQueries = Annotated[bool, Query()]


def _retrieval_p95(text: str | None) -> dict[int, float] | None:
    if not text:
        return None
    try:
        return parse_retrieval_p95(text)
    except ValueError as exc:
        raise Invalid(f"retrieval_p95: {exc}", code="invalid_retrieval_p95") from None


def _depths(depths: str | None) -> tuple[int, ...]:
    if not depths:
        return DEFAULT_DEPTHS
    try:
        return parse_depths(depths)
    except ValueError as exc:
        raise Invalid(str(exc), code="invalid_depths") from None


@router.get("/{run_id}")
def get_run(session: SessionDep, principal: ReviewerDep, run_id: Id) -> RunPublic:
    return RunPublic.of(service.get_run(session=session, run_id=run_id))


@router.delete("/{run_id}", status_code=204)
def delete_run(session: SessionDep, principal: LeadDep, run_id: Id) -> Response:
    service.delete_run(session=session, run_id=run_id)
    return Response(status_code=204)


@router.get("/{run_id}/metrics")
def run_metrics(
    session: SessionDep,
    principal: ReviewerDep,
    run_id: Id,
    k: Cutoff = DEFAULT_K,
    depth: Cutoff = DEFAULT_DEPTH,
    gain: Gain = Gain.EXP,
    depths: str | None = None,
    cost_ms: CostMs = None,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    all_judged_queries: AllJudgedQueries = False,
    retrieval_p95: Annotated[str | None, Query(max_length=2000)] = None,
) -> RunMetrics:
    """Recall@k, recall@depth, nDCG@k (macro and micro), the depth curve and the misses at
    depth, with the conventions they were computed under; with duplicate clusters,
    unique-clusters@k (median, share of queries with 4 or fewer) and cluster-recall@k; with
    ``cost_ms`` (reranking cost per candidate), the depth advisor: the cost at every depth of
    the curve, the recall per added ms and the smallest depth within ``tolerance`` of the best
    recall (``cost``, null without a cost). ``all_judged_queries=true`` also averages the
    judged queries without a relevant document, as trec_eval ``-c`` (``conventions`` says
    which). ``retrieval_p95`` (``10:12,100:30,1000:95``: ms measured at some depths, linear in
    between, the nearest beyond) adds the first stage's p95 to the cost at every depth."""
    context = service.run_context(session=session, run_id=run_id)
    evaluation = service.evaluate_stored_run(
        session=session,
        run=context.run,
        golden=context.golden,
        k=k,
        depth=depth,
        gain=gain,
        depths=_depths(depths),
        all_judged_queries=all_judged_queries,
    )
    return service.run_metrics(
        session=session,
        context=context,
        evaluation=evaluation,
        cost_ms=cost_ms,
        tolerance=tolerance,
        retrieval_p95=_retrieval_p95(retrieval_p95),
    )


@router.get("/{run_id}/queries")
def run_queries(
    session: SessionDep,
    principal: ReviewerDep,
    run_id: Id,
    k: Cutoff = DEFAULT_K,
    depth: Cutoff = DEFAULT_DEPTH,
    gain: Gain = Gain.EXP,
    page: Page = 1,
    per_page: PerPage = DEFAULT_PER_PAGE,
    all_judged_queries: AllJudgedQueries = False,
) -> PageOf[QueryRow]:
    """Per-query rows: R@k, R@depth, nDCG@k, the candidate-ideal diagnostic, misses and the
    diagnosis (with ``all_judged_queries=true``, the judged queries without a relevant
    document too)."""
    context = service.run_context(session=session, run_id=run_id)
    evaluation = service.evaluate_stored_run(
        session=session,
        run=context.run,
        golden=context.golden,
        k=k,
        depth=depth,
        gain=gain,
        depths=(k, depth),
        thresholds=Thresholds(),
        all_judged_queries=all_judged_queries,
    )
    return paged(query_rows(evaluation), page, per_page)


#: The largest drop of a measure the gate lets pass.
MaxDrop = Annotated[float, Query(ge=0, le=1)]
#: The most relevant documents that may leave the top depth (absent: no limit).
MaxNewMisses = Annotated[int | None, Query(ge=0, le=INT32_MAX)]


@router.get("/{run_id}/gate")
def run_gate(
    session: SessionDep,
    principal: ReviewerDep,
    run_id: Id,
    baseline: QueryId | None = None,
    k: Cutoff = DEFAULT_K,
    depth: Cutoff = DEFAULT_DEPTH,
    max_drop: MaxDrop = DEFAULT_MAX_DROP,
    max_new_misses: MaxNewMisses = None,
    gain: Gain = Gain.EXP,
    all_judged_queries: AllJudgedQueries = False,
) -> gate_service.GateAnswer:
    """``misstriage gate`` for a stored run: R@depth and nDCG@k of the run against
    ``baseline`` (a run of the same golden set; by default the run imported before it in its
    series, 409 ``no_baseline`` when there is none) with the p-value of a paired randomisation
    test, and the relevant documents that left or entered the top depth. ``passed`` is false,
    with ``reasons``, when a measure dropped by more than ``max_drop`` or more than
    ``max_new_misses`` documents left."""
    context = service.run_context(session=session, run_id=run_id)
    return gate_service.run_gate(
        session=session,
        run=context.run,
        golden=context.golden,
        baseline=gate_service.gate_baseline(session=session, run=context.run, baseline_id=baseline),
        k=k,
        depth=depth,
        max_drop=max_drop,
        max_new_misses=max_new_misses,
        gain=gain,
        all_judged_queries=all_judged_queries,
    )


class TriageCreate(BaseModel):
    depth: int = Field(default=DEFAULT_DEPTH, ge=1, le=MAX_CUTOFF)
    k: int = Field(default=DEFAULT_K, ge=1, le=MAX_CUTOFF)
    #: Double review: distinct reviewers per sampled miss (default one for every miss).
    overlap: Overlap = Overlap()


@router.post("/{run_id}/triages", status_code=201)
def create_triage(
    session: SessionDep, principal: LeadDep, run_id: Id, body: TriageCreate
) -> TriagePublic:
    """Enumerate every miss at ``depth`` and put it on a new work queue. ``overlap``
    (``{"reviewers": 1|2|3, "fraction": 0..1, "seed": n}``) gives a reproducible sample of
    the misses, stratified by the hints' suggestion, that many distinct reviewers each."""
    context = service.run_context(session=session, run_id=run_id)
    triage = triage_service.create_triage(
        session=session,
        run=context.run,
        golden=context.golden,
        depth=body.depth,
        k=body.k,
        user=principal.user,
        overlap=body.overlap,
    )
    return TriagePublic.of(triage)


@router.get("/{run_id}/triages")
def list_triages(
    session: SessionDep,
    principal: ReviewerDep,
    run_id: Id,
    page: Page = 1,
    per_page: PerPage = DEFAULT_PER_PAGE,
) -> PageOf[TriagePublic]:
    run = service.get_run(session=session, run_id=run_id)
    items = triage_service.list_triages(session=session, run=run)
    return paged([TriagePublic.of(t) for t in items], page, per_page)


#: A price or a volume: finite and not negative.
Amount = Annotated[float | None, Query(ge=0, lt=1e12)]


@router.get("/{run_id}/clusters")
def run_clusters(
    session: SessionDep,
    principal: ReviewerDep,
    run_id: Id,
    k: str | None = None,
    threshold: Annotated[int, Query(ge=0, le=MAX_CUTOFF)] = DEFAULT_THRESHOLD,
    price_per_mtok: Amount = None,
    queries_per_day: Amount = None,
) -> RunClustersPublic:
    """unique-clusters@k over every query the run answers, judged or not (a log run's too), at
    each k of ``k`` (comma-separated, default 10,20,30,40,50; any k, also deeper than the
    kept head; a run imported as its per-query cluster profile: its ``exact_ks``, the default
    and the only k it answers): the distribution (median, p10, p90, share at or below
    ``threshold``, histogram), the mean distinct clusters, the distinct fraction and the
    marginal distinct clusters per added slot; where the corpus has text, the prompt tokens of
    the top k and, with ``price_per_mtok`` and ``queries_per_day``, their daily price."""
    run = service.get_run(session=session, run_id=run_id)
    return cluster_service.run_clusters(
        session=session,
        run=run,
        ks=cluster_service.parse_ks(k, ()),  # none: the run's own (default_ks)
        threshold=threshold,
        price_per_mtok=price_per_mtok,
        queries_per_day=queries_per_day,
    )
