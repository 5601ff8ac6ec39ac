"""/api/v1/triages: summary with closure, and the misses."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from app.api.deps import ClockDep, ReviewerDep, SessionDep, SettingsDep
from app.services import golden_sets as golden_service
from app.services import queue
from app.services import runs as run_service
from app.services import triages as service

router = APIRouter(prefix="/triages", tags=["triages"])


@router.get("/{triage_id}")
def get_triage(session: SessionDep, principal: ReviewerDep, triage_id: int) -> dict[str, Any]:
    """Counts per cause, other, unlabelled, and whether the categories close."""
    triage = service.get_triage(session=session, triage_id=triage_id)
    run = run_service.get_run(session=session, run_id=triage.run_id)
    golden = golden_service.get_golden_set(session=session, golden_set_id=run.golden_set_id)
    summary = service.summarise(session=session, triage=triage, causes=list(golden.causes))
    return service.public(triage, summary)


@router.get("/{triage_id}/misses")
def list_misses(
    session: SessionDep,
    principal: ReviewerDep,
    triage_id: int,
    state: str | None = None,
    category: str | None = None,
    qid: str | None = None,
    page: Annotated[int, Query(ge=1)] = 1,
    per_page: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> dict[str, Any]:
    triage = service.get_triage(session=session, triage_id=triage_id)
    items, total = service.list_misses(
        session=session,
        triage=triage,
        state=state,
        category=category,
        qid=qid,
        page=page,
        per_page=per_page,
    )
    return {"items": [service.public_miss(m) for m in items], "total": total}


@router.post("/{triage_id}/claim", response_model=None)
def claim(
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    triage_id: int,
) -> dict[str, Any] | Response:
    """The next miss for the caller, leased to them; 204 when nothing is left."""
    triage = service.get_triage(session=session, triage_id=triage_id)
    miss = queue.claim(
        session=session,
        triage=triage,
        user=principal.user,
        now=clock.now(),
        lease=timedelta(seconds=settings.lease_seconds),
    )
    if miss is None:
        return Response(status_code=204)
    return service.public_miss(miss)


@router.post("/{triage_id}/undo")
def undo(
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    triage_id: int,
) -> dict[str, Any]:
    """Undo the caller's last label in this triage."""
    triage = service.get_triage(session=session, triage_id=triage_id)
    miss = queue.undo(
        session=session,
        triage=triage,
        user=principal.user,
        now=clock.now(),
        lease=timedelta(seconds=settings.lease_seconds),
    )
    return service.public_miss(miss)
