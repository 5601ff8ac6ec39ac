"""Golden sets: queries, graded judgments, and the optional corpus manifest."""

from __future__ import annotations

from datetime import datetime
from typing import Any

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
    true,
)
from sqlmodel import Field, SQLModel

from app.eval.golden import QrelsReport
from app.eval.hints import HINT_CAUSES
from app.models.base import UTCDateTime, utcnow
from app.readmodel import IsoDateTime, ReadModel, absent_when_none
from app.security import shown_url

#: The three causes of DESIGN.md, which the hints can suggest.
DEFAULT_CAUSES = list(HINT_CAUSES)


def _golden_fk(*, index: bool = True) -> Column[int]:
    """The golden set a row belongs to; ``index=False`` where a unique key that leads with
    it already finds a golden set's rows (one index less to keep at each of 800,000 rows)."""
    return Column(
        Integer, ForeignKey("golden_set.id", ondelete="CASCADE"), nullable=False, index=index
    )


class GoldenSet(SQLModel, table=True):
    __tablename__ = "golden_set"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(String(200), unique=True, nullable=False))
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    min_grade: int = 1
    causes: list[str] = Field(default_factory=lambda: list(DEFAULT_CAUSES), sa_type=JSON)
    queries: int = 0
    judgments: int = 0
    relevant: int = 0
    documents: int = 0
    #: An index manifest was imported beside the corpus: documents outside it are not indexed.
    #: Without one, the corpus itself is what the index holds.
    has_manifest: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    report: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    created_by_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("user_account.id", ondelete="SET NULL")),
    )
    #: Where the events of this golden set's triages are posted (signed), and which.
    webhook_url: str | None = Field(default=None, sa_column=Column(Text))
    webhook_events: list[str] = Field(default_factory=list, sa_type=JSON)
    #: Set by the first label of any kind on a miss of this golden set (a reviewer's blind
    #: label included): the causes cannot change after it (app/services/queue/store.py).
    causes_frozen: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    #: The detector run whose cluster ids the corpus carries now, and the clustering (its
    #: ``DocumentCluster`` rows) that holds them; None: no document has one
    #: (app/models/dedup.py).
    detector_run_id: int | None = None
    clustering_id: int | None = None


class GoldenQuery(SQLModel, table=True):
    __tablename__ = "golden_query"
    __table_args__ = (UniqueConstraint("golden_set_id", "qid"),)

    id: int | None = Field(default=None, primary_key=True)
    golden_set_id: int = Field(sa_column=_golden_fk(index=False))
    qid: str = Field(sa_column=Column(String(200), nullable=False))
    text: str | None = Field(default=None, sa_column=Column(Text))


class Judgment(SQLModel, table=True):
    __tablename__ = "judgment"
    __table_args__ = (UniqueConstraint("golden_set_id", "qid", "doc_id"),)

    id: int | None = Field(default=None, primary_key=True)
    golden_set_id: int = Field(sa_column=_golden_fk(index=False))
    qid: str = Field(sa_column=Column(String(200), nullable=False))
    doc_id: str = Field(sa_column=Column(String(300), nullable=False))
    grade: int


class Document(SQLModel, table=True):
    """The corpus / index manifest: review context, and evidence for "not indexed"."""

    __tablename__ = "document"
    __table_args__ = (
        UniqueConstraint("golden_set_id", "doc_id"),
        Index("ix_document_parent", "golden_set_id", "parent_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    golden_set_id: int = Field(sa_column=_golden_fk())
    doc_id: str = Field(sa_column=Column(String(300), nullable=False))
    title: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    text: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    parent_id: str | None = Field(default=None, sa_column=Column(String(300)))
    chunk_index: int | None = None
    #: In the index manifest (always, when the golden set has no separate manifest).
    indexed: bool = Field(
        default=True, sa_column=Column(Boolean, nullable=False, server_default=true())
    )


class WebhookPublic(ReadModel):
    """Where a golden set's events are posted (``url`` null: nowhere), and which. The URL is
    shown past its host elided ("https://hooks.example.com/…"): a webhook's path or query
    often is its secret, and every reader of the golden set sees this."""

    url: str | None
    events: list[str]


class CorpusReport(ReadModel):
    """The corpus imported with the judgments."""

    documents: int
    relevant_documents_not_in_corpus: int


class ManifestReport(ReadModel):
    """The index manifest imported with the corpus: which documents the index holds."""

    indexed: int
    not_indexed: int
    relevant_not_indexed: int
    #: ids the index holds that the corpus does not describe (no text to show)
    unknown_to_corpus: int


class GoldenSetReport(ReadModel):
    """A golden set's import report as stored: ``corpus`` and ``manifest`` only when those
    files were imported (absent from the JSON otherwise); every import writes ``judgments``
    (a row made otherwise has an empty report)."""

    #: What reading the judgments found (the uploaded file's name as ``source``).
    judgments: QrelsReport | None = PydanticField(default=None, exclude_if=absent_when_none)
    corpus: CorpusReport | None = PydanticField(default=None, exclude_if=absent_when_none)
    manifest: ManifestReport | None = PydanticField(default=None, exclude_if=absent_when_none)


class GoldenSetPublic(ReadModel):
    """A golden set as the API answers it and the pages show it (API.md)."""

    id: int
    name: str
    description: str
    min_grade: int
    queries: int
    judgments: int
    relevant: int
    documents: int
    causes: list[str]
    webhook: WebhookPublic
    report: GoldenSetReport
    created_at: IsoDateTime

    @classmethod
    def of(cls, golden: GoldenSet) -> GoldenSetPublic:
        return cls.model_validate(
            {
                **golden.model_dump(),
                "webhook": {
                    "url": shown_url(golden.webhook_url) if golden.webhook_url else None,
                    "events": golden.webhook_events,
                },
            }
        )

    @property
    def has_manifest(self) -> bool:
        """An index manifest was imported beside the corpus (its counts are in the report)."""
        return self.report.manifest is not None
