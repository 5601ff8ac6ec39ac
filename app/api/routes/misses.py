"""/api/v1/misses/{id}: renew, release, skip, label, adjudicate, and the audit trail."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field

from app.api.responses import answer
from app.http.deps import ClockDep, ReviewerDep, SessionDep, SettingsDep
from app.http.lanes import on_queue_lane
from app.http.params import Id, Page, PerPage
from app.models.triage_public import LabelEventPublic, MissPublic
from app.readmodel import PageOf
from app.services import queue
from app.services.paging import DEFAULT_PER_PAGE

router = APIRouter(prefix="/misses", tags=["queue"])


@router.post("/{miss_id}/renew", response_model=MissPublic)
@on_queue_lane
def renew(
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    miss_id: Id,
) -> Response:
    """Extend the caller's lease (the review page does this while it is open)."""
    renewed = queue.renew(
        session=session,
        miss_id=miss_id,
        user=principal.user,
        now=clock.now(),
        lease=timedelta(seconds=settings.lease_seconds),
    )
    return answer(renewed)


@router.post("/{miss_id}/release", response_model=MissPublic)
@on_queue_lane
def release(
    session: SessionDep, clock: ClockDep, principal: ReviewerDep, miss_id: Id
) -> MissPublic:
    """Give the miss back to the queue (its holder, or a lead for anyone's lease)."""
    return queue.release(session=session, miss_id=miss_id, user=principal.user, now=clock.now())


class SkipBody(BaseModel):
    reason: str = Field(min_length=1, max_length=2000)


@router.post("/{miss_id}/skip", response_model=MissPublic)
@on_queue_lane
def skip(
    session: SessionDep,
    clock: ClockDep,
    principal: ReviewerDep,
    miss_id: Id,
    body: SkipBody,
) -> MissPublic:
    """Pass the miss to other reviewers, with a reason (audited)."""
    return queue.skip(
        session=session,
        miss_id=miss_id,
        user=principal.user,
        reason=body.reason,
        now=clock.now(),
    )


class LabelBody(BaseModel):
    category: str = Field(min_length=1, max_length=100)
    note: str = Field(default="", max_length=10_000)
    version: int = Field(ge=1)


class LabelledAndNext(BaseModel):
    """The answer of ``label?next=1``: the labelled miss and the caller's next one, leased to
    them (``null``: nothing is left for the caller, where ``claim`` would answer 204)."""

    labelled: MissPublic
    next: MissPublic | None


@router.post("/{miss_id}/label", response_model=MissPublic | LabelledAndNext)
@on_queue_lane
def label(
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    miss_id: Id,
    body: LabelBody,
    next: Annotated[
        bool,
        Query(
            description="also claim the caller's next miss in the same transaction and answer "
            "`{labelled, next}`"
        ),
    ] = False,
) -> Response:
    """Label the miss: needs the caller's lease (or the lead role, which also relabels) and
    the current version; 409 ``stale_version`` otherwise, with the attempt kept in the audit
    log. With double review (the miss's ``reviewers`` > 1) it is the caller's own, blind
    label (``cant-tell`` allowed; a repeat answers 409 ``stale_version`` with the caller's
    own label): the miss gets its final label when the last reviewer agrees, else it goes
    to adjudication (``state`` ``disputed``). A covered miss answers 409 ``not_on_queue``.

    Without ``next`` the answer is the labelled miss. With ``next=1`` the label and a
    ``claim`` in the miss's triage run in one transaction and the answer is
    ``{"labelled": Miss, "next": Miss | null}``: ``next`` is the caller's next miss, leased to
    them in queue order (their current one first), or ``null`` when nothing is left for them
    (where ``claim`` answers 204). A refused label (409, 403, 422) claims nothing and answers
    exactly as without ``next``."""
    # the golden set's causes are read with the miss, in the label's transaction
    if not next:
        labelled = queue.label(
            session=session,
            miss_id=miss_id,
            user=principal.user,
            category=body.category,
            note=body.note,
            version=body.version,
            now=clock.now(),
        )
        return answer(labelled)
    done = queue.label_and_claim(
        session=session,
        miss_id=miss_id,
        user=principal.user,
        category=body.category,
        note=body.note,
        version=body.version,
        now=clock.now(),
        lease=timedelta(seconds=settings.lease_seconds),
    )
    return answer(LabelledAndNext.model_construct(labelled=done.labelled, next=done.next))


@router.post("/{miss_id}/adjudicate", response_model=MissPublic)
def adjudicate(
    session: SessionDep, clock: ClockDep, principal: ReviewerDep, miss_id: Id, body: LabelBody
) -> MissPublic:
    """The final label of a disputed miss: needs the caller's adjudication lease (a lead's
    needs none) and the current version; 409 ``stale_version`` (the attempt kept in the audit
    trail) or ``not_disputed``; 403 ``adjudicator_required`` for reviewers without the flag."""
    return queue.adjudicate(
        session=session,
        miss_id=miss_id,
        user=principal.user,
        category=body.category,
        note=body.note,
        version=body.version,
        now=clock.now(),
    )


@router.get("/{miss_id}/events", response_model=PageOf[LabelEventPublic])
def events(
    session: SessionDep,
    principal: ReviewerDep,
    miss_id: Id,
    page: Page = 1,
    per_page: PerPage = DEFAULT_PER_PAGE,
) -> PageOf[LabelEventPublic]:
    """The audit trail of the miss, oldest first."""
    return queue.audit_page(
        session=session, miss_id=miss_id, page=page, per_page=per_page, viewer=principal.user
    )
