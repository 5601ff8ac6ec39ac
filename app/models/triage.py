"""Triages: the misses of a run at a depth, their labels, and the audit trail."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlmodel import Field, SQLModel

from app.models.base import UTCDateTime, utcnow

if TYPE_CHECKING:
    pass

OTHER = "other"
#: A reviewer's answer in an overlap triage when the evidence does not decide: never a final
#: label; a miss with one goes to adjudication.
CANT_TELL = "cant-tell"
#: The backlog's name for misses not labelled yet (beside the causes, OTHER and covered).
UNLABELLED = "unlabelled"


class MissState(StrEnum):
    OPEN = "open"
    LABELLED = "labelled"
    #: A duplicate-cluster mate of the document is in the candidates: the run delivered its
    #: evidence. Off the queue unless a lead includes such misses (they become open).
    COVERED = "covered"
    #: Every reviewer of an overlap miss has labelled it and they disagree (or one could not
    #: tell): it waits in the adjudication queue for its final label.
    DISPUTED = "disputed"
    #: The run is in a series and the series' latest earlier triage gave the same (query,
    #: document) pair a final label in a named cause: the miss carries that label
    #: (``Miss.carried_from``), off the queue until a lead sends it back.
    CARRIED = "carried"


class Resolution(StrEnum):
    """What a final label rests on (``Miss.resolution``; None on a single reviewer's)."""

    SINGLE = "single"
    AGREED = "agreed"
    ADJUDICATED = "adjudicated"


def shown_cause(state: str, category: str | None) -> str:
    """Where a miss stands, in one word, the same on every page and in every download: its
    cause (a named one or ``other``), ``covered`` (a duplicate of it was retrieved; off the
    queue) or ``unlabelled``."""
    if category:
        return category
    return MissState.COVERED.value if state == MissState.COVERED.value else UNLABELLED


class LabelAction(StrEnum):
    """What a ``LabelEvent`` records (its ``action`` column)."""

    LABEL = "label"
    #: A lead labels a miss labelled before.
    RELABEL = "relabel"
    RELEASE = "release"
    #: A reviewer passes a miss on to others, saying why (the event's note).
    SKIP = "skip"
    #: A reviewer takes back a miss they skipped: it comes back on their queue.
    TAKE_BACK = "take_back"
    UNDO = "undo"
    #: One reviewer's label on an overlap miss (``Review``): not final by itself.
    REVIEW = "review"
    #: The overlap reviewers agreed: the miss has its final label.
    AGREE = "agree"
    #: The overlap reviewers disagreed (or one could not tell): to adjudication.
    DISPUTE = "dispute"
    #: An adjudicator (or a lead) gave a disputed or agreed overlap miss its final label.
    ADJUDICATE = "adjudicate"
    #: A lead put a miss covered by a duplicate on the queue, or took it back off it.
    INCLUDE = "include"
    EXCLUDE = "exclude"
    #: A lead sent a miss carrying an earlier triage's label back to the queue.
    REQUEUE = "requeue"
    #: Refused attempts, kept so no label is silently lost: a stale version (409), or no
    #: lease / no lead role (403).
    CONFLICT = "conflict"
    REFUSED = "refused"


#: The actions that put a label in force (what undo takes back).
LABEL_ACTIONS = (LabelAction.LABEL, LabelAction.RELABEL)


class Triage(SQLModel, table=True):
    __tablename__ = "triage"
    __table_args__ = (UniqueConstraint("run_id", "depth", "k"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(
        sa_column=Column(
            Integer, ForeignKey("run.id", ondelete="CASCADE"), nullable=False, index=True
        )
    )
    depth: int
    k: int
    misses: int = 0
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    created_by_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("user_account.id", ondelete="SET NULL")),
    )
    closed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    #: Overlap: how many distinct reviewers label each sampled miss (1: every miss has one
    #: reviewer, as before overlap existed), the sampled fraction and the sample's seed.
    reviewers: int = Field(
        default=1, sa_column=Column(Integer, nullable=False, server_default=text("1"))
    )
    overlap_fraction: float = Field(
        default=1.0, sa_column=Column(Float, nullable=False, server_default=text("1.0"))
    )
    overlap_seed: int = Field(
        default=0, sa_column=Column(Integer, nullable=False, server_default=text("0"))
    )
    #: The detector run whose clusters decided which misses are covered by a duplicate
    #: (the golden set's when the triage was made); None: no clusters then.
    detector_run_id: int | None = None
    #: ... and the threshold its clusters were applied at then.
    detector_threshold: float | None = None
    #: The triage whose final labels this one carries (its run's series' latest earlier
    #: triage when it was made); None: it carries nothing.
    carried_from_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("triage.id", ondelete="SET NULL")),
    )


class Miss(SQLModel, table=True):
    """A relevant document outside the run's top ``depth``: one item of the work queue."""

    __tablename__ = "miss"
    __table_args__ = (
        UniqueConstraint("triage_id", "qid", "doc_id"),
        # claim: the next open miss in queue order
        Index("ix_miss_queue", "triage_id", "state", "position"),
        # the tally (app/services/queue/tally.py): misses by state, cause, resolution and
        # labels in, read from the index alone
        Index("ix_miss_summary", "triage_id", "state", "category", "resolution", "reviewed"),
        # the backlog's first page, and its filters by cause and by reviewer
        Index("ix_miss_position", "triage_id", "position"),
        Index("ix_miss_category", "triage_id", "category", "position"),
        # the dashboard's live leases: the few misses whose lease runs past now
        Index("ix_miss_lease", "triage_id", "lease_expires_at"),
        # claim's "my current miss": the caller's open lease, without scanning every open miss
        Index(
            "ix_miss_holder",
            "triage_id",
            "lease_holder_id",
            "position",
            postgresql_where=text("state = 'open'"),
            sqlite_where=text("state = 'open'"),
        ),
        # reviewer throughput from the index alone: who labelled, what the label rests on, when
        Index(
            "ix_miss_labelled_by",
            "triage_id",
            "labelled_by_id",
            "state",
            "reviewers",
            "resolution",
            "labelled_at",
        ),
        # the dashboard's hint accuracy, grouped from the index alone
        Index(
            "ix_miss_hints",
            "triage_id",
            "state",
            "category",
            "hint",
            "hint_not_indexed",
            "hint_vocabulary",
            "hint_chunk",
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    triage_id: int = Field(
        sa_column=Column(Integer, ForeignKey("triage.id", ondelete="CASCADE"), nullable=False)
    )
    qid: str = Field(sa_column=Column(String(200), nullable=False))
    doc_id: str = Field(sa_column=Column(String(300), nullable=False))
    grade: int
    #: Rank in the run when returned deeper than ``depth``; None: not retrieved.
    rank: int | None = None
    #: Queue order: the misses of one query together, then grade descending.
    position: int
    state: str = Field(default=MissState.OPEN.value, sa_column=Column(String(16), nullable=False))
    category: str | None = Field(default=None, sa_column=Column(String(100)))
    note: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    version: int = 1
    lease_holder_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("user_account.id", ondelete="SET NULL")),
    )
    lease_expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    labelled_by_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("user_account.id", ondelete="SET NULL")),
    )
    labelled_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    #: The cause the hints suggest (app/eval/hints.py), and which hints fired: the dashboard
    #: measures their precision and recall against the reviewers' labels.
    hint: str | None = Field(default=None, sa_column=Column(String(100)))
    hint_not_indexed: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    hint_vocabulary: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    hint_chunk: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    #: The evidence shown on the review page: ``HintEvidence.to_json()`` (app/eval/hints.py).
    evidence: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    #: The cluster mate in the candidates that makes this miss "covered by a duplicate".
    covered_by: str | None = Field(default=None, sa_column=Column(String(300)))
    #: How many distinct reviewers label this miss (its triage's overlap when sampled, else 1).
    reviewers: int = Field(
        default=1, sa_column=Column(Integer, nullable=False, server_default=text("1"))
    )
    #: What the final label rests on for an overlap miss (``Resolution``); None otherwise.
    resolution: str | None = Field(default=None, sa_column=Column(String(16)))
    #: Double review: how many reviewers' blind labels (``Review``) are in. An open miss with
    #: some is waiting for another reviewer (``lifecycle.Stage.REVIEWING``).
    reviewed: int = Field(
        default=0, sa_column=Column(Integer, nullable=False, server_default=text("0"))
    )
    #: A carried miss (``MissState.CARRIED``): the triage its label comes from.
    carried_from: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("triage.id", ondelete="SET NULL")),
    )


class Review(SQLModel, table=True):
    """One reviewer's part in an overlap miss: their lease while they read it, then their
    label (``category`` None until they label). One row per (miss, reviewer): a reviewer
    never labels one miss twice. Blind: nobody else sees it until the miss is resolved."""

    __tablename__ = "review"
    __table_args__ = (
        UniqueConstraint("miss_id", "reviewer_id"),
        # the agreement seam and per-reviewer figures: a triage's labels by reviewer
        Index("ix_review_triage", "triage_id", "reviewer_id", "labelled_at", "category"),
        # the dashboard's live leases: the few reviews whose lease runs past now
        Index("ix_review_lease", "triage_id", "lease_expires_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    miss_id: int = Field(
        sa_column=Column(Integer, ForeignKey("miss.id", ondelete="CASCADE"), nullable=False)
    )
    triage_id: int = Field(
        sa_column=Column(Integer, ForeignKey("triage.id", ondelete="CASCADE"), nullable=False)
    )
    reviewer_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("user_account.id", ondelete="SET NULL")),
    )
    category: str | None = Field(default=None, sa_column=Column(String(100)))
    note: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    lease_expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    labelled_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class LabelEvent(SQLModel, table=True):
    """Append-only audit: every label, relabel, release, skip and undo (``LabelAction``)."""

    __tablename__ = "label_event"
    __table_args__ = (
        # the kept answers' key (app/services/triage/kept.py): the newest event and those
        # just before it, from the index alone
        Index("ix_label_event_triage", "triage_id", "id"),
        # reviewer throughput: labels per user in a triage
        Index("ix_label_event_throughput", "triage_id", "action", "user_id", "at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    miss_id: int = Field(
        sa_column=Column(
            Integer, ForeignKey("miss.id", ondelete="CASCADE"), nullable=False, index=True
        )
    )
    triage_id: int = Field(
        sa_column=Column(Integer, ForeignKey("triage.id", ondelete="CASCADE"), nullable=False)
    )
    user_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("user_account.id", ondelete="SET NULL")),
    )
    at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    action: str = Field(sa_column=Column(String(32), nullable=False))
    before: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    after: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    note: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))


class MissSkip(SQLModel, table=True):
    """A skip in force: a reviewer passed a miss on (``queue.skip``) and has not taken it
    back. Kept by skip and take-back beside their events (the events stay the audit trail),
    so the queue, the dashboard and the backlog read the skips in force instead of folding
    every skip event of the triage. One row per (miss, reviewer): a later skip replaces the
    reason."""

    __tablename__ = "miss_skip"
    __table_args__ = (
        UniqueConstraint("miss_id", "user_id"),
        # the queue's "misses this reviewer skipped" and the dashboard's list in skip order
        Index("ix_miss_skip_triage", "triage_id", "user_id", "miss_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    miss_id: int = Field(
        sa_column=Column(Integer, ForeignKey("miss.id", ondelete="CASCADE"), nullable=False)
    )
    triage_id: int = Field(
        sa_column=Column(Integer, ForeignKey("triage.id", ondelete="CASCADE"), nullable=False)
    )
    user_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("user_account.id", ondelete="SET NULL")),
    )
    reason: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
