"""/api/v1/triages: summary with closure, and the misses."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from sqlmodel import Session

from app.api.responses import ErrorBody, answer, attachment
from app.db import end_reading
from app.exporters import Tracker
from app.http.deps import ClockDep, LeadDep, ReviewerDep, SessionDep, SettingsDep
from app.http.downloads import Download, Slot, slots_of
from app.http.lanes import on_queue_lane
from app.http.params import Id, Page, PerPage
from app.models.agreement_public import AgreementPublic
from app.models.exports import ExportOutcome
from app.models.triage_public import (
    AdjudicationCase,
    CarriedMoved,
    CoveredMoved,
    HintReport,
    MissPublic,
    TakenBack,
    TriageDetail,
)
from app.readmodel import PageOf
from app.services import queue
from app.services.delivery import exports as export_service
from app.services.errors import Invalid
from app.services.paging import DEFAULT_PER_PAGE
from app.services.triage import agreement, carry, closure, dashboard
from app.services.triage import backlog as backlog_service
from app.services.triage import triages as service
from app.settings import Settings

router = APIRouter(prefix="/triages", tags=["triages"])


@router.get("/{triage_id}", response_model=TriageDetail)
def get_triage(session: SessionDep, principal: ReviewerDep, triage_id: Id) -> TriageDetail:
    """Counts per cause, other, unlabelled, and whether the categories close."""
    return closure.triage_detail(session=session, triage_id=triage_id)


class CoveredBody(BaseModel):
    include: bool


@router.post("/{triage_id}/covered", response_model=CoveredMoved)
def include_covered(
    session: SessionDep, clock: ClockDep, principal: LeadDep, triage_id: Id, body: CoveredBody
) -> CoveredMoved:
    """Put the misses covered by a duplicate on the queue (``include``: true), or take those
    not yet labelled, leased or reviewed back off it (an ``include`` or ``exclude`` event
    each). Answers how many moved and the new summary."""
    moved = queue.include_covered(
        session=session,
        triage_id=triage_id,
        user=principal.user,
        include=body.include,
        now=clock.now(),
    )
    return CoveredMoved(
        moved=moved, triage=closure.triage_detail(session=session, triage_id=triage_id)
    )


class CarriedBody(BaseModel):
    #: Must be true: the one thing a lead does with carried labels is send them back.
    requeue: bool
    #: Only the misses carried in this cause.
    category: str | None = Field(default=None, max_length=100)
    #: Only this miss.
    miss_id: int | None = Field(default=None, ge=1, le=2**63 - 1)


@router.post("/{triage_id}/carried", response_model=CarriedMoved)
def requeue_carried(
    session: SessionDep, clock: ClockDep, principal: LeadDep, triage_id: Id, body: CarriedBody
) -> CarriedMoved:
    """Send the misses carrying a label from the series' earlier triage back to the queue,
    unlabelled: all of them, those of one ``category``, or one ``miss_id`` (a ``requeue``
    event each, keeping the carried label). Answers how many went and the new summary."""
    if not body.requeue:
        raise Invalid('nothing to do: send {"requeue": true}', code="requeue_required")
    ctx = service.triage_context(session=session, triage_id=triage_id)
    moved = carry.send_back(
        session=session,
        ctx=ctx,
        user=principal.user,
        now=clock.now(),
        category=body.category,
        miss_id=body.miss_id,
    )
    return CarriedMoved(
        requeued=moved, triage=closure.triage_detail(session=session, triage_id=triage_id)
    )


@router.get("/{triage_id}/agreement", response_model=AgreementPublic)
def triage_agreement(session: SessionDep, principal: LeadDep, triage_id: Id) -> AgreementPublic:
    """How often the reviewers agreed on the misses they double-reviewed (complete units
    only): percent agreement, Cohen's kappa (exactly two reviewers, else null), Fleiss' kappa
    and Krippendorff's alpha (nominal), each with a 95% bootstrap interval (1,000 resamples of
    the misses, seed 0), the same per cause (coded "this cause or not"), the confusion between
    causes, and each reviewer against the final labels. "Can't tell" counts as no label.
    Leads only: it names reviewers."""
    ctx = service.triage_context(session=session, triage_id=triage_id)
    return agreement.triage_agreement(session=session, triage=ctx.triage, causes=ctx.causes)


@router.get("/{triage_id}/hints", response_model=HintReport)
def hint_accuracy(session: SessionDep, principal: ReviewerDep, triage_id: Id) -> HintReport:
    """How each cause hint fared against the reviewers' labels (labelled misses only)."""
    triage = service.get_triage(session=session, triage_id=triage_id)
    return dashboard.hint_accuracy(session=session, triage=triage)


@router.get("/{triage_id}/misses", response_model=PageOf[MissPublic])
def list_misses(
    session: SessionDep,
    principal: ReviewerDep,
    triage_id: Id,
    state: str | None = None,
    category: str | None = None,
    qid: str | None = None,
    page: Page = 1,
    per_page: PerPage = DEFAULT_PER_PAGE,
) -> PageOf[MissPublic]:
    """The triage's misses in queue order, filtered by state, cause or query."""
    return service.list_misses(
        session=session,
        triage_id=triage_id,
        state=state,
        category=category,
        qid=qid,
        page=page,
        per_page=per_page,
    )


@router.post(
    "/{triage_id}/claim",
    response_model=MissPublic,
    responses={204: {"description": "nothing is left to claim"}},
)
@on_queue_lane
def claim(
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    triage_id: Id,
) -> Response:
    """The next miss for the caller, leased to them; 204 when nothing is left. With double
    review, a miss is offered to distinct reviewers until it has its labels, and never again
    to one who labelled it."""
    # the triage is read in the claim's own transaction (one per request)
    miss = queue.claim(
        session=session,
        triage_id=triage_id,
        user=principal.user,
        now=clock.now(),
        lease=timedelta(seconds=settings.lease_seconds),
    )
    if miss is None:
        return Response(status_code=204)
    return answer(miss)


@router.post(
    "/{triage_id}/adjudication/claim",
    response_model=AdjudicationCase,
    responses={204: {"description": "no disputed miss is left"}},
)
def adjudication_claim(
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    triage_id: Id,
) -> AdjudicationCase | Response:
    """The next disputed miss (its reviewers disagreed, or one could not tell) with every
    label and note, leased to the caller; 204 when none is left. Leads, and reviewers with
    the adjudicator flag (403 ``adjudicator_required`` otherwise)."""
    case = queue.claim_adjudication(
        session=session,
        triage_id=triage_id,
        user=principal.user,
        now=clock.now(),
        lease=timedelta(seconds=settings.lease_seconds),
    )
    if case is None:
        return Response(status_code=204)
    return case


@router.post("/{triage_id}/undo", response_model=MissPublic)
def undo(
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    triage_id: Id,
) -> MissPublic:
    """Undo the caller's last label in this triage."""
    return queue.undo(
        session=session,
        triage_id=triage_id,
        user=principal.user,
        now=clock.now(),
        lease=timedelta(seconds=settings.lease_seconds),
    )


@router.post("/{triage_id}/take-back", response_model=TakenBack)
def take_back(
    session: SessionDep, clock: ClockDep, principal: ReviewerDep, triage_id: Id
) -> TakenBack:
    """Put the unlabelled misses the caller skipped back on the caller's queue (claim hands
    them out again); answers how many: `{"taken_back": n}`."""
    triage = service.get_triage(session=session, triage_id=triage_id)
    return queue.take_back(session=session, triage=triage, user=principal.user, now=clock.now())


@router.get(
    "/{triage_id}/backlog",
    name="backlog_download",
    response_model=None,
    responses={
        200: {
            "description": "every miss: JSON grouped by cause, CSV or JSON lines (``format``)",
            "content": {"application/json": {}, "text/csv": {}, "application/x-ndjson": {}},
        },
        429: {
            "model": ErrorBody,
            "description": "``too_many_downloads``: the caller's downloads already running "
            "(a few at once per process); Retry-After says when to try again",
        },
    },
)
def backlog(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    principal: ReviewerDep,
    triage_id: Id,
    format: Annotated[str, Query(pattern="^(json|csv|jsonl)$")] = "json",
    category: str | None = None,
) -> StreamingResponse:  # a Download, which is one
    """Every miss with its cause, streamed: JSON (grouped by cause, with counts and the
    closure sentence), CSV (one row per miss, opens in a spreadsheet; text cells that a
    spreadsheet would run as a formula start with ``'``) or JSONL. A download holds no
    database connection while its client reads; a user may run a few at once (429
    ``too_many_downloads`` with Retry-After past that)."""
    # the slot first: a refused download costs no query
    slot = slots_of(request.app).take(principal.user.id or 0)
    try:
        return _backlog_download(request, session, settings, slot, triage_id, format, category)
    except BaseException:
        slot.give_back()
        raise


def _backlog_download(
    request: Request,
    session: Session,
    settings: Settings,
    slot: Slot,
    triage_id: int,
    format: str,
    category: str | None,
) -> Download:
    ctx = service.triage_context(session=session, triage_id=triage_id)
    summary = (
        closure.closure_report(
            session=session, triage=ctx.triage, causes=ctx.causes, agreement=True
        )
        if format == "json"
        else None
    )
    end_reading(session)  # the stream reads its pages in sessions of its own
    # Links in a downloaded file leave the product: from the setting, never the Host header.
    base = settings.public_url.rstrip("/")
    items = backlog_service.detached_rows(
        engine=request.app.state.engine, ctx=ctx, base_url=base, category=category
    )
    name = f"misstriage-{ctx.run.name}-triage-{ctx.triage.id}-backlog"
    headers: dict[str, str] = {}
    if format == "csv":
        content, media_type = backlog_service.as_csv(items), "text/csv; charset=utf-8"
        headers["Content-Disposition"] = attachment(f"{name}.csv")
    elif format == "jsonl":
        content, media_type = backlog_service.as_jsonl(items), "application/x-ndjson"
        headers["Content-Disposition"] = attachment(f"{name}.jsonl")
    else:
        assert summary is not None
        content = backlog_service.as_json(items, ctx=ctx, summary=summary)
        media_type = "application/json"
        headers["Content-Disposition"] = attachment(f"{name}.json")
    return Download(content, slot=slot, media_type=media_type, headers=headers)


class ExportBody(BaseModel):
    tracker: Tracker
    target: str = Field(min_length=1, max_length=500)
    dry_run: bool = False


@router.post("/{triage_id}/exports", response_model=ExportOutcome)
def export_backlog(
    session: SessionDep,
    settings: SettingsDep,
    principal: LeadDep,
    triage_id: Id,
    body: ExportBody,
) -> ExportOutcome:
    """One tracker issue per cause; a second export updates the same issues. ``dry_run``
    answers with the exact requests (credentials masked) instead of sending them."""
    return export_service.export(
        session=session,
        settings=settings,
        triage_id=triage_id,
        tracker=body.tracker,
        target=body.target,
        dry_run=body.dry_run,
    )
