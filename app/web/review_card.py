"""The review card: what every review action answers (the miss to show next, with a message
when something went wrong), the next miss for the card, and the notices for a lost session
or lease."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import Session

from app.http.deps import Principal, clock_of
from app.models import CANT_TELL, OTHER, Role
from app.models.triage_public import MissPublic, TriageContext
from app.services import queue
from app.services.queue.tally import person_labels
from app.services.views import review as review_service
from app.settings import Settings
from app.web import copy
from app.web.render import context_of, error_page, is_fragment_request, redirect, render, templates

KEYS = "123456789"
#: Heartbeat answers go to the status line above the card, not into the card.
RETARGET = {"HX-Retarget": "#review-status", "HX-Reswap": "innerHTML"}


@dataclass(frozen=True)
class ReviewProgress:
    """The line above every card: the caller's labels in force, the misses with a final
    label of those on the queue, and those still without one (the queue's tally)."""

    yours: int
    final: int
    queued: int
    to_go: int


@dataclass(frozen=True)
class ReviewPage:
    """What ``review.html`` receives (its ``card`` block is the HTMX fragment)."""

    #: The triage, its run and golden set (``triage``, ``run``, ``golden`` in the template).
    ctx: TriageContext
    card: review_service.ReviewCard | None
    causes: list[tuple[str, str]]
    other: str
    cant_tell: str
    message: str | None
    tone: str
    progress: ReviewProgress
    is_lead: bool
    loading: bool
    #: At the queue's end: why each miss still without a final label is not the caller's.
    waiting: list[str]
    skipped_waiting: int


def card(
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
    """The card of ``miss`` (None: the queue has nothing for the caller, or ``loading``:
    the card that claims the next one as it loads), with the caller's progress."""
    now = clock_of(request).now()
    page = review_page(
        session, principal, ctx, miss, now=now, message=message, tone=tone, loading=loading
    )
    return render(
        request,
        "review.html",
        context_of(page),
        principal=principal,
        status=status,
        error_code=error_code,
        block="card",
    )


def review_page(
    session: Session,
    principal: Principal,
    ctx: TriageContext,
    miss: MissPublic | None,
    *,
    now: datetime,
    message: str | None,
    tone: str,
    loading: bool,
) -> ReviewPage:
    """``ReviewPage`` of ``miss`` for the caller."""
    user_id = principal.user.id
    assert user_id is not None
    tally = queue.triage_tally(session=session, triage_id=ctx.triage_id, causes=ctx.causes)
    waiting: list[str] = []
    skipped = 0
    if miss is None and not loading:
        person = queue.person_tally(
            session=session, triage_id=ctx.triage_id, user_id=user_id, now=now
        )
        waiting = copy.waiting_reasons(person.waiting)
        skipped = person.waiting[queue.Reason.SKIPPED]
        yours = person.labels
    else:
        yours = person_labels(session=session, triage_id=ctx.triage_id, user_id=user_id)[0]
    return ReviewPage(
        ctx=ctx,
        card=None
        if miss is None
        else review_service.build_card(session=session, ctx=ctx, miss_id=miss.id),
        causes=list(zip(KEYS, ctx.causes, strict=False)),
        other=OTHER,
        cant_tell=CANT_TELL,
        message=message,
        tone=tone,
        progress=ReviewProgress(
            yours=yours, final=tally.labelled, queued=tally.queued, to_go=tally.unlabelled
        ),
        is_lead=principal.role.allows(Role.LEAD),
        loading=loading,
        waiting=waiting,
        skipped_waiting=skipped,
    )


def next_miss(
    session: Session, settings: Settings, now: datetime, ctx: TriageContext, principal: Principal
) -> MissPublic | None:
    """The caller's next miss (their current one first), leased to them."""
    return queue.claim(
        session=session,
        triage_id=ctx.triage_id,
        user=principal.user,
        now=now,
        lease=timedelta(seconds=settings.lease_seconds),
    )


def card_or_back(request: Request, ctx: TriageContext, response: HTMLResponse) -> Response:
    """HTMX gets the card; a plain form post (no JavaScript) goes back to the page."""
    if request.headers.get("hx-request"):
        return response
    return redirect(request, request.url_for("review_page", triage_id=ctx.triage_id).path)


#: The notices in words, for a plain form post (no JavaScript), which gets a whole page.
NOTICE_PAGES = {
    "expired": "Your session has expired{what}. Log in again{repeat}.",
    "heartbeat_expired": "Your session has expired: log in again before labelling.",
    "lease_lost": "This miss is no longer yours (the lease expired). Reload the review page.",
}


def notice(
    request: Request, kind: str, *, status: int, code: str, what: str | None = None
) -> Response:
    """The notice the review card's HTMX swaps in; a page of the product for anything else."""
    if not is_fragment_request(request):
        message = NOTICE_PAGES[kind].format(
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


def expired(request: Request, what: str | None) -> Response:
    """A review action without a valid session: say plainly that nothing was saved."""
    return notice(request, "expired", status=401, code="session_expired", what=what)
