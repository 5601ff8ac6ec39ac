"""Exports: which tracker issue holds which cause of a triage, so re-export updates it."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Column, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.models.base import UTCDateTime, utcnow


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
