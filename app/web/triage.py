"""The triage dashboard, the backlog, and one miss with its audit trail (lead relabel)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import datetime
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import Session

from app.exporters import REGISTRY, Tracker, missing_credentials, tracker_named
from app.http.deps import ClockDep, LeadDep, Principal, ReviewerDep, SessionDep, SettingsDep
from app.http.params import Id, Page, PerPage
from app.models import OTHER, MissState
from app.models.exports import ExportAction, ExportOutcome, ExportResult
from app.models.triage_public import TriageContext
from app.services import queue
from app.services.delivery import exports as export_service
from app.services.errors import ServiceError
from app.services.imports import golden_sets as golden_service
from app.services.imports.detector_refs import live_ref
from app.services.triage import carry, dashboard
from app.services.triage import triages as triage_service
from app.services.views.review import build_card
from app.settings import Settings
from app.web import copy
from app.web.dashboard import ExportPanel, dashboard_page, export_flash, export_panel
from app.web.render import is_fragment_request, path_for, redirect, render

router = APIRouter(include_in_schema=False)
PER_PAGE = 50


def miss_url_prefix(request: Request) -> str:
    """``/misses/`` as a path: one url_for per page instead of one per row."""
    return path_for(request, "miss_page", miss_id=0).removesuffix("0")


@router.get("/triages/{triage_id}", name="triage_page")
def triage_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    triage_id: Id,
) -> HTMLResponse:
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    return dashboard_page(request, session, settings, clock.now(), principal, ctx)


@router.get("/triages/{triage_id}/export-preview", name="export_preview")
def export_preview(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: LeadDep,
    triage_id: Id,
    tracker: str = "github",
    target: str = "",
) -> Response:
    """The dashboard with a dry run of an export: the exact requests, credentials masked
    or absent; it sends nothing and writes nothing, so it is a GET that survives reloads."""
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    return _export(request, session, settings, clock.now(), principal, ctx, tracker, target, False)


@router.post("/triages/{triage_id}/exports", name="export_form")
def export_form(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: LeadDep,
    triage_id: Id,
    tracker: Annotated[str, Form()],
    target: Annotated[str, Form()],
    action: Annotated[str, Form()] = "preview",
) -> Response:
    """Push the backlog, or preview it (``action=preview``). For HTMX every answer is the
    export panel swapped in place: the preview, the reason nothing was sent (400), or what
    the push did. Without JavaScript a push answers with a redirect to the dashboard's
    ``#export`` (post/redirect/get: a reload pushes nothing), the panel saying what happened
    and the form keeping what was entered; a refused one with the dashboard and the reason
    next to the form; a preview redirects to the dry run's own URL. A webhook's URL never
    goes into an address (the bar, the history, an access log: its path or query may be
    its secret): its preview answers here, and the address stays the dashboard's."""
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    push = action == "push"
    secret_target = tracker == Tracker.WEBHOOK
    if not push and not secret_target and not is_fragment_request(request):
        return redirect(request, _preview_url(request, triage_id, tracker, target))
    response = _export(
        request, session, settings, clock.now(), principal, ctx, tracker, target, push
    )
    if is_fragment_request(request) and response.status_code == 200:
        # a reload shows the same: the dry run's own URL, or the dashboard after a push
        shown = (
            f"{request.url_for('triage_page', triage_id=triage_id).path}#export"
            if push or secret_target
            else _preview_url(request, triage_id, tracker, target)
        )
        response.headers["HX-Replace-Url"] = shown
    return response


def _preview_url(request: Request, triage_id: int, tracker: str, target: str) -> str:
    """The dry run's own URL (a GET), scrolled to the export panel."""
    preview = request.url_for("export_preview", triage_id=triage_id).path
    query = urlencode({"tracker": tracker, "target": target.strip()})
    return f"{preview}?{query}#export"


def _export(
    request: Request,
    session: Session,
    settings: Settings,
    now: datetime,
    principal: Principal,
    ctx: TriageContext,
    tracker: str,
    target: str,
    push: bool,
) -> Response:
    """Preview (dry run) or push, answered by the dashboard with the outcome or the reason
    nothing was sent next to the form."""
    entered = ExportPanel(tracker=tracker, target=target.strip())

    def refused(message: str, status: int, code: str) -> HTMLResponse:
        return export_panel(
            request,
            session,
            settings,
            now,
            principal,
            ctx,
            export=replace(entered, error=message),
            status=status,
            error_code=code,
        )

    chosen = tracker_named(tracker)
    if chosen is None:
        return refused(f"Choose one of {', '.join(Tracker)}.", 400, "unknown_tracker")
    missing = missing_credentials(chosen, settings)
    if push and missing:
        return refused(
            f"Nothing was sent: a push to {REGISTRY[chosen].title} needs "
            f"{' and '.join(missing)} in the server's settings. The preview works without.",
            400,
            "credentials_missing",
        )
    try:
        outcome = export_service.export(
            session=session,
            settings=settings,
            triage_id=ctx.triage_id,
            tracker=chosen,
            target=entered.target,
            dry_run=not push,
        )
    except ServiceError as exc:
        return refused(exc.message, exc.status, exc.code)
    if push:
        failed = any(r.action is ExportAction.FAILED for r in outcome.results)
        sentence = _pushed_sentence(chosen, entered.target, outcome.results)
        if not is_fragment_request(request):
            dashboard_url = request.url_for("triage_page", triage_id=ctx.triage.id).path
            return redirect(
                request,
                f"{dashboard_url}#export",
                flash=sentence,
                kind="error" if failed else "ok",
                form=export_flash(chosen.value, entered.target),
            )
        entered = replace(entered, message=sentence, failed=failed)
    else:
        entered = replace(entered, message=_previewed_sentence(chosen, entered.target, outcome))
    return export_panel(
        request, session, settings, now, principal, ctx, export=replace(entered, outcome=outcome)
    )


def _pushed_sentence(tracker: Tracker, target: str, results: list[ExportResult]) -> str:
    """What a push did, shown in the export panel: "Created 3 issues on GitHub acme/search,
    updated 0, 0 unchanged." (a webhook's are deliveries: it has no issues)."""

    def count(action: ExportAction) -> int:
        return sum(1 for r in results if r.action is action)

    created = count(ExportAction.CREATE)
    sentence = (
        f"Created {_written(tracker, created)} on {_where(tracker, target)}, "
        f"updated {count(ExportAction.UPDATE)}, "
        f"{count(ExportAction.UNCHANGED)} unchanged"
    )
    failed = [r for r in results if r.action is ExportAction.FAILED]
    if failed:
        causes = ", ".join(r.category for r in failed)
        sentence += f"; {len(failed)} failed ({causes}): push again to complete them"
    return sentence + "."


def _previewed_sentence(tracker: Tracker, target: str, outcome: ExportOutcome) -> str:
    """What a preview found, in the panel: "Nothing was sent. A push would create 2 issues on
    GitHub acme/search and update 1." (or why there is nothing to send)."""
    if not outcome.results:
        return (
            "Nothing was sent: no miss of this triage has a final label yet, so there is "
            "no issue to write."
        )
    counts = Counter(r.action for r in outcome.results)
    parts = [
        f"{verb} {_written(tracker, n)}"
        for action, verb in (
            (ExportAction.CREATE, "create"),
            (ExportAction.UPDATE, "update"),
        )
        if (n := counts[action])
    ]
    unchanged = counts[ExportAction.UNCHANGED]
    said = " and ".join(parts) if parts else "change nothing"
    tail = f" ({unchanged} unchanged)" if unchanged and parts else ""
    return f"Nothing was sent. A push would {said} on {_where(tracker, target)}{tail}."


def _written(tracker: Tracker, n: int) -> str:
    """What an export writes, counted: "2 issues", "1 delivery" (a webhook has no issues)."""
    if tracker is Tracker.WEBHOOK:
        return f"{n} {'delivery' if n == 1 else 'deliveries'}"
    return f"{n} {'issue' if n == 1 else 'issues'}"


def _where(tracker: Tracker, target: str) -> str:
    """The tracker and target as the panel says them ("GitHub acme/search"), a webhook's URL
    past its host elided (it may carry its secret)."""
    return f"{REGISTRY[tracker].title} {export_service.shown_target(tracker, target)}"


@router.post("/triages/{triage_id}/leases/{miss_id}/release", name="release_lease_form")
def release_lease(
    request: Request,
    session: SessionDep,
    clock: ClockDep,
    principal: LeadDep,
    triage_id: Id,
    miss_id: Id,
) -> Response:
    queue.release(
        session=session, miss_id=miss_id, user=principal.user, now=clock.now(), triage_id=triage_id
    )
    return redirect(
        request,
        request.url_for("triage_page", triage_id=triage_id).path,
        flash=f"lease on miss {miss_id} released",
    )


@router.post("/triages/{triage_id}/covered", name="covered_form")
def covered_form(
    request: Request,
    session: SessionDep,
    clock: ClockDep,
    principal: LeadDep,
    triage_id: Id,
    include: Annotated[bool, Form()],
) -> Response:
    """Put the misses covered by a duplicate on the queue, or take them back off it."""
    queue.include_covered(
        session=session, triage_id=triage_id, user=principal.user, include=include, now=clock.now()
    )
    said = "covered misses put on the queue" if include else "covered misses taken off the queue"
    return redirect(request, request.url_for("triage_page", triage_id=triage_id).path, flash=said)


@router.post("/triages/{triage_id}/carried", name="carried_form")
def carried_form(
    request: Request,
    session: SessionDep,
    clock: ClockDep,
    principal: LeadDep,
    triage_id: Id,
    category: Annotated[str, Form(max_length=100)] = "",
    miss_id: Annotated[int | None, Form(ge=1, le=2**63 - 1)] = None,
) -> Response:
    """Send the carried misses (all, those of one cause, or one miss) back to the queue."""
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    moved = carry.send_back(
        session=session,
        ctx=ctx,
        user=principal.user,
        now=clock.now(),
        category=category or None,
        miss_id=miss_id,
    )
    which = f" in {copy.label(category)}" if category else ""
    said = f"{copy.count(moved, 'carried miss')}{which} sent back to the queue"
    if miss_id is not None:
        back = request.url_for("miss_page", miss_id=miss_id).path
        return redirect(request, back, flash=said)
    return redirect(request, request.url_for("triage_page", triage_id=triage_id).path, flash=said)


@router.get("/triages/{triage_id}/backlog", name="backlog_page")
def backlog_page(
    request: Request,
    session: SessionDep,
    principal: ReviewerDep,
    triage_id: Id,
    cause: str = "",
    qid: str = "",
    reviewer: str = "",
    state: str = "",
    sort: str = "position",
    page: Page = 1,
    per_page: PerPage = PER_PAGE,
) -> HTMLResponse:
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    rows, total = dashboard.backlog(
        session=session,
        triage=ctx.triage,
        cause=cause,
        qid=qid.strip(),
        reviewer=reviewer,
        state=state if state in {*dashboard.STATE_FILTERS, dashboard.SKIPPED} else "",
        sort=sort if sort in dashboard.BACKLOG_SORTS else "position",
        page=max(page, 1),
        per_page=per_page,
    )
    pages = max(1, -(-total // per_page))
    texts = golden_service.query_texts(
        session=session, golden=ctx.golden, qids={r.miss.qid for r in rows}
    )
    return render(
        request,
        "backlog.html",
        {
            "triage": ctx.triage,
            "run": ctx.run,
            "golden": ctx.golden,
            "rows": rows,
            "total": total,
            "page": min(max(page, 1), pages),
            "pages": pages,
            "filters": {
                "cause": cause,
                "qid": qid,
                "reviewer": reviewer,
                "state": state,
                "sort": sort,
                "per_page": per_page,
            },
            "causes": [*ctx.causes, OTHER, "unlabelled", MissState.COVERED.value],
            # what decided the covered misses: the clusters the triage was made with
            "covered_from": live_ref(
                session=session,
                detector_run_id=ctx.triage.detector_run_id,
                threshold=ctx.triage.detector_threshold,
            )
            if cause == MissState.COVERED.value
            else None,
            "states": [*dashboard.STATE_FILTERS, dashboard.SKIPPED],
            "reviewers": dashboard.reviewers(session=session, triage=ctx.triage),
            "texts": texts,
            "miss_url": miss_url_prefix(request),
            "sorts": list(dashboard.BACKLOG_SORTS),
        },
        principal=principal,
    )


def _miss_page(
    request: Request,
    session: Session,
    principal: Principal,
    miss_id: int,
    *,
    message: str | None = None,
    status: int = 200,
    error_code: str | None = None,
) -> HTMLResponse:
    miss, ctx, stage = triage_service.miss_context(session=session, miss_id=miss_id)
    events = queue.audit_trail(session=session, miss_id=miss.id, viewer=principal.user)
    return render(
        request,
        "miss.html",
        {
            "triage": ctx.triage,
            "run": ctx.run,
            "golden": ctx.golden,
            "miss": miss,
            "stage": stage.value,
            "events": events,
            "people": queue.who_did(session=session, events=events),
            "message": message,
            "causes": [*ctx.causes, OTHER],
            # the review card's evidence: the query, the document, what ranked first
            "card": build_card(session=session, ctx=ctx, miss_id=miss.id),
            "is_lead": principal.role.allows_lead,
        },
        principal=principal,
        status=status,
        error_code=error_code,
    )


@router.get("/misses/{miss_id}", name="miss_page")
def miss_page(
    request: Request, session: SessionDep, principal: ReviewerDep, miss_id: Id
) -> HTMLResponse:
    return _miss_page(request, session, principal, miss_id)


@router.post("/misses/{miss_id}/relabel", name="relabel_form")
def relabel(
    request: Request,
    session: SessionDep,
    clock: ClockDep,
    principal: LeadDep,
    miss_id: Id,
    category: Annotated[str, Form()],
    version: Annotated[int, Form()],
    note: Annotated[str, Form()] = "",
) -> Response:
    try:
        queue.label(
            session=session,
            miss_id=miss_id,
            user=principal.user,
            category=category,
            note=note,
            version=version,
            now=clock.now(),
        )
    except ServiceError as exc:
        return _miss_page(
            request,
            session,
            principal,
            miss_id,
            message=f"Not saved: {exc.message}.",
            status=exc.status,
            error_code=exc.code,
        )
    return redirect(request, request.url_for("miss_page", miss_id=miss_id).path)
