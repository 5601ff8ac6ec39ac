"""Background jobs' records: what any process may ask of them and what the process running
one writes (app/models/jobs.py; the runner is app/services/background.py).

A job is queued by a request, claimed by one app process (an UPDATE that only one can win,
so several processes share one job list), and ends done, failed with its reason, or
cancelled. The process running it writes a heartbeat every ``HEARTBEAT_SECONDS`` with its
progress; a running job whose heartbeat is older than ``STALE_SECONDS``
(``MISSTRIAGE_JOB_STALE_SECONDS``) is failed by any process (the one running it was killed
or restarted): a job is never "running" forever. Its work writes its results in one
transaction at its end, so a job that did not finish left nothing.
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, select

from app.db import writing
from app.models import ENDED, Job, JobPublic, JobState, User
from app.services.errors import Conflict, NotFound

HEARTBEAT_SECONDS = 2.0
STALE_SECONDS = 60.0
#: What a job failed by a stopped process says.
STOPPED = (
    "the process running it stopped (killed or restarted) before it finished: nothing of "
    "it was kept; start it again"
)


class Cancelled(Exception):
    """Raised inside a job's work when a cancel was asked."""


@dataclass
class Progress:
    """A running job's progress, kept in memory by its work and written by its heartbeat;
    ``check`` raises ``Cancelled`` once a cancel was seen. ``job_id``: the job it is the
    progress of (None: work done inline, in a request)."""

    step: str = ""
    done: int = 0
    total: int = 0
    cancelled: threading.Event = field(default_factory=threading.Event)
    job_id: int | None = None

    def confirm(self, session: Session) -> None:
        """Inside the work's last transaction, before it commits: the job is still running
        and not cancelled (its row locked on PostgreSQL, so no process fails it until this
        transaction ends); ``Cancelled`` (rolling it back) when not."""
        self.check()
        if self.job_id is None:
            return
        state = session.exec(
            select(Job.state, Job.cancel_requested).where(Job.id == self.job_id).with_for_update()
        ).first()
        if state is None or state[0] != JobState.RUNNING.value or state[1]:
            self.cancelled.set()
            raise Cancelled

    def start(self, step: str, total: int = 0) -> None:
        self.check()
        self.step, self.done, self.total = step, 0, total

    def advance(self, n: int) -> None:
        self.done += n
        self.check()

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled


def worker_name() -> str:
    return f"{socket.gethostname()[:150]}:{os.getpid()}"


def create_job(
    *,
    session: Session,
    kind: str,
    golden_set_id: int | None,
    params: dict[str, Any],
    user: User | None,
    total: int,
    now: datetime,
) -> Job:
    job = Job(
        kind=kind,
        golden_set_id=golden_set_id,
        params=params,
        total=total,
        created_at=now,
        created_by_id=user.id if user else None,
    )
    with writing(session):
        session.add(job)
    session.refresh(job)
    return job


def get_job(*, session: Session, job_id: int) -> Job:
    job = session.get(Job, job_id, populate_existing=True)
    if job is None:
        raise NotFound(f"no job {job_id}", code="job_not_found")
    return job


def public(job: Job) -> JobPublic:
    return JobPublic.model_validate(job)


def request_cancel(*, session: Session, job_id: int, now: datetime) -> Job:
    """A queued job is cancelled at once; a running one is asked to stop (its work stops at
    its next step: the near-duplicate search itself is not interrupted); 409 ``job_ended``
    for one that has ended."""
    with writing(session):
        job = session.get(Job, job_id, populate_existing=True)
        if job is None:
            raise NotFound(f"no job {job_id}", code="job_not_found")
        if job.state in ENDED:
            raise Conflict(f"job {job_id} has ended ({job.state})", code="job_ended")
        session.exec(update(Job).where(col(Job.id) == job_id).values(cancel_requested=True))
        # a queued job ends now, unless a process claimed it meanwhile (it then stops at
        # its next step)
        session.exec(
            update(Job)
            .where(col(Job.id) == job_id, col(Job.state) == JobState.QUEUED.value)
            .values(state=JobState.CANCELLED.value, finished_at=now)
        )
    return get_job(session=session, job_id=job_id)


#: The step of an apply past which its clusters are live (app/services/dedup).
MEASURING = "measuring the runs again"
#: What an apply stopped past that step says: the rest is a job of its own.
STOPPED_LIVE = (
    "stopped after its clusters were made live: they are the golden set's; the runs it had "
    "not measured again yet are measured by job {job}"
)


def fail_stale(*, session: Session, now: datetime, stale_seconds: float = STALE_SECONDS) -> int:
    """Fail every running job whose heartbeat stopped ``stale_seconds`` ago (read first: a
    poll writes nothing when there is none), with its reason; an apply stopped after its
    clusters were made live queues the rest of its work (``finish_measuring``). Answers
    how many."""
    cutoff = now - timedelta(seconds=stale_seconds)
    stale = session.exec(
        select(Job).where(Job.state == JobState.RUNNING.value, col(Job.heartbeat_at) < cutoff)
    ).all()
    failed = 0
    for job in stale:
        assert job.id is not None
        with writing(session):
            result = session.exec(
                update(Job)
                .where(
                    col(Job.id) == job.id,
                    col(Job.state) == JobState.RUNNING.value,
                    col(Job.heartbeat_at) < cutoff,
                )
                .values(state=JobState.FAILED.value, error=STOPPED, finished_at=now)
            )
            if not result.rowcount:  # it beat meanwhile
                continue
            if job.kind == "apply" and job.step == MEASURING:
                follow = finish_measuring(session, job, now)
                session.exec(
                    update(Job)
                    .where(col(Job.id) == job.id)
                    .values(error=STOPPED_LIVE.format(job=follow))
                )
        failed += 1
    return failed


def finish_measuring(session: Session, job: Job, now: datetime) -> int:
    """Inside a ``writing`` block: a job measuring the golden set's runs again with its live
    clustering (what an apply stopped after the switch left to do); its id."""
    follow = Job(
        kind="measure",
        golden_set_id=job.golden_set_id,
        params={},
        created_at=now,
        created_by_id=job.created_by_id,
    )
    session.add(follow)
    session.flush()
    assert follow.id is not None
    return follow.id


def claim_next(*, session: Session, worker: str, now: datetime) -> Job | None:
    """The oldest queued job, now running in ``worker`` (None: none is queued, or another
    process took it first)."""
    queued = session.exec(
        select(Job.id).where(Job.state == JobState.QUEUED.value).order_by(col(Job.id)).limit(1)
    ).first()
    if queued is None:
        return None
    with writing(session):
        result = session.exec(
            update(Job)
            .where(col(Job.id) == queued, col(Job.state) == JobState.QUEUED.value)
            .values(state=JobState.RUNNING.value, started_at=now, heartbeat_at=now, worker=worker)
        )
    if not result.rowcount:
        return None
    return get_job(session=session, job_id=queued)


def beat(*, session: Session, job_id: int, progress: Progress, now: datetime) -> None:
    """The running job's heartbeat and progress written; a cancel asked meanwhile is passed
    to its work (``progress.cancelled``)."""
    with writing(session):
        beaten = session.exec(
            update(Job)
            .where(col(Job.id) == job_id, col(Job.state) == JobState.RUNNING.value)
            .values(
                heartbeat_at=now,
                step=progress.step[:80],
                done=progress.done,
                total=progress.total,
            )
        )
        asked = session.exec(select(Job.cancel_requested).where(Job.id == job_id)).first()
    # asked to stop, or no longer running (failed by another process: its work stops)
    if asked or not beaten.rowcount:
        progress.cancelled.set()


def finish(
    *,
    session: Session,
    job_id: int,
    state: JobState,
    now: datetime,
    progress: Progress,
    result: dict[str, Any] | None = None,
    error: str | None = None,
) -> None:
    """The job's end, written (unless a process already failed it as stopped)."""
    with writing(session):
        session.exec(
            update(Job)
            .where(col(Job.id) == job_id, col(Job.state) == JobState.RUNNING.value)
            .values(
                state=state.value,
                finished_at=now,
                heartbeat_at=now,
                step=progress.step[:80],
                done=progress.done,
                total=progress.total,
                result=result,
                error=None if error is None else error[:2000],
            )
        )


#: Jobs a golden set's page lists, newest first.
LISTED = 5


def list_jobs(*, session: Session, golden_set_id: int, limit: int = LISTED) -> list[Job]:
    """The golden set's latest jobs, newest first."""
    return list(
        session.exec(
            select(Job)
            .where(Job.golden_set_id == golden_set_id)
            .order_by(col(Job.id).desc())
            .limit(limit)
        )
    )
