"""Duplicates on the pages: a golden set's detector runs (the section of its page and the lead's
two forms: find duplicates, import cluster ids), the detector run page with its calibration
and thresholds tables, and applying a threshold. Everything goes through
app.services.dedup; this module reads no table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, Response
from sqlmodel import Session

from app.http.deps import ClockDep, LeadDep, Principal, ReviewerDep, SessionDep, SettingsDep
from app.http.params import Id
from app.http.uploads import saved_uploads
from app.models import JobPublic, JobState, Role
from app.models.dedup_public import DetectorRunPublic, EstimatePublic
from app.models.golden import GoldenSetPublic
from app.services import jobs as job_service
from app.services.accounts import users as user_service
from app.services.dedup import detector_runs as detector_service
from app.services.dedup import pairs as pair_service
from app.services.dedup.side_files import read_side_file
from app.services.errors import Invalid, ServiceError
from app.services.imports import golden_sets as golden_service
from app.web import copy
from app.web.forms import Fields
from app.web.render import context_of, redirect, render

router = APIRouter(include_in_schema=False)

#: The defaults of the "Find duplicates" form (the API's).
DEFAULT_THRESHOLD = 0.8
DEFAULT_PER_BAND = 20
#: What a parameter the run does not record shows.
NONE = "\N{EN DASH}"


def emails(session: Session) -> dict[int, str]:
    """Who did what, by user id (the tables show people by their address)."""
    return {u.id: u.email for u in user_service.list_users(session=session) if u.id is not None}


@dataclass(frozen=True)
class JobsPanel:
    """A golden set's latest background jobs; ``active``: one is queued or running (the
    panel polls)."""

    golden_set_id: int
    jobs: list[JobPublic]
    active: bool
    can_cancel: bool


def jobs_panel_of(*, session: Session, golden_set_id: int, principal: Principal) -> JobsPanel:
    listed = [
        job_service.public(j)
        for j in job_service.list_jobs(session=session, golden_set_id=golden_set_id)
    ]
    return JobsPanel(
        golden_set_id=golden_set_id,
        jobs=listed,
        active=any(j.state in (JobState.QUEUED, JobState.RUNNING) for j in listed),
        can_cancel=principal.role.allows(Role.LEAD),
    )


@dataclass(frozen=True)
class DuplicatesSection:
    """The golden-set page's "Duplicates" section: the applied run's sentence, the runs
    newest first, and whether the lead's forms are shown."""

    golden_set_id: int
    applied: str | None
    runs: list[DetectorRunPublic]
    who: dict[int, str]
    can_detect: bool
    threshold: float
    per_band: int
    jobs: JobsPanel


def duplicates_section(
    *, session: Session, golden_set_id: int, principal: Principal
) -> DuplicatesSection:
    golden = golden_service.get_golden_set(session=session, golden_set_id=golden_set_id)
    ref = detector_service.ref_by_id(session=session, detector_run_id=golden.detector_run_id)
    runs = detector_service.list_detector_runs(session=session, golden=golden)
    return DuplicatesSection(
        golden_set_id=golden_set_id,
        applied=None if ref is None else ref.sentence,
        runs=[detector_service.public(session=session, run=r, thresholds=False) for r in runs],
        who=emails(session),
        can_detect=principal.role.allows(Role.LEAD),
        threshold=DEFAULT_THRESHOLD,
        per_band=DEFAULT_PER_BAND,
        jobs=jobs_panel_of(session=session, golden_set_id=golden_set_id, principal=principal),
    )


def _back_to_golden_set(
    request: Request, golden_set_id: int, message: str, *, error_code: str | None = None
) -> Response:
    where = request.url_for("golden_set_page", golden_set_id=golden_set_id).path + "#duplicates"
    response = redirect(request, where, flash=message, kind="error" if error_code else "ok")
    if error_code:
        response.headers["X-Error-Code"] = error_code
    return response


@router.post("/golden-sets/{golden_set_id}/detector-runs", name="detect_duplicates_form")
def detect_duplicates(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: LeadDep,
    golden_set_id: Id,
    threshold: Annotated[str, Form()] = "",
    per_band: Annotated[str, Form()] = "",
) -> Response:
    """Find the corpus's near-duplicates (nothing applied yet), then show the run; over a
    large corpus, as a background job whose progress the golden set's page shows."""
    golden = golden_service.get_golden_set(session=session, golden_set_id=golden_set_id)
    fields = Fields()
    at = fields.number("threshold", threshold, default=DEFAULT_THRESHOLD, minimum=0.5, maximum=1.0)
    per = fields.integer("per_band", per_band, default=DEFAULT_PER_BAND, minimum=1, maximum=1000)
    try:
        if fields.errors:
            raise Invalid(next(iter(fields.errors.values())), code="invalid_form")
        made = detector_service.detect_or_queue(
            session=session,
            golden=golden,
            user=principal.user,
            now=clock.now(),
            job_documents=settings.job_documents,
            asked={"threshold": min(at, 1.0), "near": 0.2, "per_band": per, "seed": 1},
        )
        if isinstance(made, JobPublic):
            return _back_to_golden_set(
                request,
                golden_set_id,
                f"finding duplicates among {copy.count(golden.documents, 'document')} in the "
                f"background (job {made.id}): its progress is below",
            )
        run = made
    except ServiceError as exc:
        return _back_to_golden_set(
            request, golden_set_id, f"duplicates not searched: {exc.message}", error_code=exc.code
        )
    shown = detector_service.public(session=session, run=run)
    return redirect(
        request,
        request.url_for("detector_run_page", detector_run_id=run.id).path,
        flash=f"detector run {run.id}: {copy.count(run.pairs, 'pair')} at similarity "
        f"{run.low:.2f} or more among {copy.count(run.documents, 'document')}; "
        f"{shown.sampled:,} sampled for review (nothing applied yet)",
    )


@router.get("/golden-sets/{golden_set_id}/jobs", name="jobs_panel")
def jobs_panel(
    request: Request, session: SessionDep, principal: ReviewerDep, golden_set_id: Id
) -> HTMLResponse:
    """The golden set's background jobs (the panel of its page, polled while one runs)."""
    golden_service.get_golden_set(session=session, golden_set_id=golden_set_id)
    panel = jobs_panel_of(session=session, golden_set_id=golden_set_id, principal=principal)
    return render(request, "_jobs.html", {"jobs": panel}, principal=principal)


@router.post("/jobs/{job_id}/cancel", name="cancel_job_form")
def cancel_job(
    request: Request, session: SessionDep, clock: ClockDep, principal: LeadDep, job_id: Id
) -> Response:
    """Cancel a background job, then back to its golden set's page."""
    job = job_service.get_job(session=session, job_id=job_id)
    where = job.golden_set_id
    try:
        job_service.request_cancel(session=session, job_id=job_id, now=clock.now())
    except ServiceError as exc:
        if where is None:
            raise
        return _back_to_golden_set(
            request, where, f"job {job_id} not cancelled: {exc.message}", error_code=exc.code
        )
    if where is None:
        return redirect(request, "/", flash=f"job {job_id}: cancel asked")
    return _back_to_golden_set(
        request, where, f"job {job_id}: cancel asked; it stops at its next step"
    )


@router.post("/golden-sets/{golden_set_id}/detector-runs/import", name="import_cluster_ids_form")
def import_cluster_ids(
    request: Request,
    session: SessionDep,
    clock: ClockDep,
    principal: LeadDep,
    golden_set_id: Id,
    ids: UploadFile | None = None,
) -> Response:
    """A side file of ``doc_id,cluster_id`` made elsewhere, applied at once (all or nothing:
    a bad line names the file and the line, and nothing is imported)."""
    golden = golden_service.get_golden_set(session=session, golden_set_id=golden_set_id)
    try:
        with saved_uploads(ids) as saved:
            (path,) = saved.paths
            if path is None or ids is None:
                raise Invalid("choose a file of cluster ids", code="ids_required")
            name = ids.filename or "ids"
            cluster_of = read_side_file(path, name)
            run = detector_service.import_cluster_ids(
                session=session,
                golden=golden,
                cluster_of=cluster_of,
                file_name=name,
                user=principal.user,
                now=clock.now(),
            )
    except ServiceError as exc:
        return _back_to_golden_set(
            request, golden_set_id, f"cluster ids not imported: {exc.message}", error_code=exc.code
        )
    return redirect(
        request,
        request.url_for("detector_run_page", detector_run_id=run.id).path,
        flash=f"imported {name}: {copy.count(run.clusters or 0, 'cluster')} over "
        f"{copy.count(run.clustered_documents or 0, 'document')}; every run's cluster "
        f"measures now rest on detector run {run.id}",
    )


@dataclass(frozen=True)
class DetectorRunPage:
    """What ``detector_run.html`` receives."""

    run: DetectorRunPublic
    golden: GoldenSetPublic
    who: dict[int, str]
    #: Parameters worth a glance, as (name, value) pairs.
    parameters: list[tuple[str, str]]
    #: The bands some estimate waits for (pairs found, none reviewed).
    unreviewed: list[str]
    can_apply: bool
    #: Sampled pairs the caller may still review (None for imported ids: no pairs).
    left: int | None


def _parameters(run: DetectorRunPublic) -> list[tuple[str, str]]:
    p = run.parameters
    if run.source != "detector":
        return [("file", str(p.get("file", "")))]
    shown = [
        ("shingles", f"{p.get('shingle_size', NONE)} words"),
        ("bands x rows", f"{p.get('bands', NONE)} x {p.get('rows', NONE)}"),
        ("num_perm", str(p.get("num_perm", NONE))),
        ("seed", str(p.get("seed", NONE))),
        ("low", NONE if run.low is None else f"{run.low:.2f}"),
        ("per band", str(p.get("per_band", NONE))),
    ]
    return shown


def _unreviewed(run: DetectorRunPublic) -> list[str]:
    estimates: list[EstimatePublic] = []
    for t in run.thresholds:
        estimates += [t.precision, t.recall]
    seen: dict[str, None] = {}
    for e in estimates:
        for band in e.unreviewed_bands:
            seen.setdefault(band, None)
    order = [b.label for b in run.bands]
    return sorted(seen, key=lambda b: order.index(b) if b in order else len(order))


@router.get("/detector-runs/{detector_run_id}", name="detector_run_page")
def detector_run_page(
    request: Request, session: SessionDep, principal: ReviewerDep, detector_run_id: Id
) -> HTMLResponse:
    """A detector run: its parameters, the calibration per band, the candidate search's
    recall, and per threshold what applying it gives (a lead applies one here)."""
    run = detector_service.get_detector_run(session=session, detector_run_id=detector_run_id)
    shown = detector_service.public(session=session, run=run)
    golden = golden_service.get_golden_set(session=session, golden_set_id=run.golden_set_id)
    page = DetectorRunPage(
        run=shown,
        golden=GoldenSetPublic.of(golden),
        who=emails(session),
        parameters=_parameters(shown),
        unreviewed=_unreviewed(shown),
        can_apply=principal.role.allows(Role.LEAD) and shown.source == "detector",
        left=None
        if shown.source != "detector"
        else pair_service.left_for(session=session, run=run, user=principal.user),
    )
    return render(request, "detector_run.html", context_of(page), principal=principal)


@router.post("/detector-runs/{detector_run_id}/apply", name="apply_threshold_form")
def apply_threshold(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: LeadDep,
    detector_run_id: Id,
    threshold: Annotated[str, Form()] = "",
) -> Response:
    """Make the run's clusters at ``threshold`` the corpus's, then back to the run; over a
    large corpus, as a background job whose progress the golden set's page shows."""
    run = detector_service.get_detector_run(session=session, detector_run_id=detector_run_id)
    here = request.url_for("detector_run_page", detector_run_id=detector_run_id).path
    fields = Fields()
    at = fields.number("threshold", threshold, default=None, minimum=0.0, maximum=1.0)
    try:
        if fields.errors or at is None:
            raise Invalid(
                fields.errors.get("threshold", "choose a threshold"), code="invalid_threshold"
            )
        applied = detector_service.apply_or_queue(
            session=session,
            run=run,
            threshold=min(at, 1.0),
            user=principal.user,
            now=clock.now(),
            job_documents=settings.job_documents,
        )
        if isinstance(applied, JobPublic):
            return _back_to_golden_set(
                request,
                run.golden_set_id,
                f"applying J >= {min(at, 1.0):.2f} in the background (job {applied.id}): "
                "its progress is below",
            )
    except ServiceError as exc:
        response = redirect(request, here, flash=f"not applied: {exc.message}", kind="error")
        response.headers["X-Error-Code"] = exc.code
        return response
    return redirect(
        request,
        here,
        flash=f"Applied J >= {applied.threshold or 0:.2f}: "
        f"{copy.count(applied.clusters or 0, 'cluster')}; every run's cluster measures now "
        f"rest on detector run {applied.id}",
    )
