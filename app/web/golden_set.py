"""The golden-set page: the runs at the chosen k, depth and gain with the depth-curve chart
and the reranking-cost advisor, the log runs, the run-import form, and the duplicates
section (app/web/duplicates.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from sqlmodel import Session

from app.eval.conventions import DEFAULT_DEPTHS
from app.eval.depth_cost import cost_at
from app.http.deps import Principal, ReviewerDep, SessionDep
from app.http.params import Id
from app.models import LOG, Role
from app.models.golden import GoldenSetPublic
from app.models.runs import RunPublic
from app.services.delivery import events
from app.services.imports import golden_sets as golden_service
from app.services.imports import runs as run_service
from app.services.imports.series import series_names
from app.services.views import comparisons
from app.web.charts import LineChart, depth_curve_chart
from app.web.duplicates import DuplicatesSection, duplicates_section
from app.web.forms import View, read_view
from app.web.progress import new_import_id
from app.web.render import context_of, read_flash, render

router = APIRouter(include_in_schema=False)


@dataclass(frozen=True)
class GoldenSetPage:
    """What ``golden_set.html`` receives: the runs table and its controls, the depth-curve
    chart, the log runs and the run-import form."""

    golden: GoldenSetPublic
    rows: list[comparisons.RunRow]
    log_runs: list[RunPublic]
    #: The best value of each measure across the runs (its cell is marked).
    best: dict[str, float]
    k: int
    depth: int
    gain: str
    cost_ms: float | None
    #: The cost per query at the table's depth (reranking and retrieval p95), as the curve's.
    depth_cost_ms: float | None
    tolerance: float | None
    all_judged_queries: bool
    retrieval_p95: dict[int, float] | None
    #: What the controls were given, and a message per value that could not be used.
    entered: dict[str, str]
    errors: dict[str, str]
    chart: LineChart
    depths: tuple[int, ...]
    checks: list[str]
    event_names: tuple[str, ...]
    can_import: bool
    error: str | None
    form: dict[str, str]
    import_id: str
    #: The "Duplicates" section: detector runs and the lead's forms.
    duplicates: DuplicatesSection
    #: The golden set's series (name, runs), each linked to its page.
    series: list[tuple[str, int]]


def _golden_set_page(
    request: Request,
    session: Session,
    principal: Principal,
    golden_set_id: int,
    *,
    view: View,
    status: int = 200,
    error_code: str | None = None,
) -> HTMLResponse:
    golden = golden_service.get_golden_set(session=session, golden_set_id=golden_set_id)
    k, depth = view.k, view.depth
    board = comparisons.run_board(
        session=session,
        golden=golden,
        k=k,
        depth=depth,
        gain=view.gain,
        cost_ms=view.cost_ms,
        tolerance=view.tolerance,
        all_judged_queries=view.all_judged_queries,
        retrieval_p95=view.retrieval_p95,
    )
    advice = board.rows[0].cost if board.rows else None
    chart = depth_curve_chart(
        {r.run.name: r.curve for r in board.rows},
        costs=None if advice is None else {p.depth: f"{p.cost_ms:g} ms" for p in advice.per_depth},
    )
    flash = read_flash(request)
    page = GoldenSetPage(
        golden=GoldenSetPublic.of(golden),
        rows=board.rows,
        log_runs=[
            RunPublic.of(r) for r in run_service.list_runs(session=session, golden=golden, kind=LOG)
        ],
        best=board.best,
        k=k,
        depth=depth,
        gain=view.gain.value,
        cost_ms=view.cost_ms,
        depth_cost_ms=None
        if view.cost_ms is None
        else cost_at(depth, view.cost_ms, view.retrieval_p95),
        tolerance=view.tolerance,
        all_judged_queries=view.all_judged_queries,
        retrieval_p95=view.retrieval_p95,
        entered=view.entered,
        errors=view.errors,
        chart=chart,
        depths=DEFAULT_DEPTHS,
        checks=board.checks,
        event_names=events.EVENTS,
        can_import=principal.role.allows(Role.LEAD),
        error=None,
        form={"name": "", **(flash.form if flash else {})},
        import_id=new_import_id(),
        duplicates=duplicates_section(
            session=session, golden_set_id=golden_set_id, principal=principal
        ),
        series=series_names(session=session, golden=golden),
    )
    return render(
        request,
        "golden_set.html",
        context_of(page),
        principal=principal,
        status=status,
        error_code=error_code,
    )


@router.get("/golden-sets/{golden_set_id}", name="golden_set_page")
def golden_set_page(
    request: Request,
    session: SessionDep,
    principal: ReviewerDep,
    golden_set_id: Id,
    view: Annotated[View, Depends(read_view)],
) -> HTMLResponse:
    """The runs at the chosen k, depth and gain. A value that cannot be used answers 422 with
    the page: a message next to its field, the defaults shown for it (never a silent change)."""
    return _golden_set_page(
        request,
        session,
        principal,
        golden_set_id,
        view=view,
        status=422 if view.errors else 200,
        error_code="invalid_" + sorted(view.errors)[0] if view.errors else None,
    )
