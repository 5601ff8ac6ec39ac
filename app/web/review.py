"""The reviewer's page: one miss at a time, keyboard first, HTMX swaps the next one in.

Every answer to a review action is the card (``#review``) to show next, with a message when
something went wrong: the reviewer is always told whether the label was saved.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from app.http.deps import (
    ClockDep,
    ReviewerDep,
    ReviewerOrNoneDep,
    SessionDep,
    SettingsDep,
)
from app.http.lanes import on_queue_lane
from app.http.params import FormId, Id
from app.services import queue
from app.services.errors import ServiceError
from app.services.triage import triages as triage_service
from app.web import copy, review_card

router = APIRouter(include_in_schema=False)


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
    held = queue.current(
        session=session, triage_id=ctx.triage_id, user=principal.user, now=clock.now()
    )
    return review_card.card(request, session, principal, ctx, held, loading=held is None)


@router.post("/triages/{triage_id}/review/claim", name="review_claim")
@on_queue_lane
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
        return review_card.expired(request, None)
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    miss = review_card.next_miss(session, settings, clock.now(), ctx, principal)
    return review_card.card_or_back(
        request, ctx, review_card.card(request, session, principal, ctx, miss)
    )


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
        return review_card.expired(request, "taking back your skipped misses")
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    taken = queue.take_back(
        session=session, triage=ctx.triage, user=principal.user, now=clock.now()
    ).taken_back
    they = copy.agree(taken, "it is", "they are")
    response = review_card.card(
        request,
        session,
        principal,
        ctx,
        review_card.next_miss(session, settings, clock.now(), ctx, principal),
        message=f"Took back {copy.count(taken, 'skipped miss')}: {they} on your queue again.",
    )
    return review_card.card_or_back(request, ctx, response)


@router.post("/triages/{triage_id}/review/label", name="review_label")
@on_queue_lane
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
        return review_card.expired(request, f"your label ({shown})")
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
            now=clock.now(),
            lease=timedelta(seconds=settings.lease_seconds),
            triage_id=ctx.triage_id,
        )
    except ServiceError as exc:
        failed = f"Your label ({shown}) was NOT saved: {exc.message}."
        if exc.code == "note_required" or exc.code == "unknown_category":
            current = triage_service.find_miss(session=session, miss_id=miss_id)
            return review_card.card(
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
        return review_card.card(
            request,
            session,
            principal,
            ctx,
            review_card.next_miss(session, settings, clock.now(), ctx, principal),
            message=failed + " Here is your next miss.",
            tone="error",
            status=exc.status,
            error_code=exc.code,
        )
    # your own label (with double review the miss's final label may not be decided yet), by
    # its name: the label was checked against the causes, so it is one of ours
    labelled = done.labelled
    saved = f"Saved: {labelled.qid} / {labelled.doc_id} is {copy.label(category)}."
    saved += copy.double_review_outcome(labelled.reviewers, labelled.state)
    return review_card.card(request, session, principal, ctx, done.next, message=saved)


@router.post("/triages/{triage_id}/review/skip", name="review_skip")
@on_queue_lane
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
        return review_card.expired(request, "your skip")
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    try:
        queue.skip(
            session=session,
            miss_id=miss_id,
            user=principal.user,
            reason=reason,
            now=clock.now(),
            triage_id=ctx.triage_id,
        )
    except ServiceError as exc:
        # the caller's own miss (still theirs when only the reason was missing), never the
        # one the form named: it may be another triage's
        return review_card.card(
            request,
            session,
            principal,
            ctx,
            review_card.next_miss(session, settings, clock.now(), ctx, principal),
            message=f"Not skipped: {exc.message}.",
            tone="error",
            status=exc.status,
            error_code=exc.code,
        )
    return review_card.card(
        request,
        session,
        principal,
        ctx,
        review_card.next_miss(session, settings, clock.now(), ctx, principal),
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
        return review_card.expired(request, "your undo")
    ctx = triage_service.triage_context(session=session, triage_id=triage_id)
    try:
        miss = queue.undo(
            session=session,
            triage_id=ctx.triage_id,
            user=principal.user,
            now=clock.now(),
            lease=timedelta(seconds=settings.lease_seconds),
        )
    except ServiceError as exc:
        return review_card.card(
            request,
            session,
            principal,
            ctx,
            review_card.next_miss(session, settings, clock.now(), ctx, principal),
            message=f"Nothing undone: {exc.message}.",
            tone="error",
            status=exc.status,
            error_code=exc.code,
        )
    return review_card.card(
        request,
        session,
        principal,
        ctx,
        miss,
        message=f"Undone: {miss.qid} / {miss.doc_id} is unlabelled again.",
    )


@router.post("/triages/{triage_id}/review/renew", name="review_renew")
@on_queue_lane
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
        response = review_card.notice(
            request, "heartbeat_expired", status=401, code="session_expired"
        )
        response.headers.update(review_card.RETARGET)
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
        response = review_card.notice(request, "lease_lost", status=409, code="lease_not_held")
        response.headers.update(review_card.RETARGET)
        return response
    return Response(status_code=204)
