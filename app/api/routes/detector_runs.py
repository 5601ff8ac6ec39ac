"""/api/v1: detector runs of a golden set (detect, list, apply, import ids) and the
pair-review queue (claim, label, skip, release, audit)."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, Response, UploadFile, status
from pydantic import BaseModel, Field

from app.api.responses import answer
from app.http.deps import ClockDep, LeadDep, ReviewerDep, SessionDep, SettingsDep
from app.http.params import Id, Page, PerPage
from app.http.uploads import saved_uploads
from app.models import JobPublic
from app.models.dedup_public import DetectorRunPublic, PairEventPublic, PairPublic
from app.readmodel import PageOf, paged
from app.services import jobs
from app.services.dedup import detector_runs as service
from app.services.dedup import pairs
from app.services.dedup.side_files import read_side_file
from app.services.errors import Invalid
from app.services.imports.golden_sets import get_golden_set
from app.services.paging import DEFAULT_PER_PAGE

router = APIRouter(tags=["duplicates"])


class DetectBody(BaseModel):
    threshold: float = Field(default=0.8, ge=0.5, le=1.0)
    #: pairs kept and sampled down to threshold - near (at least 0.3)
    near: float = Field(default=0.2, ge=0.0, le=0.5)
    per_band: int = Field(default=20, ge=1, le=1000)
    seed: int = Field(default=1, ge=0, le=2**31 - 1)


@router.post(
    "/golden-sets/{golden_set_id}/detector-runs",
    status_code=status.HTTP_201_CREATED,
    response_model=DetectorRunPublic,
    responses={
        202: {
            "model": JobPublic,
            "description": "a corpus of at least MISSTRIAGE_JOB_DOCUMENTS documents: "
            "the detection runs as a background job (its progress at Location)",
        }
    },
)
def detect(
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: LeadDep,
    golden_set_id: Id,
    body: DetectBody | None = None,
) -> Response | DetectorRunPublic:
    """Find the near-duplicates of the golden set's corpus (MinHash LSH, every candidate
    verified by its Jaccard similarity): every pair down to ``threshold - near`` is kept with
    its band, a stratified sample of ``per_band`` per band goes on the pair-review queue, and
    the candidate search's recall is measured against the exact similarity. Nothing is
    applied until ``.../apply``. A corpus of ``MISSTRIAGE_JOB_DOCUMENTS`` documents
    or more (20,000 by default) is detected by a background job: 202 and the job (``GET
    /api/v1/jobs/{id}``: its progress; its ``result.detector_run_id`` once done)."""
    body = body or DetectBody()
    golden = get_golden_set(session=session, golden_set_id=golden_set_id)
    made = service.detect_or_queue(
        session=session,
        golden=golden,
        user=principal.user,
        now=clock.now(),
        job_documents=settings.job_documents,
        asked=body.model_dump(),
    )
    if isinstance(made, JobPublic):
        return _accepted(made)
    return service.public(session=session, run=made)


def _accepted(job: JobPublic) -> Response:
    """202 and the job, its address in Location."""
    return Response(
        content=job.model_dump_json(),
        status_code=status.HTTP_202_ACCEPTED,
        media_type="application/json",
        headers={"Location": f"/api/v1/jobs/{job.id}"},
    )


@router.get("/jobs/{job_id}", response_model=JobPublic)
def get_job(session: SessionDep, principal: ReviewerDep, job_id: Id) -> JobPublic:
    """A background job: its state (``queued``, ``running``, ``done``, ``failed``,
    ``cancelled``), its step and progress (``done`` of ``total``), when it started and ended,
    why it failed (``error``), and what it made (``result``). A job whose process was killed
    or restarted is failed once its heartbeat is ``MISSTRIAGE_JOB_STALE_SECONDS`` (60) old,
    with its reason: a detection left nothing; an apply stopped after its clusters were made
    live says so, and a job of its own measures the runs it had left."""
    return jobs.public(jobs.get_job(session=session, job_id=job_id))


@router.post("/jobs/{job_id}/cancel", response_model=JobPublic)
def cancel_job(session: SessionDep, clock: ClockDep, principal: LeadDep, job_id: Id) -> JobPublic:
    """Cancel a job: a queued one at once; a running one stops at its next step (the
    near-duplicate search itself runs to its end first; its state says ``cancelled`` then,
    and it left nothing; an apply whose clusters were made live is no longer cancelled);
    409 ``job_ended`` for one that ended."""
    return jobs.public(jobs.request_cancel(session=session, job_id=job_id, now=clock.now()))


@router.get("/golden-sets/{golden_set_id}/detector-runs")
def list_detector_runs(
    session: SessionDep,
    principal: ReviewerDep,
    golden_set_id: Id,
    page: Page = 1,
    per_page: PerPage = DEFAULT_PER_PAGE,
) -> PageOf[DetectorRunPublic]:
    """The golden set's detector runs, newest first (the applied one says ``applied``)."""
    golden = get_golden_set(session=session, golden_set_id=golden_set_id)
    runs = service.list_detector_runs(session=session, golden=golden)
    shown = paged(runs, page, per_page)  # the calibration tables of this page's runs only
    return PageOf[DetectorRunPublic](
        items=[service.public(session=session, run=r) for r in shown.items], total=shown.total
    )


@router.post(
    "/golden-sets/{golden_set_id}/detector-runs/import",
    status_code=status.HTTP_201_CREATED,
    response_model=DetectorRunPublic,
)
def import_ids(
    session: SessionDep, clock: ClockDep, principal: LeadDep, golden_set_id: Id, ids: UploadFile
) -> DetectorRunPublic:
    """Cluster ids made elsewhere (datatrove, text-dedup, NeMo Curator): a side file of
    ``doc_id,cluster_id`` (CSV or TSV with a header, JSONL or Parquet; plain or gzip) imports
    as a detector run (``source: "imported"``, not calibrated) and is applied at once. All or
    nothing: a bad line, or an id not in the corpus, imports nothing."""
    golden = get_golden_set(session=session, golden_set_id=golden_set_id)
    with saved_uploads(ids) as saved:
        (path,) = saved.paths
        if path is None:
            raise Invalid("a file of cluster ids is needed", code="ids_required")
        name = ids.filename or "ids"
        cluster_of = read_side_file(path, name)
        run = service.import_cluster_ids(
            session=session,
            golden=golden,
            cluster_of=cluster_of,
            file_name=name,
            user=principal.user,
            now=clock.now(),
        )
    return service.public(session=session, run=run)


@router.get("/detector-runs/{detector_run_id}", response_model=DetectorRunPublic)
def get_detector_run(
    session: SessionDep, principal: ReviewerDep, detector_run_id: Id
) -> DetectorRunPublic:
    """One detector run with its calibration table: per band the pairs found, sampled and
    reviewed, the share judged the same (Wilson 95%), the candidate search's recall; and per
    threshold what applying it would give."""
    run = service.get_detector_run(session=session, detector_run_id=detector_run_id)
    return service.public(session=session, run=run)


class ApplyBody(BaseModel):
    threshold: float = Field(gt=0.0, le=1.0)


@router.post(
    "/detector-runs/{detector_run_id}/apply",
    response_model=DetectorRunPublic,
    responses={
        202: {
            "model": JobPublic,
            "description": "a corpus of at least MISSTRIAGE_JOB_DOCUMENTS documents: the "
            "apply runs as a background job (its progress at Location)",
        }
    },
)
def apply(
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: LeadDep,
    detector_run_id: Id,
    body: ApplyBody,
) -> Response | DetectorRunPublic:
    """Make the run's clusters at ``threshold`` the corpus's (earlier runs kept): written
    while nobody reads them, then made live at once. Every judged run of the golden set is
    measured again with them (exact up to its kept head); a run that keeps no ranking of some
    query (a log run, a judged run's queries outside the golden set) stays on the clusters
    it was measured with and names their threshold. The estimated precision and recall
    there. Existing triages keep the clusters they were made with. Over a corpus of
    ``MISSTRIAGE_JOB_DOCUMENTS`` documents or more, a background job: 202 and the job (a
    cancel stops it until the clusters are made live)."""
    run = service.get_detector_run(session=session, detector_run_id=detector_run_id)
    applied = service.apply_or_queue(
        session=session,
        run=run,
        threshold=body.threshold,
        user=principal.user,
        now=clock.now(),
        job_documents=settings.job_documents,
    )
    if isinstance(applied, JobPublic):
        return _accepted(applied)
    return service.public(session=session, run=applied)


@router.post(
    "/detector-runs/{detector_run_id}/claim",
    response_model=PairPublic,
    responses={204: {"description": "no sampled pair is left for the caller"}},
)
def claim(
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    detector_run_id: Id,
) -> Response:
    """The caller's current pair (renewed), else the next sampled pair nobody holds and they
    did not skip, leased to them; 204 when none is left for them."""
    run = service.get_detector_run(session=session, detector_run_id=detector_run_id)
    pair = pairs.claim(
        session=session,
        run=run,
        user=principal.user,
        now=clock.now(),
        lease=timedelta(seconds=settings.lease_seconds),
    )
    if pair is None:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    return answer(pairs.pair_public(session=session, pair=pair))


class PairLabelBody(BaseModel):
    same: bool
    version: int = Field(ge=1)


@router.get("/pairs/{pair_id}", response_model=PairPublic)
def get_pair(session: SessionDep, principal: ReviewerDep, pair_id: Id) -> PairPublic:
    return pairs.pair_public(session=session, pair=pairs.get_pair(session=session, pair_id=pair_id))


@router.post("/pairs/{pair_id}/label", response_model=PairPublic)
def label(
    session: SessionDep, clock: ClockDep, principal: ReviewerDep, pair_id: Id, body: PairLabelBody
) -> PairPublic:
    """Judge the pair the same content (``same: true``) or different: needs the caller's
    lease (a lead's needs none, and relabels) and the current version; 409
    ``stale_version`` otherwise, the attempt kept in the audit log."""
    pair = pairs.label(
        session=session,
        pair_id=pair_id,
        same=body.same,
        version=body.version,
        user=principal.user,
        now=clock.now(),
    )
    return pairs.pair_public(session=session, pair=pair)


class PairSkipBody(BaseModel):
    reason: str = Field(default="", max_length=500)


@router.post("/pairs/{pair_id}/skip", response_model=PairPublic)
def skip(
    session: SessionDep,
    clock: ClockDep,
    principal: ReviewerDep,
    pair_id: Id,
    body: PairSkipBody | None = None,
) -> PairPublic:
    """Pass the held pair to the other reviewers (audited)."""
    pair = pairs.skip(
        session=session,
        pair_id=pair_id,
        user=principal.user,
        now=clock.now(),
        note=(body or PairSkipBody()).reason,
    )
    return pairs.pair_public(session=session, pair=pair)


@router.post("/pairs/{pair_id}/release", response_model=PairPublic)
def release(
    session: SessionDep, clock: ClockDep, principal: ReviewerDep, pair_id: Id
) -> PairPublic:
    """Give the pair back to the queue (its holder, or a lead for anyone's lease)."""
    pair = pairs.release(session=session, pair_id=pair_id, user=principal.user, now=clock.now())
    return pairs.pair_public(session=session, pair=pair)


@router.get("/pairs/{pair_id}/events")
def events(
    session: SessionDep,
    principal: ReviewerDep,
    pair_id: Id,
    page: Page = 1,
    per_page: PerPage = DEFAULT_PER_PAGE,
) -> PageOf[PairEventPublic]:
    """The pair's audit trail, oldest first (refused attempts included)."""
    return paged(pairs.audit(session=session, pair_id=pair_id), page, per_page)
