"""The job runner of an app process: a thread that fails the jobs whose process stopped,
claims the next queued job and runs it, with a heartbeat thread writing its progress
(app/services/jobs.py). Every app process runs one; they share the job list."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.clock import Clock
from app.db import writing
from app.models import DetectorRun, GoldenSet, Job, JobState, User
from app.services import jobs
from app.services.dedup import detector_runs
from app.services.errors import ServiceError

log = logging.getLogger(__name__)

Work = Callable[[Session, Job, jobs.Progress, datetime], dict[str, Any]]


def _detection(
    session: Session, job: Job, progress: jobs.Progress, now: datetime
) -> dict[str, Any]:
    """A detection over a golden set's stored corpus (``detector_runs.detect_duplicates``)."""
    golden = session.get(GoldenSet, job.golden_set_id) if job.golden_set_id else None
    if golden is None:
        raise ServiceError("its golden set was deleted", code="golden_set_not_found")
    user = session.get(User, job.created_by_id) if job.created_by_id else None
    run = detector_runs.detect_duplicates(
        session=session, golden=golden, user=user, progress=progress, **job.params
    )
    return {"detector_run_id": run.id}


def _apply(session: Session, job: Job, progress: jobs.Progress, now: datetime) -> dict[str, Any]:
    """A detector run applied at a threshold (``detector_runs.apply_threshold``)."""
    run = session.get(DetectorRun, job.params.get("detector_run_id"))
    if run is None:
        raise ServiceError("its detector run was deleted", code="detector_run_not_found")
    user = session.get(User, job.created_by_id) if job.created_by_id else None
    applied = detector_runs.apply_threshold(
        session=session,
        run=run,
        threshold=float(job.params["threshold"]),
        user=user,
        now=now,
        progress=progress,
    )
    return {"detector_run_id": applied.id}


def _measure(session: Session, job: Job, progress: jobs.Progress, now: datetime) -> dict[str, Any]:
    """The golden set's runs measured again with its live clustering (the rest of an apply
    stopped after its switch)."""
    if job.golden_set_id is None:
        raise ServiceError("its golden set was deleted", code="golden_set_not_found")
    detector_runs.measure_again(session=session, golden_set_id=job.golden_set_id, progress=progress)
    return {}


WORK: dict[str, Work] = {"detection": _detection, "apply": _apply, "measure": _measure}

#: What a job in flight when its service was stopped says.
STOPPED_SERVICE = "the service was stopped while it ran: nothing of it was kept; start it again"


class JobRunner(threading.Thread):
    """Polls every ``every`` seconds; ``stop`` ends it (a job in flight is asked to stop
    and, when it does not within the wait, is failed by the next process that sees its
    heartbeat stopped)."""

    def __init__(
        self, engine: Engine, clock: Clock, every: float, stale_seconds: float = jobs.STALE_SECONDS
    ) -> None:
        super().__init__(daemon=True, name="misstriage-jobs")
        self.engine, self.clock, self.every = engine, clock, every
        self.stale_seconds = stale_seconds
        self.stopping = threading.Event()
        self.worker = jobs.worker_name()
        self.progress: jobs.Progress | None = None

    def run(self) -> None:
        while not self.stopping.wait(self.every):
            try:
                with Session(self.engine, expire_on_commit=False) as session:
                    jobs.fail_stale(
                        session=session, now=self.clock.now(), stale_seconds=self.stale_seconds
                    )
                    job = jobs.claim_next(session=session, worker=self.worker, now=self.clock.now())
                    if job is not None:
                        self._run(session, job)
            except Exception as exc:  # keep polling after a database hiccup
                log.error(
                    "job runner poll failed; retrying at the next poll",
                    extra={"error_type": type(exc).__name__, "error": str(exc)[:300]},
                )

    def _run(self, session: Session, job: Job) -> None:
        assert job.id is not None
        progress = self.progress = jobs.Progress(total=job.total, job_id=job.id)
        beating = threading.Event()
        heart = threading.Thread(
            target=self._beat, args=(job.id, progress, beating), daemon=True, name="job-beat"
        )
        heart.start()
        state, result, error = JobState.DONE, None, None
        try:
            work = WORK.get(job.kind)
            if work is None:
                raise ServiceError(f"unknown job kind {job.kind!r}", code="job_kind")
            result = work(session, job, progress, self.clock.now())
        except jobs.Cancelled:
            if self.stopping.is_set():
                state, error = JobState.FAILED, STOPPED_SERVICE
            else:
                state = JobState.CANCELLED
        except ServiceError as refused:
            state, error = JobState.FAILED, str(refused)
        except Exception as exc:
            log.exception("job %s (%s) failed", job.id, job.kind)
            state, error = JobState.FAILED, f"failed: {type(exc).__name__}"
        finally:
            beating.set()
            heart.join(timeout=10)
            self.progress = None
        # written with a session of its own: the work's may hold a failed transaction
        with Session(self.engine, expire_on_commit=False) as ending:
            if state != JobState.DONE and job.kind == "apply" and progress.step == jobs.MEASURING:
                # its clusters are live: what it had left is a job of its own
                with writing(ending):
                    follow = jobs.finish_measuring(ending, job, self.clock.now())
                state, error = JobState.FAILED, jobs.STOPPED_LIVE.format(job=follow)
            jobs.finish(
                session=ending,
                job_id=job.id,
                state=state,
                now=self.clock.now(),
                progress=progress,
                result=result,
                error=error,
            )

    def _beat(self, job_id: int, progress: jobs.Progress, ended: threading.Event) -> None:
        while not ended.wait(jobs.HEARTBEAT_SECONDS):
            try:
                with Session(self.engine) as session:
                    jobs.beat(
                        session=session, job_id=job_id, progress=progress, now=self.clock.now()
                    )
            except Exception as exc:
                log.error(
                    "job heartbeat failed",
                    extra={"error_type": type(exc).__name__, "error": str(exc)[:300]},
                )
            if self.stopping.is_set():
                progress.cancelled.set()

    def stop(self, timeout: float = 10.0) -> bool:
        """Ask the runner (and a job in flight) to stop, and wait for it."""
        self.stopping.set()
        if self.progress is not None:
            self.progress.cancelled.set()
        self.join(timeout)
        return not self.is_alive()
