"""The pair-review page: one sampled pair of a detector run at a time, both documents side by
side with their differences marked, judged "same content" or "different" from the keyboard
(1, 2, s), like the miss review page (app.js binds the ``data-key`` buttons of ``#review``).

The page claims nothing as it loads: the caller's current pair, else a button that claims the
next one with a POST. Every action answers the card to show next (HTMX swaps ``#review``),
with a message saying whether the judgment was saved."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse
from sqlmodel import Session

from app.clock import Clock
from app.http.deps import ClockDep, Principal, ReviewerDep, SessionDep, SettingsDep
from app.http.params import FormId, Id
from app.models.dedup_public import PairPublic
from app.models.golden import GoldenSetPublic
from app.services.dedup import detector_runs as detector_service
from app.services.dedup import pairs as pair_service
from app.services.errors import NotFound, ServiceError
from app.services.imports import golden_sets as golden_service
from app.settings import Settings
from app.web.pair_diff import MAX_WORDS, PairDiff, word_diff
from app.web.render import context_of, render

router = APIRouter(include_in_schema=False)


@dataclass(frozen=True)
class PairReviewPage:
    """What ``pair_review.html`` receives (its ``card`` block is the HTMX fragment)."""

    detector_run_id: int
    golden: GoldenSetPublic
    pair: PairPublic | None
    diff: PairDiff | None
    max_words: int
    #: The caller holds no pair and has not asked for one yet: the "Start" button.
    start: bool
    #: Sampled pairs the caller may still review, and the run's reviewed pairs.
    left: int
    reviewed: int
    message: str | None
    tone: str


def _card(
    request: Request,
    session: Session,
    principal: Principal,
    detector_run_id: int,
    pair: PairPublic | None,
    *,
    start: bool = False,
    message: str | None = None,
    tone: str = "ok",
    status: int = 200,
    error_code: str | None = None,
) -> HTMLResponse:
    run = detector_service.get_detector_run(session=session, detector_run_id=detector_run_id)
    golden = golden_service.get_golden_set(session=session, golden_set_id=run.golden_set_id)
    reviewed = 0
    if pair is None and not start:
        reviewed = detector_service.public(session=session, run=run).reviewed
    page = PairReviewPage(
        detector_run_id=detector_run_id,
        golden=GoldenSetPublic.of(golden),
        pair=pair,
        diff=None if pair is None else word_diff(pair.a.text, pair.b.text),
        max_words=MAX_WORDS,
        start=start,
        left=pair_service.left_for(session=session, run=run, user=principal.user),
        reviewed=reviewed,
        message=message,
        tone=tone,
    )
    response = render(
        request,
        "pair_review.html",
        context_of(page),
        principal=principal,
        status=status,
        error_code=error_code,
        block="card",
    )
    response.headers["Cache-Control"] = "no-store"
    return response


def _of_run(session: Session, pair_id: int, detector_run_id: int) -> None:
    """A form names a pair of this page's run, or none (never another run's)."""
    if pair_service.get_pair(session=session, pair_id=pair_id).detector_run_id != detector_run_id:
        raise NotFound(
            f"no pair {pair_id} in detector run {detector_run_id}", code="pair_not_found"
        )


def _next(
    session: Session, settings: Settings, clock: Clock, principal: Principal, run_id: int
) -> PairPublic | None:
    """The caller's current pair (renewed), else the next one, leased to them."""
    run = detector_service.get_detector_run(session=session, detector_run_id=run_id)
    pair = pair_service.claim(
        session=session,
        run=run,
        user=principal.user,
        now=clock.now(),
        lease=timedelta(seconds=settings.lease_seconds),
    )
    return None if pair is None else pair_service.pair_public(session=session, pair=pair)


@router.get("/detector-runs/{detector_run_id}/review", name="pair_review_page")
def pair_review_page(
    request: Request,
    session: SessionDep,
    clock: ClockDep,
    principal: ReviewerDep,
    detector_run_id: Id,
) -> HTMLResponse:
    """The pair the caller holds, else a button that claims the next one (a GET leases
    nothing: a prefetch or a crawler takes no pair from anybody)."""
    run = detector_service.get_detector_run(session=session, detector_run_id=detector_run_id)
    held = pair_service.current(session=session, run=run, user=principal.user, now=clock.now())
    shown = None if held is None else pair_service.pair_public(session=session, pair=held)
    return _card(request, session, principal, detector_run_id, shown, start=held is None)


@router.post("/detector-runs/{detector_run_id}/review/claim", name="pair_review_claim")
def pair_review_claim(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    detector_run_id: Id,
) -> HTMLResponse:
    pair = _next(session, settings, clock, principal, detector_run_id)
    return _card(request, session, principal, detector_run_id, pair)


@router.post("/detector-runs/{detector_run_id}/review/label", name="pair_review_label")
def pair_review_label(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    detector_run_id: Id,
    pair_id: FormId,
    version: Annotated[int, Form()],
    same: Annotated[bool, Form()],
) -> HTMLResponse:
    """Judge the pair, then claim the next. A pair changed since it was shown (409) is shown
    again as it stands, the judgment not saved and said so."""
    judged = "the same content" if same else "different"
    try:
        _of_run(session, pair_id, detector_run_id)
        labelled = pair_service.label(
            session=session,
            pair_id=pair_id,
            same=same,
            version=version,
            user=principal.user,
            now=clock.now(),
        )
    except ServiceError as exc:
        failed = f"Your judgment ({judged}) was NOT saved: {exc.message}."
        if exc.code == "stale_version":
            failed += " Here is the pair as it stands now: judge it again."
        else:
            failed += " Here is your next pair."
        return _card(
            request,
            session,
            principal,
            detector_run_id,
            _next(session, settings, clock, principal, detector_run_id),
            message=failed,
            tone="error",
            status=exc.status,
            error_code=exc.code,
        )
    saved = f"Saved: {labelled.doc_a} / {labelled.doc_b} judged {judged}."
    return _card(
        request,
        session,
        principal,
        detector_run_id,
        _next(session, settings, clock, principal, detector_run_id),
        message=saved,
    )


@router.post("/detector-runs/{detector_run_id}/review/skip", name="pair_review_skip")
def pair_review_skip(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    detector_run_id: Id,
    pair_id: FormId,
) -> HTMLResponse:
    """Pass the held pair to the other reviewers, then claim the next."""
    try:
        _of_run(session, pair_id, detector_run_id)
        pair_service.skip(session=session, pair_id=pair_id, user=principal.user, now=clock.now())
    except ServiceError as exc:
        return _card(
            request,
            session,
            principal,
            detector_run_id,
            _next(session, settings, clock, principal, detector_run_id),
            message=f"Not skipped: {exc.message}.",
            tone="error",
            status=exc.status,
            error_code=exc.code,
        )
    return _card(
        request,
        session,
        principal,
        detector_run_id,
        _next(session, settings, clock, principal, detector_run_id),
        message="Skipped: the pair goes to the other reviewers.",
    )
