"""Exports: which tracker issue holds which cause of a triage, so re-export updates it."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, JsonValue
from pydantic import Field as PydanticField
from sqlalchemy import JSON, Column, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.models.base import UTCDateTime, utcnow
from app.readmodel import absent_when_none


class Export(SQLModel, table=True):
    __tablename__ = "export"
    __table_args__ = (UniqueConstraint("triage_id", "tracker", "target", "category"),)

    id: int | None = Field(default=None, primary_key=True)
    triage_id: int = Field(
        sa_column=Column(Integer, ForeignKey("triage.id", ondelete="CASCADE"), nullable=False)
    )
    tracker: str = Field(sa_column=Column(String(20), nullable=False))
    target: str = Field(sa_column=Column(String(500), nullable=False))
    category: str = Field(sa_column=Column(String(100), nullable=False))
    #: The tracker's own key: issue number (GitHub), iid (GitLab), key (Jira), id (Linear).
    external_id: str = Field(sa_column=Column(String(200), nullable=False))
    url: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    payload_hash: str = Field(sa_column=Column(String(64), nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class WebhookEvent(StrEnum):
    """What a golden set's webhook can be told (``WebhookDelivery.event``)."""

    #: A miss was labelled, relabelled or its label undone.
    MISS_LABELLED = "miss.labelled"
    #: Every miss of a triage is in a named cause.
    TRIAGE_CLOSED = "triage.closed"


class WebhookDelivery(SQLModel, table=True):
    """An event waiting to be posted (an outbox): written in the transaction of the label
    that caused it, delivered afterwards, so labelling never waits on the network."""

    __tablename__ = "webhook_delivery"
    __table_args__ = (Index("ix_webhook_delivery_pending", "delivered_at", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    golden_set_id: int = Field(
        sa_column=Column(Integer, ForeignKey("golden_set.id", ondelete="CASCADE"), nullable=False)
    )
    event: str = Field(sa_column=Column(String(40), nullable=False))
    payload: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    attempts: int = 0
    locked_until: datetime | None = Field(default=None, sa_type=UTCDateTime)
    delivered_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_error: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))


# --- Read models: what an export answers (API.md, "Backlog and exports"). ------------------


class ExportAction(StrEnum):
    """What an export did with the issue of one cause."""

    CREATE = "create"
    UPDATE = "update"
    #: The issue holds this text already: nothing was sent.
    UNCHANGED = "unchanged"
    #: The tracker refused or did not answer; exporting again completes it.
    FAILED = "failed"


class ExportResult(BaseModel):
    """What an export did (or, in a dry run, would do) for one cause."""

    model_config = ConfigDict(frozen=True)

    category: str
    action: ExportAction
    external_id: str | None = None
    url: str | None = None
    #: Why the cause failed (only for ``failed``; absent otherwise).
    error: str | None = PydanticField(default=None, exclude_if=absent_when_none)


class ExportRequest(BaseModel):
    """A request a dry run would send, exactly, with credentials masked (and a webhook's URL
    past its host: its path or query may be its secret)."""

    model_config = ConfigDict(frozen=True)

    method: str
    url: str
    headers: dict[str, str]
    #: The JSON body, or the text of a body that is not JSON.
    body: JsonValue
    category: str

    @property
    def pretty(self) -> str:
        """The body as a dry run shows it: JSON indented, text as it is."""
        if isinstance(self.body, str):
            return self.body
        return json.dumps(self.body, indent=2, ensure_ascii=False)


class ExportOutcome(BaseModel):
    """The answer of an export: one result per cause; the requests of a dry run only."""

    model_config = ConfigDict(frozen=True)

    results: list[ExportResult]
    requests: list[ExportRequest] | None = PydanticField(default=None, exclude_if=absent_when_none)


class ExportRecord(BaseModel):
    """A tracker issue a triage was exported to (the dashboard's list)."""

    model_config = ConfigDict(frozen=True)

    tracker: str
    target: str
    category: str
    external_id: str
    url: str
    updated_at: datetime

    @classmethod
    def of(cls, row: Export) -> ExportRecord:
        return cls(
            tracker=row.tracker,
            target=row.target,
            category=row.category,
            external_id=row.external_id,
            url=row.url,
            updated_at=row.updated_at,
        )
