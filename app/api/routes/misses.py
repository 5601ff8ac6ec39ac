"""/api/v1/misses/{id}: renew, release, skip, label, and the audit trail."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.http.deps import ClockDep, ReviewerDep, SessionDep, SettingsDep
from app.http.params import Id, Page, PageOf, PerPage, paged
from app.services import queue
from app.services.triages import causes_of_miss, public_miss

router = APIRouter(prefix="/misses", tags=["queue"])


@router.post("/{miss_id}/renew")
def renew(
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    miss_id: Id,
) -> dict[str, Any]:
    """Extend the caller's lease (the review page does this while it is open)."""
    miss = queue.renew(
        session=session,
        miss_id=miss_id,
        user=principal.user,
        now=clock.now(),
        lease=timedelta(seconds=settings.lease_seconds),
    )
    return public_miss(miss)


@router.post("/{miss_id}/release")
def release(
    session: SessionDep, clock: ClockDep, principal: ReviewerDep, miss_id: Id
) -> dict[str, Any]:
    """Give the miss back to the queue (its holder, or a lead for anyone's lease)."""
    return public_miss(
        queue.release(session=session, miss_id=miss_id, user=principal.user, now=clock.now())
    )


class SkipBody(BaseModel):
    reason: str = Field(min_length=1, max_length=2000)


@router.post("/{miss_id}/skip")
def skip(
    session: SessionDep, clock: ClockDep, principal: ReviewerDep, miss_id: Id, body: SkipBody
) -> dict[str, Any]:
    """Pass the miss to other reviewers, with a reason (audited)."""
    miss = queue.skip(
        session=session, miss_id=miss_id, user=principal.user, reason=body.reason, now=clock.now()
    )
    return public_miss(miss)


class LabelBody(BaseModel):
    category: str = Field(min_length=1, max_length=100)
    note: str = Field(default="", max_length=10_000)
    version: int = Field(ge=1)


@router.post("/{miss_id}/label")
def label(
    session: SessionDep, clock: ClockDep, principal: ReviewerDep, miss_id: Id, body: LabelBody
) -> dict[str, Any]:
    """Label the miss: needs the caller's lease (or the lead role, which also relabels) and
    the current version; 409 ``stale_version`` otherwise, with the attempt kept in the audit
    log."""
    causes = causes_of_miss(session=session, miss_id=miss_id)
    labelled = queue.label(
        session=session,
        miss_id=miss_id,
        user=principal.user,
        category=body.category,
        note=body.note,
        version=body.version,
        causes=causes,
        now=clock.now(),
    )
    return public_miss(labelled)


@router.get("/{miss_id}/events")
def events(
    session: SessionDep,
    principal: ReviewerDep,
    miss_id: Id,
    page: Page = 1,
    per_page: PerPage = 50,
) -> PageOf[dict[str, Any]]:
    """The audit trail of the miss, oldest first."""
    items = queue.audit_trail(session=session, miss_id=miss_id)
    return paged([queue.public_event(e) for e in items], page, per_page)
