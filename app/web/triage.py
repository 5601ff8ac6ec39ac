"""The triage dashboard, the backlog, and one miss with its audit trail (lead relabel)."""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import col, select

from app.exporters import REGISTRY, Tracker, missing_credentials, tracker_named
from app.http.deps import ClockDep, LeadDep, ReviewerDep, SessionDep, SettingsDep
from app.http.params import Id, Page, PerPage
from app.models import OTHER, Miss, MissState, Triage, User
from app.services import dashboard, queue, skips
from app.services import exports as export_service
from app.services import golden_sets as golden_service
from app.services import runs as run_service
from app.services import triages as triage_service
from app.services.errors import NotFound, ServiceError
from app.services.exports import ExportAction
from app.services.review import where_of
from app.web.render import redirect, render

router = APIRouter(include_in_schema=False)
PER_PAGE = 50
SKIPS_SHOWN = 100


def miss_url_prefix(request: Request) -> str:
    """``/misses/`` as a path: one url_for per page instead of one per row."""
    return request.url_for("miss_page", miss_id=0).path.removesuffix("0")


def _context(session: Any, triage: Triage) -> dict[str, Any]:
    run = run_service.get_run(session=session, run_id=triage.run_id)
    golden = golden_service.get_golden_set(session=session, golden_set_id=run.golden_set_id)
    return {"triage": triage, "run": run, "golden": golden}


@router.get("/triages/{triage_id}", name="triage_page")
def triage_page(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    triage_id: Id,
) -> HTMLResponse:
    triage = triage_service.get_triage(session=session, triage_id=triage_id)
    return _dashboard(request, session, settings, clock, principal, triage)


def _dashboard(
    request: Request,
    session: Any,
    settings: Any,
    clock: Any,
    principal: Any,
    triage: Triage,
    *,
    export: dict[str, Any] | None = None,
    status: int = 200,
    error_code: str | None = None,
) -> HTMLResponse:
    context = _context(session, triage)
    summary = triage_service.summarise(
        session=session, triage=triage, causes=list(context["golden"].causes)
    )
    residue, residue_total = dashboard.residue(session=session, triage=triage)
    texts = golden_service.query_texts(
        session=session, golden=context["golden"], qids={r.miss.qid for r in residue}
    )
    skipped = skips.skips(session=session, triage=triage, open_only=True)
    largest = max([*summary.counts.values(), summary.other, summary.unlabelled, 1])
    return render(
        request,
        "triage.html",
        context
        | {
            "summary": summary,
            "largest": largest,
            "residue": residue,
            "residue_total": residue_total,
            "texts": texts,
            "throughput": dashboard.throughput(session=session, triage=triage),
            "hints": dashboard.hint_accuracy(session=session, triage=triage),
            "covered_on_queue": triage_service.covered_on_queue(session=session, triage=triage),
            "leases": dashboard.live_leases(session=session, triage=triage, now=clock.now()),
            "labelled": triage.misses - summary.unlabelled - summary.covered,
            "queued": triage.misses - summary.covered,
            "is_lead": principal.role.allows_lead,
            "miss_url": miss_url_prefix(request),
            "trackers": list(Tracker),
            "tracker_names": {t: REGISTRY[t].title for t in Tracker},
            "exports": export_service.stored(session=session, triage=triage),
            "export": export or {"tracker": Tracker.GITHUB, "target": ""},
            "credentials": {t: REGISTRY[t].credentials for t in Tracker},
            "missing": {t: missing_credentials(t, settings) for t in Tracker},
            "skipped": skipped[:SKIPS_SHOWN],
            "skipped_total": len(skipped),
        },
        principal=principal,
        status=status,
        error_code=error_code,
    )


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
    triage = triage_service.get_triage(session=session, triage_id=triage_id)
    return _export(request, session, settings, clock, principal, triage, tracker, target, False)


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
    """Push the backlog; a successful push answers with a redirect to the dashboard and a
    message (post/redirect/get: a reload pushes nothing), a refused one with the dashboard
    and the reason next to the form. ``action=preview`` redirects to the dry run's own URL."""
    triage = triage_service.get_triage(session=session, triage_id=triage_id)
    if action != "push":
        preview = request.url_for("export_preview", triage_id=triage_id).path
        query = urlencode({"tracker": tracker, "target": target})
        return redirect(request, f"{preview}?{query}#export")
    return _export(request, session, settings, clock, principal, triage, tracker, target, True)


def _export(
    request: Request,
    session: Any,
    settings: Any,
    clock: Any,
    principal: Any,
    triage: Triage,
    tracker: str,
    target: str,
    push: bool,
) -> Response:
    """Preview (dry run) or push, answered by the dashboard with the outcome or the reason
    nothing was sent next to the form."""
    context = _context(session, triage)
    form: dict[str, Any] = {"tracker": tracker, "target": target.strip()}

    def refused(message: str, status: int, code: str) -> HTMLResponse:
        form["error"] = message
        return _dashboard(
            request,
            session,
            settings,
            clock,
            principal,
            triage,
            export=form,
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
            triage=triage,
            run=context["run"],
            golden=context["golden"],
            tracker=chosen,
            target=form["target"],
            dry_run=not push,
        )
    except ServiceError as exc:
        return refused(exc.message, exc.status, exc.code)
    if push:
        dashboard_url = request.url_for("triage_page", triage_id=triage.id).path
        return redirect(
            request,
            f"{dashboard_url}#exports",
            flash=_pushed_sentence(chosen, form["target"], outcome.results),
            kind="error" if any(r.action is ExportAction.FAILED for r in outcome.results) else "ok",
        )
    form |= {
        "dry_run": not push,
        "results": outcome.results,
        "requests": [
            r
            | {
                "pretty": json.dumps(r["body"], indent=2, ensure_ascii=False)
                if not isinstance(r["body"], str)
                else r["body"]
            }
            for r in outcome.requests
        ],
    }
    return _dashboard(request, session, settings, clock, principal, triage, export=form)


def _pushed_sentence(tracker: Tracker, target: str, results: list[export_service.Result]) -> str:
    """What a push did, for the message on the dashboard it redirects to."""
    actions = {
        ExportAction.CREATE: "created",
        ExportAction.UPDATE: "updated",
        ExportAction.UNCHANGED: "unchanged",
    }
    counts = [
        f"{sum(1 for r in results if r.action == action)} {word}"
        for action, word in actions.items()
    ]
    sentence = f"Pushed to {REGISTRY[tracker].title} {target}: {', '.join(counts)}"
    failed = [r for r in results if r.action is ExportAction.FAILED]
    if failed:
        causes = ", ".join(r.category for r in failed)
        sentence += f"; {len(failed)} failed ({causes}): push again to complete them"
    return sentence + "."


@router.post("/triages/{triage_id}/leases/{miss_id}/release", name="release_lease_form")
def release_lease(
    request: Request,
    session: SessionDep,
    clock: ClockDep,
    principal: LeadDep,
    triage_id: Id,
    miss_id: Id,
) -> Response:
    queue.release(session=session, miss_id=miss_id, user=principal.user, now=clock.now())
    return redirect(
        request,
        request.url_for("triage_page", triage_id=triage_id).path,
        flash=f"lease on miss {miss_id} released",
    )


@router.post("/triages/{triage_id}/covered", name="covered_form")
def covered_form(
    request: Request,
    session: SessionDep,
    principal: LeadDep,
    triage_id: Id,
    include: Annotated[bool, Form()],
) -> Response:
    """Put the misses covered by a duplicate on the queue, or take them back off it."""
    triage = triage_service.get_triage(session=session, triage_id=triage_id)
    triage_service.include_covered(session=session, triage=triage, include=include)
    said = "covered misses put on the queue" if include else "covered misses taken off the queue"
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
    triage = triage_service.get_triage(session=session, triage_id=triage_id)
    context = _context(session, triage)
    rows, total = dashboard.backlog(
        session=session,
        triage=triage,
        cause=cause,
        qid=qid.strip(),
        reviewer=reviewer,
        state=state if state in {*(s.value for s in MissState), dashboard.SKIPPED} else "",
        sort=sort if sort in dashboard.BACKLOG_SORTS else "position",
        page=max(page, 1),
        per_page=per_page,
    )
    pages = max(1, -(-total // per_page))
    texts = golden_service.query_texts(
        session=session, golden=context["golden"], qids={r.miss.qid for r in rows}
    )
    return render(
        request,
        "backlog.html",
        context
        | {
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
            "causes": [*context["golden"].causes, OTHER, "unlabelled", MissState.COVERED.value],
            "reviewers": dashboard.reviewers(session=session, triage=triage),
            "texts": texts,
            "miss_url": miss_url_prefix(request),
            "sorts": list(dashboard.BACKLOG_SORTS),
        },
        principal=principal,
    )


def _miss_page(
    request: Request,
    session: Any,
    principal: Any,
    miss: Miss,
    *,
    message: str | None = None,
    status: int = 200,
    error_code: str | None = None,
) -> HTMLResponse:
    triage = triage_service.get_triage(session=session, triage_id=miss.triage_id)
    context = _context(session, triage)
    events = queue.audit_trail(session=session, miss_id=miss.id)  # type: ignore[arg-type]
    people = {u.id: u.email for u in session.exec(_users_query(events))} if events else {}
    return render(
        request,
        "miss.html",
        context
        | {
            "miss": miss,
            "events": events,
            "people": people,
            "message": message,
            "causes": [*context["golden"].causes, OTHER],
            "where": where_of(session=session, miss=miss, triage=triage),
            "text": golden_service.query_texts(
                session=session, golden=context["golden"], qids={miss.qid}
            ).get(miss.qid),
            "is_lead": principal.role.allows_lead,
        },
        principal=principal,
        status=status,
        error_code=error_code,
    )


def _users_query(events: list[Any]) -> Any:
    ids = sorted({e.user_id for e in events if e.user_id is not None})
    return select(User).where(col(User.id).in_(ids))


@router.get("/misses/{miss_id}", name="miss_page")
def miss_page(
    request: Request, session: SessionDep, principal: ReviewerDep, miss_id: Id
) -> HTMLResponse:
    miss = session.get(Miss, miss_id)
    if miss is None:
        raise NotFound(f"no miss {miss_id}", code="miss_not_found")
    return _miss_page(request, session, principal, miss)


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
    causes = triage_service.causes_of_miss(session=session, miss_id=miss_id)
    try:
        queue.label(
            session=session,
            miss_id=miss_id,
            user=principal.user,
            category=category,
            note=note,
            version=version,
            causes=causes,
            now=clock.now(),
        )
    except ServiceError as exc:
        miss = session.get(Miss, miss_id)
        assert miss is not None
        return _miss_page(
            request,
            session,
            principal,
            miss,
            message=f"Not saved: {exc.message}.",
            status=exc.status,
            error_code=exc.code,
        )
    return redirect(request, request.url_for("miss_page", miss_id=miss_id).path)
