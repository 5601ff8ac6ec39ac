"""The run page (per-query diagnosis) and the comparison of two runs."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from app.eval.clusters import FEW
from app.eval.conventions import DEFAULT_DEPTH, MAX_CUTOFF
from app.eval.diagnosis import DIAGNOSIS_MEANING, Diagnosis, Thresholds
from app.eval.profile_rows import unknown_ks
from app.http.deps import ReviewerDep, SessionDep
from app.http.params import Id, Page, PerPage, QueryId
from app.models.golden import GoldenSetPublic
from app.models.runs import RunPublic
from app.readmodel import paged
from app.services.errors import Invalid
from app.services.imports import clusters as cluster_service
from app.services.imports import golden_sets as golden_service
from app.services.imports import runs as run_service
from app.services.imports.metrics import query_rows
from app.services.views import comparisons
from app.web import copy
from app.web.charts import clusters_chart
from app.web.forms import (
    ClusterView,
    Fields,
    View,
    read_cluster_view,
    read_view,
    refuse_bad_view,
)
from app.web.render import render

router = APIRouter(include_in_schema=False)
PER_PAGE = 50


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(value, high))


def _diagnosis(value: str) -> Diagnosis | None:
    """The diagnosis filter: a value that names none shows every query."""
    try:
        return Diagnosis(value)
    except ValueError:
        return None


@router.get("/runs/{run_id}", name="run_page")
def run_page(
    request: Request,
    session: SessionDep,
    principal: ReviewerDep,
    run_id: Id,
    view: Annotated[View, Depends(read_view)],
    q: str = "",
    diagnosis: str = "",
    sort: str = "qid",
    desc: bool = False,
    page: Page = 1,
    per_page: PerPage = PER_PAGE,
) -> HTMLResponse:
    context = run_service.run_context(session=session, run_id=run_id)
    refuse_bad_view(view)  # a message, never a silent clamp
    k, depth, gain = view.k, view.depth, view.gain
    thresholds = Thresholds()
    evaluation = run_service.evaluate_stored_run(
        session=session,
        run=context.run,
        golden=context.golden,
        k=k,
        depth=depth,
        gain=gain,
        depths=(k, depth),
        thresholds=thresholds,
        all_judged_queries=view.all_judged_queries,
    )
    metrics = run_service.run_metrics(session=session, context=context, evaluation=evaluation)
    rows = query_rows(evaluation, search=q, diagnosis=_diagnosis(diagnosis), sort=sort, desc=desc)
    pages = max(1, -(-len(rows) // per_page))
    page = _clamp(page, 1, pages)
    return render(
        request,
        "run.html",
        {
            "run": RunPublic.of(context.run),
            "golden": GoldenSetPublic.of(context.golden),
            "metrics": metrics,
            "thresholds": thresholds,
            "k": k,
            "depth": depth,
            "gain": gain.value,
            "all_judged_queries": view.all_judged_queries,
            # the controls every link of the page keeps
            "view_query": urlencode(
                {"k": k, "depth": depth, "gain": gain.value}
                | ({"all_judged_queries": "true"} if view.all_judged_queries else {})
            ),
            # the same view under the other averaging (trec_eval -c on or off)
            "other_averaging": urlencode(
                {"k": k, "depth": depth, "gain": gain.value}
                | ({} if view.all_judged_queries else {"all_judged_queries": "true"})
            ),
            "q": q,
            "diagnosis": diagnosis,
            "sort": sort,
            "desc": desc,
            "rows": paged(rows, page, per_page).items,
            "per_page": per_page,
            "matching": len(rows),
            "page": page,
            "pages": pages,
            "diagnoses": [(d.value, metrics.diagnosis[d], DIAGNOSIS_MEANING[d]) for d in Diagnosis],
            "clusters": metrics.clusters,
            "few": FEW,
        },
        principal=principal,
    )


@router.get("/runs/{run_id}/clusters", name="run_clusters_page")
def run_clusters_page(
    request: Request,
    session: SessionDep,
    principal: ReviewerDep,
    run_id: Id,
    view: Annotated[ClusterView, Depends(read_cluster_view)],
) -> HTMLResponse:
    """unique-clusters@k over every query the run answers (a log run's only measures): the
    table across k, the distribution at each k and the chart. A value that cannot be used
    answers 422 with the page: its message next to the field, the value entered kept in it,
    the defaults shown for it."""
    context = run_service.run_context(session=session, run_id=run_id)
    # No k entered (or none usable): the run's own (a per-query profile's imported ks, the
    # only ones it knows), not the page's default.
    ks = view.ks
    own = cluster_service.default_ks(session=session, run=context.run)
    known = cluster_service.known_ks(session=session, run=context.run)
    if not view.entered.get("k", "").strip() or "k" in view.errors:
        ks = own
    elif known is not None and (refused := unknown_ks(ks, known)) is not None:
        view.errors["k"] = refused
        ks = own
    profile = cluster_service.run_clusters(
        session=session,
        run=context.run,
        ks=ks,
        threshold=view.threshold,
        price_per_mtok=view.price_per_mtok,
        queries_per_day=view.queries_per_day,
    )
    curves = {
        "mean": {d.k: d.mean_distinct for d in profile.depths},
        "median": {d.k: d.median for d in profile.depths},
        "p10": {d.k: d.p10 for d in profile.depths},
        "p90": {d.k: d.p90 for d in profile.depths},
    }
    notes = (
        {d.k: f"{d.prompt_tokens:,.0f} tok" for d in profile.depths if d.prompt_tokens is not None}
        if profile.token_estimate
        else None
    )
    return render(
        request,
        "run_clusters.html",
        {
            "run": RunPublic.of(context.run),
            "golden": GoldenSetPublic.of(context.golden),
            "profile": profile,
            "chart": clusters_chart(curves, notes=notes),
            "ks": ",".join(map(str, ks)),
            "threshold": view.threshold,
            "price_per_mtok": view.price_per_mtok,
            "queries_per_day": view.queries_per_day,
            "entered": view.entered,
            "errors": view.errors,
        },
        principal=principal,
        status=422 if view.errors else 200,
        error_code="invalid_" + sorted(view.errors)[0] if view.errors else None,
    )


@router.get("/golden-sets/{golden_set_id}/compare", name="compare_page")
def compare_page(
    request: Request,
    session: SessionDep,
    principal: ReviewerDep,
    golden_set_id: Id,
    a: QueryId,
    b: QueryId,
    depth: str = "",
) -> HTMLResponse:
    golden = golden_service.get_golden_set(session=session, golden_set_id=golden_set_id)
    run_a = run_service.get_run(session=session, run_id=a)
    run_b = run_service.get_run(session=session, run_id=b)
    fields = Fields()
    cut = fields.integer("depth", depth, default=DEFAULT_DEPTH, minimum=1, maximum=MAX_CUTOFF)
    if fields.errors:
        raise Invalid(fields.errors["depth"], code="invalid_depth")
    comparison = comparisons.compare(session=session, golden=golden, a=run_a, b=run_b, depth=cut)
    texts = golden_service.query_texts(
        session=session,
        golden=golden,
        qids={qid for qid, _, _ in comparison.fixed + comparison.introduced},
    )
    return render(
        request,
        "compare.html",
        {
            "golden": GoldenSetPublic.of(golden),
            "comparison": comparison,
            "sentences": comparison.sentences(copy.phrase),
            "causes": golden.causes,
            "rows": comparisons.cause_order(
                golden.causes, set(comparison.by_cause_a) | set(comparison.introduced_by_cause)
            ),
            "texts": texts,
            "same": comparisons.same_candidates(session=session, a=run_a, b=run_b, depth=cut),
        },
        principal=principal,
    )
