"""The run page (per-query diagnosis) and the comparison of two runs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from app.eval.clusters import FEW
from app.eval.conventions import DEFAULT_DEPTH, MAX_CUTOFF
from app.eval.diagnosis import DIAGNOSIS_MEANING, Diagnosis
from app.http.deps import ReviewerDep, SessionDep
from app.http.params import Id, Page, PerPage, QueryId
from app.services import comparisons
from app.services import golden_sets as golden_service
from app.services import runs as run_service
from app.services.errors import Invalid
from app.web.forms import Fields, View, read_view, refuse_bad_view
from app.web.render import render

router = APIRouter(include_in_schema=False)
PER_PAGE = 50
SORTS = {
    "qid": lambda q: q.qid,
    "recall_k": lambda q: q.recall_k,
    "recall_depth": lambda q: q.recall_depth,
    "ndcg_k": lambda q: q.ndcg_k,
    "ndcg_cand_k": lambda q: -1.0 if q.ndcg_cand_k is None else q.ndcg_cand_k,
    "misses": lambda q: q.misses,
    "diagnosis": lambda q: q.diagnosis.value,
}


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(value, high))


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
    run = run_service.get_run(session=session, run_id=run_id)
    golden = golden_service.get_golden_set(session=session, golden_set_id=run.golden_set_id)
    refuse_bad_view(view)  # a message, never a silent clamp
    k, depth, gain = view.k, view.depth, view.gain
    evaluation = run_service.evaluate_stored_run(
        session=session, run=run, golden=golden, k=k, depth=depth, gain=gain, depths=(k, depth)
    )
    rows = evaluation.queries
    needle = q.strip().lower()
    if needle:
        rows = [r for r in rows if needle in r.qid.lower() or needle in (r.text or "").lower()]
    if diagnosis in {d.value for d in Diagnosis}:
        rows = [r for r in rows if r.diagnosis.value == diagnosis]
    key = SORTS.get(sort, SORTS["qid"])
    rows = sorted(rows, key=key, reverse=desc)
    pages = max(1, -(-len(rows) // per_page))
    page = _clamp(page, 1, pages)
    counts = evaluation.diagnosis_counts
    return render(
        request,
        "run.html",
        {
            "run": run,
            "golden": golden,
            "evaluation": evaluation,
            "k": k,
            "depth": depth,
            "gain": gain.value,
            "q": q,
            "diagnosis": diagnosis,
            "sort": sort,
            "desc": desc,
            "rows": rows[(page - 1) * per_page : page * per_page],
            "per_page": per_page,
            "matching": len(rows),
            "page": page,
            "pages": pages,
            "diagnoses": [(d.value, counts[d.value], DIAGNOSIS_MEANING[d]) for d in Diagnosis],
            "clusters": run_service.cluster_evaluation(
                session=session, run=run, golden=golden, k=k
            ),
            "few": FEW,
        },
        principal=principal,
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
    context: dict[str, Any] = {
        "golden": golden,
        "comparison": comparison,
        "texts": texts,
        "same": comparisons.same_candidates(session=session, a=run_a, b=run_b, depth=cut),
    }
    return render(request, "compare.html", context, principal=principal)
