"""The adjudicator's page: one disputed miss at a time, with the review card's evidence and
every reviewer's label and note side by side; keys pick the final cause (as on the review
page), HTMX swaps the next disputed miss in."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import Session

from app.clock import Clock
from app.http.deps import ClockDep, Principal, ReviewerDep, SessionDep, SettingsDep
from app.http.params import FormId, Id
from app.models import OTHER
from app.models.triage_public import AdjudicationCase, TriageContext
from app.services import queue
from app.services.errors import ServiceError
from app.services.queue.lifecycle import Stage, check_adjudicator
from app.services.triage import closure
from app.services.triage import triages as triage_service
from app.services.views import review as review_service
from app.settings import Settings
from app.web import copy
from app.web.render import redirect, render

router = APIRouter(include_in_schema=False)
KEYS = "123456789"


def _adjudicator(principal: Principal) -> None:
    check_adjudicator(principal.user)


def _card(
    request: Request,
    session: Session,
    principal: Principal,
    ctx: TriageContext,
    case: AdjudicationCase | None,
    *,
    message: str | None = None,
    tone: str = "info",
    status: int = 200,
    error_code: str | None = None,
    loading: bool = False,
) -> HTMLResponse:
    card = (
        review_service.build_card(session=session, ctx=ctx, miss_id=case.id)
        if case is not None
        else None
    )
    return render(
        request,
        "adjudication.html",
        {
            "triage": ctx.triage,
            "run": ctx.run,
            "golden": ctx.golden,
            "case": case,
            "card": card,
            "causes": list(zip(KEYS, ctx.causes, strict=False)),
            "other": OTHER,
            "message": message,
            "tone": tone,
            "waiting": closure.tally_of(
                session=session, triage=ctx.triage, causes=ctx.causes
            ).stages[Stage.DISPUTED],
            "loading": loading,
        },
        principal=principal,
        status=status,
        error_code=error_code,
        block="card",
    )


def _back(request: Request, ctx: TriageContext, response: HTMLResponse) -> Response:
    """HTMX gets the card; a plain form post (no JavaScript) goes back to the page."""
    if request.headers.get("hx-request"):
        return response
    return redirect(request, request.url_for("adjudication_page", triage_id=ctx.triage_id).path)


@router.get("/triages/{triage_id}/adjudication", name="adjudication_page")
def adjudication_page(
    request: Request, session: SessionDep, principal: ReviewerDep, triage_id: Id
) -> HTMLResponse:
    """Shows the page and claims nothing: the card claims the next disputed miss with a POST
    as it loads (HTMX; a button without JavaScript)."""
    _adjudicator(principal)
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    return _card(request, session, principal, ctx, None, loading=True)


@router.post("/triages/{triage_id}/adjudication/take", name="adjudication_take")
def adjudication_take(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    triage_id: Id,
) -> Response:
    """Lease the caller's next disputed miss (their current one first) and answer its card."""
    _adjudicator(principal)
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    case = _next(session, settings, clock, ctx, principal)
    return _back(request, ctx, _card(request, session, principal, ctx, case))


@router.post("/triages/{triage_id}/adjudication/decide", name="adjudication_decide")
def adjudication_decide(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    triage_id: Id,
    miss_id: FormId,
    version: Annotated[int, Form()],
    category: Annotated[str, Form()],
    note: Annotated[str, Form()] = "",
) -> Response:
    """The final label of the disputed miss, then the next disputed miss's card. A refusal
    (a stale version, a lost lease) says so on the card and moves nothing on."""
    _adjudicator(principal)
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    try:
        decided = queue.adjudicate(
            session=session,
            miss_id=miss_id,
            user=principal.user,
            category=category,
            note=note,
            version=version,
            now=clock.now(),
            triage_id=ctx.triage_id,
        )
    except ServiceError as exc:
        shown = copy.truncate_words(category, 100)
        # the caller's current disputed miss (the same one, unless its lease was lost)
        response = _card(
            request,
            session,
            principal,
            ctx,
            _next(session, settings, clock, ctx, principal),
            message=f"Your decision ({shown}) was NOT saved: {exc.message}.",
            tone="error",
            status=exc.status,
            error_code=exc.code,
        )
        return _back(request, ctx, response)
    case = _next(session, settings, clock, ctx, principal)
    message = f"Decided: {decided.qid} / {decided.doc_id} is {copy.label(decided.category)}."
    return _back(request, ctx, _card(request, session, principal, ctx, case, message=message))


def _next(
    session: Session, settings: Settings, clock: Clock, ctx: TriageContext, principal: Principal
) -> AdjudicationCase | None:
    return queue.claim_adjudication(
        session=session,
        triage_id=ctx.triage_id,
        user=principal.user,
        now=clock.now(),
        lease=timedelta(seconds=settings.lease_seconds),
    )
