"""The series page: one configuration's runs over time, a chart and a table of R@k, R@depth,
nDCG@k and the misses by cause, each point a link to its run.

A series is named by people (``feature/login``, ``release/2026.12``, ``..``): the page takes
the name as a percent-encoded path segment (``/golden-sets/1/series/feature%2Flogin``, as
links have always had it) or as a query parameter (``/golden-sets/1/series?name=..``), the
form that reaches every name from a browser (app.http.links)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse

from app.eval.conventions import DEFAULT_DEPTH, DEFAULT_K
from app.http.deps import ReviewerDep, SessionDep
from app.http.params import Cutoff, Id
from app.models.golden import GoldenSetPublic
from app.services.imports import golden_sets as golden_service
from app.services.imports.series import MAX_SERIES
from app.services.views.series import SeriesHistory, series_history
from app.web.charts import series_chart
from app.web.render import render

router = APIRouter(include_in_schema=False)


def point_label(point_run_meta: dict[str, str], name: str) -> str:
    """What a run is called under its tick: its commit (first 8 characters) or its name."""
    commit = point_run_meta.get("commit", "")
    return commit[:8] if commit else name[:16]


def _chart_lines(history: SeriesHistory) -> dict[str, list[tuple[str, float]]]:
    names = (f"R@{history.k}", f"R@{history.depth}", f"nDCG@{history.k}")
    return {
        name: [(point_label(p.run.meta, p.run.name), p.measures[name]) for p in history.runs]
        for name in names
    }


@router.get("/golden-sets/{golden_set_id}/series/{name:path}", name="series_page")
def series_page(
    request: Request,
    session: SessionDep,
    principal: ReviewerDep,
    golden_set_id: Id,
    name: Annotated[str, Path(min_length=1, max_length=MAX_SERIES)],
    k: Cutoff = DEFAULT_K,
    depth: Cutoff = DEFAULT_DEPTH,
) -> HTMLResponse:
    """The series' runs oldest first: the measures as a chart and a table, the misses by
    cause from each run's latest triage at the depth."""
    return _series(request, session, principal, golden_set_id, name, k, depth)


@router.get("/golden-sets/{golden_set_id}/series", name="series_page_by_parameter")
def series_page_by_parameter(
    request: Request,
    session: SessionDep,
    principal: ReviewerDep,
    golden_set_id: Id,
    name: Annotated[str, Query(min_length=1, max_length=MAX_SERIES)],
    k: Cutoff = DEFAULT_K,
    depth: Cutoff = DEFAULT_DEPTH,
) -> HTMLResponse:
    """The series page of the series ``?name=`` (any name, ``..`` too)."""
    return _series(request, session, principal, golden_set_id, name, k, depth)


def _series(
    request: Request,
    session: SessionDep,
    principal: ReviewerDep,
    golden_set_id: int,
    name: str,
    k: int,
    depth: int,
) -> HTMLResponse:
    golden = golden_service.get_golden_set(session=session, golden_set_id=golden_set_id)
    history = series_history(session=session, golden=golden, series=name, k=k, depth=depth)
    return render(
        request,
        "series.html",
        {
            "golden": GoldenSetPublic.of(golden),
            "history": history,
            "chart": series_chart(_chart_lines(history)),
            "measures": (f"R@{k}", f"R@{depth}", f"nDCG@{k}"),
        },
        principal=principal,
    )
