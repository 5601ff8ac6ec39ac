"""Triages: the misses of a run at a depth, their labels, and the audit trail."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    PlainSerializer,
    WithJsonSchema,
    computed_field,
)
from pydantic import Field as PydanticField
from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlmodel import Field, SQLModel

from app.models.base import UTCDateTime, utcnow

if TYPE_CHECKING:
    from app.models.golden import GoldenSet
    from app.models.runs import Run

OTHER = "other"


class MissState(StrEnum):
    OPEN = "open"
    LABELLED = "labelled"
    #: A duplicate-cluster mate of the document is in the candidates: the run delivered its
    #: evidence. Off the queue unless a lead includes such misses (they become open).
    COVERED = "covered"


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


class Miss(SQLModel, table=True):
    """A relevant document outside the run's top ``depth``: one item of the work queue."""

    __tablename__ = "miss"
    __table_args__ = (
        UniqueConstraint("triage_id", "qid", "doc_id"),
        # claim: the next open miss in queue order
        Index("ix_miss_queue", "triage_id", "state", "position"),
        # the dashboard's counts per state and cause, read from the index alone
        Index("ix_miss_summary", "triage_id", "state", "category"),
        # the backlog's first page, and its filters by cause and by reviewer
        Index("ix_miss_position", "triage_id", "position"),
        Index("ix_miss_category", "triage_id", "category", "position"),
        Index("ix_miss_labelled_by", "triage_id", "labelled_by_id"),
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
    #: The evidence shown on the review page (MissHints.evidence()).
    evidence: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    #: The cluster mate in the candidates that makes this miss "covered by a duplicate".
    covered_by: str | None = Field(default=None, sa_column=Column(String(300)))


class LabelEvent(SQLModel, table=True):
    """Append-only audit: every label, relabel, release, skip and undo."""

    __tablename__ = "label_event"
    __table_args__ = (
        Index("ix_label_event_triage", "triage_id", "at"),
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


# --- Read models: what the services answer, the API declares and the pages render. ---------

#: A timestamp as the API has always written it: ``datetime.isoformat()`` (``+00:00``, not Z).
IsoDateTime = Annotated[
    datetime,
    PlainSerializer(lambda value: value.isoformat(), return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


def _absent_when_none(value: object) -> bool:
    return value is None


class _ReadModel(BaseModel):
    model_config = ConfigDict(frozen=True)


@dataclass(frozen=True)
class TriageContext:
    """A triage with the run it triages and that run's golden set: loaded by one query
    (``app.services.triages.triage_context``), read by every page and answer about it."""

    triage: Triage
    run: Run
    golden: GoldenSet

    @property
    def triage_id(self) -> int:
        assert self.triage.id is not None
        return self.triage.id

    @property
    def causes(self) -> list[str]:
        """The golden set's named causes, in taxonomy order."""
        return list(self.golden.causes)


class MissPublic(_ReadModel):
    """A miss as the API answers it and the pages show it (API.md, "Triages and the queue")."""

    id: int
    qid: str
    doc_id: str
    grade: int
    #: Rank in the run when returned deeper than the triage's depth; None: not retrieved.
    rank: int | None
    state: MissState
    category: str | None
    note: str
    version: int
    #: The cause the hints suggest (app/eval/hints.py).
    hint: str | None
    #: The duplicate-cluster mate in the candidates that makes the miss "covered".
    covered_by: str | None
    #: The user id holding the miss's lease.
    lease_holder: int | None
    lease_expires_at: IsoDateTime | None

    @classmethod
    def of(cls, miss: Miss) -> MissPublic:
        assert miss.id is not None
        return cls(
            id=miss.id,
            qid=miss.qid,
            doc_id=miss.doc_id,
            grade=miss.grade,
            rank=miss.rank,
            state=MissState(miss.state),
            category=miss.category,
            note=miss.note,
            version=miss.version,
            hint=miss.hint,
            covered_by=miss.covered_by,
            lease_holder=miss.lease_holder_id,
            lease_expires_at=miss.lease_expires_at,
        )


class MissPage(_ReadModel):
    """One page of a triage's misses, in the API's list shape."""

    items: list[MissPublic]
    total: int


class LabelSnapshot(_ReadModel):
    """A miss's label before or after an event (``queue.snapshot``)."""

    state: str
    category: str | None
    note: str
    version: int
    #: Written by a release only: whose lease was given back.
    lease_holder: int | None = PydanticField(default=None, exclude_if=_absent_when_none)


class LabelEventPublic(_ReadModel):
    """One entry of a miss's audit trail."""

    id: int
    miss_id: int
    user_id: int | None
    at: IsoDateTime
    action: str
    before: LabelSnapshot
    after: LabelSnapshot
    note: str

    @classmethod
    def of(cls, event: LabelEvent) -> LabelEventPublic:
        assert event.id is not None
        return cls(
            id=event.id,
            miss_id=event.miss_id,
            user_id=event.user_id,
            at=event.at,
            action=event.action,
            before=LabelSnapshot.model_validate(event.before),
            after=LabelSnapshot.model_validate(event.after),
            note=event.note,
        )


class LabelEventPage(_ReadModel):
    """One page of an audit trail, in the API's list shape."""

    items: list[LabelEventPublic]
    total: int


class TriagePublic(_ReadModel):
    """A triage without its counts (creating one, listing a run's triages)."""

    id: int
    run_id: int
    depth: int
    k: int
    misses: int
    created_at: IsoDateTime

    @classmethod
    def of(cls, triage: Triage) -> TriagePublic:
        assert triage.id is not None
        return cls(
            id=triage.id,
            run_id=triage.run_id,
            depth=triage.depth,
            k=triage.k,
            misses=triage.misses,
            created_at=triage.created_at,
        )


class ClosureReport(_ReadModel):
    """Counts per cause and whether the categories close (DESIGN.md): made by
    ``app.services.triages.closure_report`` alone."""

    misses: int
    counts: dict[str, int]
    other: int
    unlabelled: int
    #: Misses covered by a duplicate and left off the queue: counted apart, outside closure.
    covered: int
    closes: bool
    #: The closure sentence (``app.services.triages.closure_sentence``).
    closure: str


class TriageDetail(TriagePublic):
    """A triage with its closure report (``GET /triages/{id}``)."""

    counts: dict[str, int]
    other: int
    unlabelled: int
    covered: int
    closes: bool
    closure: str

    @classmethod
    def of_report(cls, triage: Triage, report: ClosureReport) -> TriageDetail:
        return cls(
            **TriagePublic.of(triage).model_dump(),
            **report.model_dump(include={"counts", "other", "unlabelled", "covered"}),
            closes=report.closes,
            closure=report.closure,
        )


class CoveredMoved(_ReadModel):
    """How many covered misses a lead put on (or took off) the queue, and the new counts."""

    moved: int
    triage: TriageDetail


class TakenBack(_ReadModel):
    """How many skipped misses came back on the caller's queue."""

    taken_back: int


class HintAccuracy(_ReadModel):
    """How one hint fared against the reviewers' labels.

    precision = labelled misses with the hint that reviewers put in its cause / labelled
    misses with the hint; recall = labelled misses of the cause that had the hint / labelled
    misses of the cause. None when there is nothing to divide by yet.
    """

    cause: str
    hinted: int
    agreed: int
    labelled_as_cause: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def precision(self) -> float | None:
        return self.agreed / self.hinted if self.hinted else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def recall(self) -> float | None:
        return self.agreed / self.labelled_as_cause if self.labelled_as_cause else None


class HintReport(_ReadModel):
    """The hints' precision and recall in a triage, and how often a suggestion was taken."""

    triage_id: int
    hints: list[HintAccuracy]
    #: Labelled misses that had a suggestion, and how many got the suggested cause.
    suggested: int
    accepted: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.suggested if self.suggested else None
