"""Jobs' records on both databases: processes claiming at the same moment take each job
once, a job whose heartbeat stopped is failed with its reason and stays failed when its
(presumed dead) process writes its end after all, and a cancel of a queued job ends it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.db import writing
from app.models import JobState
from app.services import jobs
from app.services.errors import Conflict
from tests.support.concurrency import at_once_n

NOW = datetime(2026, 12, 7, 12, tzinfo=UTC)
CLAIMERS = 6


def _queue(engine: Engine, n: int) -> list[int]:
    with Session(engine, expire_on_commit=False) as session:
        made = [
            jobs.create_job(
                session=session,
                kind="detection",
                golden_set_id=None,
                params={},
                user=None,
                total=10,
                now=NOW,
            )
            for _ in range(n)
        ]
    return [j.id for j in made if j.id is not None]


def test_each_job_is_claimed_once(engine: Engine) -> None:
    queued = _queue(engine, 2)

    def claim(i: int) -> tuple[int | None]:
        with Session(engine, expire_on_commit=False) as session:
            job = jobs.claim_next(session=session, worker=f"w{i}", now=NOW)
            return (None if job is None else job.id,)

    taken = [j for (j,) in at_once_n(CLAIMERS, claim) if j is not None]
    assert len(taken) == len(set(taken))
    assert set(taken) <= set(queued)
    assert taken  # at least one process got one


def test_a_stopped_heartbeat_fails_the_job_for_good(engine: Engine) -> None:
    (job_id,) = _queue(engine, 1)
    with Session(engine, expire_on_commit=False) as session:
        claimed = jobs.claim_next(session=session, worker="w", now=NOW)
        assert claimed is not None
        assert claimed.id == job_id
        progress = jobs.Progress(step="reading the corpus", done=3, total=10)
        jobs.beat(session=session, job_id=job_id, progress=progress, now=NOW)
        # another process, before the heartbeat is stale, and after
        later = NOW + timedelta(seconds=jobs.STALE_SECONDS - 1)
        assert jobs.fail_stale(session=session, now=later) == 0
        stale = NOW + timedelta(seconds=jobs.STALE_SECONDS + 1)
        assert jobs.fail_stale(session=session, now=stale) == 1
        failed = jobs.get_job(session=session, job_id=job_id)
        assert (failed.state, failed.error) == (JobState.FAILED.value, jobs.STOPPED)
        assert (failed.step, failed.done, failed.total) == ("reading the corpus", 3, 10)
        # its process was not dead after all: its end does not overwrite the failure
        jobs.finish(
            session=session,
            job_id=job_id,
            state=JobState.DONE,
            now=stale,
            progress=progress,
            result={"detector_run_id": 1},
        )
        assert jobs.get_job(session=session, job_id=job_id).state == JobState.FAILED.value
        with pytest.raises(Conflict) as ended:
            jobs.request_cancel(session=session, job_id=job_id, now=stale)
        assert ended.value.code == "job_ended"


def test_a_queued_job_is_cancelled_at_once(engine: Engine) -> None:
    (job_id,) = _queue(engine, 1)
    with Session(engine, expire_on_commit=False) as session:
        cancelled = jobs.request_cancel(session=session, job_id=job_id, now=NOW)
        assert cancelled.state == JobState.CANCELLED.value
        assert cancelled.finished_at is not None
        assert jobs.claim_next(session=session, worker="w", now=NOW) is None


def test_a_job_failed_meanwhile_stops_its_work(engine: Engine) -> None:
    (job_id,) = _queue(engine, 1)
    with Session(engine, expire_on_commit=False) as session:
        assert jobs.claim_next(session=session, worker="w", now=NOW) is not None
        progress = jobs.Progress(step="writing the pairs", job_id=job_id)
        stale = NOW + timedelta(seconds=jobs.STALE_SECONDS + 1)
        assert jobs.fail_stale(session=session, now=stale) == 1
        # its process was alive: its next heartbeat tells its work to stop, and its last
        # transaction would not commit
        jobs.beat(session=session, job_id=job_id, progress=progress, now=stale)
        assert progress.cancelled.is_set()
        with pytest.raises(jobs.Cancelled), writing(session):
            jobs.Progress(job_id=job_id).confirm(session)


def test_an_apply_stopped_after_its_switch_leaves_the_rest_to_a_job(engine: Engine) -> None:
    with Session(engine, expire_on_commit=False) as session:
        job = jobs.create_job(
            session=session,
            kind="apply",
            golden_set_id=None,
            params={},
            user=None,
            total=0,
            now=NOW,
        )
        assert job.id is not None
        assert jobs.claim_next(session=session, worker="w", now=NOW) is not None
        progress = jobs.Progress(step=jobs.MEASURING, done=1, total=3)
        jobs.beat(session=session, job_id=job.id, progress=progress, now=NOW)
        stale = NOW + timedelta(seconds=jobs.STALE_SECONDS + 1)
        assert jobs.fail_stale(session=session, now=stale) == 1
        failed = jobs.get_job(session=session, job_id=job.id)
        assert failed.state == JobState.FAILED.value
        assert failed.error is not None
        assert "after its clusters were made live" in failed.error
        follow = jobs.claim_next(session=session, worker="w", now=stale)
        assert follow is not None
        assert follow.kind == "measure"
        assert f"job {follow.id}" in failed.error
