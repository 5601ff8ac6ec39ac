"""Background jobs: long work (a detection over a large corpus) run by the service's own
processes, with its progress, a cancel, and a defined end (app/services/jobs.py)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Boolean, Column, ForeignKey, Index, Integer, String, Text, false
from sqlmodel import Field, SQLModel

from app.models.base import UTCDateTime, utcnow
from app.readmodel import IsoDateTime, ReadModel


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: The states a job ends in.
ENDED = (JobState.DONE.value, JobState.FAILED.value, JobState.CANCELLED.value)


class Job(SQLModel, table=True):
    __tablename__ = "job"
    __table_args__ = (Index("ix_job_state", "state", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    #: What it does ("detection")
    kind: str = Field(sa_column=Column(String(32), nullable=False))
    golden_set_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("golden_set.id", ondelete="CASCADE"), index=True),
    )
    #: What it was asked (the request's body)
    params: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    state: str = Field(default=JobState.QUEUED.value, sa_column=Column(String(16), nullable=False))
    #: What it has done of its ``total`` (documents read, ...), and in which step
    done: int = 0
    total: int = 0
    step: str = Field(default="", sa_column=Column(String(80), nullable=False, default=""))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    created_by_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("user_account.id", ondelete="SET NULL")),
    )
    started_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    #: Written by the process running it every few seconds: a running job whose heartbeat
    #: stopped is failed by any process (its own was killed or restarted)
    heartbeat_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    #: Which process runs it ("host:pid")
    worker: str = Field(default="", sa_column=Column(String(200), nullable=False, default=""))
    cancel_requested: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    #: Why it failed, in words
    error: str | None = Field(default=None, sa_column=Column(Text))
    #: What it made ({"detector_run_id": ...})
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))


class JobResult(ReadModel):
    """What a job made."""

    #: a detection's detector run
    detector_run_id: int | None = None


class JobPublic(ReadModel):
    """A job as the API answers it (``GET /api/v1/jobs/{id}``)."""

    id: int
    kind: str
    golden_set_id: int | None
    state: str
    done: int
    total: int
    step: str
    created_at: IsoDateTime
    started_at: IsoDateTime | None
    finished_at: IsoDateTime | None
    cancel_requested: bool
    error: str | None
    result: JobResult | None
