"""The reviewer's page: one miss at a time, keyboard first, HTMX swaps the next one in.

Every answer to a review action is the card (``#review``) to show next, with a message when
something went wrong: the reviewer is always told whether the label was saved.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import Session

from app.http.deps import (
    ClockDep,
    Principal,
    ReviewerDep,
    ReviewerOrNoneDep,
    SessionDep,
    SettingsDep,
)
from app.http.params import FormId, Id
from app.models import CANT_TELL, OTHER, Role
from app.models.triage_public import MissPublic, TriageContext
from app.services import queue, skips
from app.services import review as review_service
from app.services import triages as triage_service
from app.services.errors import ServiceError
from app.settings import Settings
from app.web import copy
from app.web.render import error_page, is_fragment_request, redirect, render, templates

router = APIRouter(include_in_schema=False)
KEYS = "123456789"
#: Heartbeat answers go to the status line above the card, not into the card.
RETARGET = {"HX-Retarget": "#review-status", "HX-Reswap": "innerHTML"}


def _card(
    request: Request,
    session: Session,
    principal: Principal,
    ctx: TriageContext,
    miss: MissPublic | None,
    *,
    message: str | None = None,
    tone: str = "info",
    status: int = 200,
    error_code: str | None = None,
    loading: bool = False,
) -> HTMLResponse:
    triage = ctx.triage
    card = (
        review_service.build_card(session=session, ctx=ctx, miss_id=miss.id)
        if miss is not None
        else None
    )
    causes = list(zip(KEYS, ctx.causes, strict=False))
    waiting = (
        skips.skipped_waiting(session=session, triage=triage, user=principal.user)
        if miss is None and not loading
        else 0
    )
    return render(
        request,
        "review.html",
        {
            "triage": triage,
            "run": ctx.run,
            "golden": ctx.golden,
            "card": card,
            "causes": causes,
            "other": OTHER,
            "cant_tell": CANT_TELL,
            "message": message,
            "tone": tone,
            "progress": queue.progress(session=session, triage=triage, user=principal.user),
            "is_lead": principal.role.allows(Role.LEAD),
            "loading": loading,
            "skipped_waiting": waiting,
        },
        principal=principal,
        status=status,
        error_code=error_code,
        block="card",
    )


def _next(
    session: Session, settings: Settings, now: datetime, ctx: TriageContext, principal: Principal
) -> MissPublic | None:
    return queue.claim(
        session=session,
        triage=ctx.triage,
        user=principal.user,
        now=now,
        lease=timedelta(seconds=settings.lease_seconds),
    )


@router.get("/triages/{triage_id}/review", name="review_page")
def review_page(
    request: Request,
    session: SessionDep,
    clock: ClockDep,
    principal: ReviewerDep,
    triage_id: Id,
) -> HTMLResponse:
    """Shows the page and claims nothing: the miss the caller already holds, else a card that
    claims the next one with a POST as it loads (HTMX; a button without JavaScript). A link
    from another site, a prefetch or a crawler leases no miss to anybody."""
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    held = queue.current(session=session, triage=ctx.triage, user=principal.user, now=clock.now())
    return _card(request, session, principal, ctx, held, loading=held is None)


def _card_or_back(request: Request, ctx: TriageContext, response: HTMLResponse) -> Response:
    """HTMX gets the card; a plain form post (no JavaScript) goes back to the page."""
    if request.headers.get("hx-request"):
        return response
    return redirect(request, request.url_for("review_page", triage_id=ctx.triage_id).path)


@router.post("/triages/{triage_id}/review/claim", name="review_claim")
def review_claim(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerOrNoneDep,
    triage_id: Id,
) -> Response:
    """Lease the caller's next miss (their current one first) and answer its card."""
    if principal is None:
        return _expired(request, None)
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    miss = _next(session, settings, clock.now(), ctx, principal)
    return _card_or_back(request, ctx, _card(request, session, principal, ctx, miss))


@router.post("/triages/{triage_id}/review/take-back", name="review_take_back")
def review_take_back(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerOrNoneDep,
    triage_id: Id,
) -> Response:
    """Put the misses the caller skipped back on their queue, and claim the next one."""
    if principal is None:
        return _expired(request, "taking back your skipped misses")
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    taken = skips.take_back(
        session=session, triage=ctx.triage, user=principal.user, now=clock.now()
    ).taken_back
    they = copy.agree(taken, "it is", "they are")
    response = _card(
        request,
        session,
        principal,
        ctx,
        _next(session, settings, clock.now(), ctx, principal),
        message=f"Took back {copy.count(taken, 'skipped miss')}: {they} on your queue again.",
    )
    return _card_or_back(request, ctx, response)


#: The notices in words, for a plain form post (no JavaScript), which gets a whole page.
_NOTICE_PAGES = {
    "expired": "Your session has expired{what}. Log in again{repeat}.",
    "heartbeat_expired": "Your session has expired: log in again before labelling.",
    "lease_lost": "This miss is no longer yours (the lease expired). Reload the review page.",
}


def _notice(
    request: Request, kind: str, *, status: int, code: str, what: str | None = None
) -> Response:
    """The notice the review card's HTMX swaps in; a page of the product for anything else."""
    if not is_fragment_request(request):
        message = _NOTICE_PAGES[kind].format(
            what=f": {what} was NOT saved" if what else "",
            repeat=" and repeat it" if what else "",
        )
        return error_page(request, status, code, message)
    response = templates.TemplateResponse(
        request, "_review_notice.html", {"kind": kind, "what": what}, status_code=status
    )
    assert isinstance(response, HTMLResponse)
    response.headers["X-Error-Code"] = code
    return response


def _expired(request: Request, what: str | None) -> Response:
    """A review action without a valid session: say plainly that nothing was saved."""
    return _notice(request, "expired", status=401, code="session_expired", what=what)


@router.post("/triages/{triage_id}/review/label", name="review_label")
def review_label(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerOrNoneDep,
    triage_id: Id,
    miss_id: FormId,
    version: Annotated[int, Form()],
    category: Annotated[str, Form()],
    note: Annotated[str, Form()] = "",
) -> Response:
    shown = copy.truncate_words(category, 100)
    if principal is None:
        return _expired(request, f"your label ({shown})")
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    try:
        # the label and the next card's claim in one transaction
        done = queue.label_and_claim(
            session=session,
            miss_id=miss_id,
            user=principal.user,
            category=category,
            note=note,
            version=version,
            causes=ctx.causes,
            now=clock.now(),
            lease=timedelta(seconds=settings.lease_seconds),
            triage=ctx.triage,
        )
    except ServiceError as exc:
        failed = f"Your label ({shown}) was NOT saved: {exc.message}."
        if exc.code == "note_required" or exc.code == "unknown_category":
            current = triage_service.find_miss(session=session, miss_id=miss_id)
            return _card(
                request,
                session,
                principal,
                ctx,
                current,
                message=failed,
                tone="error",
                status=exc.status,
                error_code=exc.code,
            )
        return _card(
            request,
            session,
            principal,
            ctx,
            _next(session, settings, clock.now(), ctx, principal),
            message=failed + " Here is your next miss.",
            tone="error",
            status=exc.status,
            error_code=exc.code,
        )
    # your own label (with double review the miss's final label may not be decided yet), by
    # its name: the label was checked against the causes, so it is one of ours
    labelled = done.labelled
    saved = f"Saved: {labelled.qid} / {labelled.doc_id} is {copy.label(category)}."
    return _card(request, session, principal, ctx, done.next, message=saved)


@router.post("/triages/{triage_id}/review/skip", name="review_skip")
def review_skip(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerOrNoneDep,
    triage_id: Id,
    miss_id: FormId,
    reason: Annotated[str, Form()] = "",
) -> Response:
    if principal is None:
        return _expired(request, "your skip")
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    try:
        queue.skip(
            session=session, miss_id=miss_id, user=principal.user, reason=reason, now=clock.now()
        )
    except ServiceError as exc:
        return _card(
            request,
            session,
            principal,
            ctx,
            triage_service.find_miss(session=session, miss_id=miss_id),
            message=f"Not skipped: {exc.message}.",
            tone="error",
            status=exc.status,
            error_code=exc.code,
        )
    return _card(
        request,
        session,
        principal,
        ctx,
        _next(session, settings, clock.now(), ctx, principal),
        message="Skipped: it goes to the other reviewers; you can take it back later.",
    )


@router.post("/triages/{triage_id}/review/undo", name="review_undo")
def review_undo(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerOrNoneDep,
    triage_id: Id,
) -> Response:
    if principal is None:
        return _expired(request, "your undo")
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    try:
        miss = queue.undo(
            session=session,
            triage=ctx.triage,
            user=principal.user,
            now=clock.now(),
            lease=timedelta(seconds=settings.lease_seconds),
        )
    except ServiceError as exc:
        return _card(
            request,
            session,
            principal,
            ctx,
            _next(session, settings, clock.now(), ctx, principal),
            message=f"Nothing undone: {exc.message}.",
            tone="error",
            status=exc.status,
            error_code=exc.code,
        )
    return _card(
        request,
        session,
        principal,
        ctx,
        miss,
        message=f"Undone: {miss.qid} / {miss.doc_id} is unlabelled again.",
    )


@router.post("/triages/{triage_id}/review/renew", name="review_renew")
def review_renew(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerOrNoneDep,
    triage_id: Id,
    miss_id: FormId,
) -> Response:
    """The page's heartbeat: keep the lease; say so at once if it was lost."""
    if principal is None:
        response = _notice(request, "heartbeat_expired", status=401, code="session_expired")
        response.headers.update(RETARGET)
        return response
    try:
        queue.renew(
            session=session,
            miss_id=miss_id,
            user=principal.user,
            now=clock.now(),
            lease=timedelta(seconds=settings.lease_seconds),
        )
    except ServiceError:
        response = _notice(request, "lease_lost", status=409, code="lease_not_held")
        response.headers.update(RETARGET)
        return response
    return Response(status_code=204)
