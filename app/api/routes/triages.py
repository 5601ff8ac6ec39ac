"""/api/v1/triages: summary with closure, and the misses."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from app.api.responses import attachment
from app.exporters import Tracker
from app.http.deps import ClockDep, LeadDep, ReviewerDep, SessionDep, SettingsDep
from app.http.params import Id, Page, PerPage
from app.services import backlog as backlog_service
from app.services import dashboard, queue, skips
from app.services import exports as export_service
from app.services import golden_sets as golden_service
from app.services import runs as run_service
from app.services import triages as service

router = APIRouter(prefix="/triages", tags=["triages"])


@router.get("/{triage_id}")
def get_triage(session: SessionDep, principal: ReviewerDep, triage_id: Id) -> dict[str, Any]:
    """Counts per cause, other, unlabelled, and whether the categories close."""
    triage = service.get_triage(session=session, triage_id=triage_id)
    run = run_service.get_run(session=session, run_id=triage.run_id)
    golden = golden_service.get_golden_set(session=session, golden_set_id=run.golden_set_id)
    summary = service.summarise(session=session, triage=triage, causes=list(golden.causes))
    return service.public(triage, summary)


class CoveredBody(BaseModel):
    include: bool


@router.post("/{triage_id}/covered")
def include_covered(
    session: SessionDep, principal: LeadDep, triage_id: Id, body: CoveredBody
) -> dict[str, Any]:
    """Put the misses covered by a duplicate on the queue (``include``: true), or take those
    not yet labelled or leased back off it. Answers how many moved and the new summary."""
    triage = service.get_triage(session=session, triage_id=triage_id)
    moved = service.include_covered(session=session, triage=triage, include=body.include)
    causes = service.causes_of(session=session, triage_id=triage_id)
    summary = service.summarise(session=session, triage=triage, causes=causes)
    return {"moved": moved, "triage": service.public(triage, summary)}


@router.get("/{triage_id}/hints")
def hint_accuracy(session: SessionDep, principal: ReviewerDep, triage_id: Id) -> dict[str, Any]:
    """How each cause hint fared against the reviewers' labels (labelled misses only)."""
    triage = service.get_triage(session=session, triage_id=triage_id)
    report = dashboard.hint_accuracy(session=session, triage=triage)
    return {
        "triage_id": triage.id,
        "hints": [
            {
                "cause": h.cause,
                "hinted": h.hinted,
                "agreed": h.agreed,
                "labelled_as_cause": h.labelled_as_cause,
                "precision": h.precision,
                "recall": h.recall,
            }
            for h in report.per_cause
        ],
        "suggested": report.suggested,
        "accepted": report.accepted,
        "acceptance": report.acceptance,
    }


@router.get("/{triage_id}/misses")
def list_misses(
    session: SessionDep,
    principal: ReviewerDep,
    triage_id: Id,
    state: str | None = None,
    category: str | None = None,
    qid: str | None = None,
    page: Page = 1,
    per_page: PerPage = 50,
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


@router.post(
    "/{triage_id}/claim",
    response_model=None,
    responses={204: {"description": "nothing is left to claim"}},
)
def claim(
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    triage_id: Id,
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
    triage_id: Id,
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


@router.post("/{triage_id}/take-back")
def take_back(
    session: SessionDep, clock: ClockDep, principal: ReviewerDep, triage_id: Id
) -> dict[str, Any]:
    """Put the unlabelled misses the caller skipped back on the caller's queue (claim hands
    them out again); answers how many: `{"taken_back": n}`."""
    triage = service.get_triage(session=session, triage_id=triage_id)
    taken = skips.take_back(session=session, triage=triage, user=principal.user, now=clock.now())
    return {"taken_back": taken}


@router.get(
    "/{triage_id}/backlog",
    name="backlog_download",
    response_model=None,
    responses={
        200: {
            "description": "every miss: JSON grouped by cause, CSV or JSON lines (``format``)",
            "content": {"application/json": {}, "text/csv": {}, "application/x-ndjson": {}},
        }
    },
)
def backlog(
    session: SessionDep,
    settings: SettingsDep,
    principal: ReviewerDep,
    triage_id: Id,
    format: Annotated[str, Query(pattern="^(json|csv|jsonl)$")] = "json",
    category: str | None = None,
) -> StreamingResponse:
    """Every miss with its cause, streamed: JSON (grouped by cause, with counts and the
    closure sentence), CSV (one row per miss, opens in a spreadsheet) or JSONL."""
    triage = service.get_triage(session=session, triage_id=triage_id)
    run = run_service.get_run(session=session, run_id=triage.run_id)
    golden = golden_service.get_golden_set(session=session, golden_set_id=run.golden_set_id)
    # Links in a downloaded file leave the product: from the setting, never the Host header.
    base = settings.public_url.rstrip("/")
    items = backlog_service.rows(
        session=session, triage=triage, run=run, golden=golden, base_url=base, category=category
    )
    name = f"misstriage-{run.name}-triage-{triage.id}-backlog"
    if format == "csv":
        return StreamingResponse(
            backlog_service.as_csv(items),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": attachment(f"{name}.csv")},
        )
    if format == "jsonl":
        return StreamingResponse(
            backlog_service.as_jsonl(items),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": attachment(f"{name}.jsonl")},
        )
    summary = service.summarise(session=session, triage=triage, causes=list(golden.causes))
    meta = {
        "triage_id": triage.id,
        "golden_set": golden.name,
        "run": run.name,
        "depth": triage.depth,
        "k": triage.k,
    }
    return StreamingResponse(
        backlog_service.as_json(items, summary=summary, causes=list(golden.causes), meta=meta),
        media_type="application/json",
    )


class ExportBody(BaseModel):
    tracker: Tracker
    target: str = Field(min_length=1, max_length=500)
    dry_run: bool = False


@router.post("/{triage_id}/exports")
def export_backlog(
    session: SessionDep,
    settings: SettingsDep,
    principal: LeadDep,
    triage_id: Id,
    body: ExportBody,
) -> dict[str, Any]:
    """One tracker issue per cause; a second export updates the same issues. ``dry_run``
    answers with the exact requests (credentials masked) instead of sending them."""
    triage = service.get_triage(session=session, triage_id=triage_id)
    run = run_service.get_run(session=session, run_id=triage.run_id)
    golden = golden_service.get_golden_set(session=session, golden_set_id=run.golden_set_id)
    outcome = export_service.export(
        session=session,
        settings=settings,
        triage=triage,
        run=run,
        golden=golden,
        tracker=body.tracker,
        target=body.target,
        dry_run=body.dry_run,
    )
    return outcome.as_dict(dry_run=body.dry_run)
