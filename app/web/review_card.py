"""The review card: what every review action answers (the miss to show next, with a message
when something went wrong), the next miss for the card, and the notices for a lost session
or lease."""

from __future__ import annotations

from datetime import datetime, timedelta

from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import Session

from app.http.deps import Principal
from app.models import CANT_TELL, OTHER, Role
from app.models.triage_public import MissPublic, TriageContext
from app.services import queue
from app.services.queue import skips
from app.services.views import review as review_service
from app.settings import Settings
from app.web.render import error_page, is_fragment_request, redirect, render, templates

KEYS = "123456789"
#: Heartbeat answers go to the status line above the card, not into the card.
RETARGET = {"HX-Retarget": "#review-status", "HX-Reswap": "innerHTML"}


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


def next_miss(
    session: Session, settings: Settings, now: datetime, ctx: TriageContext, principal: Principal
) -> MissPublic | None:
    """The caller's next miss (their current one first), leased to them."""
    return queue.claim(
        session=session,
        triage=ctx.triage,
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
