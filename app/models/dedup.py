"""Detector runs: where a golden set's duplicate-cluster ids come from (DESIGN.md, Duplicates).

A ``DetectorRun`` is one near-duplicate detection over the golden set's corpus
(``app.eval.dedup``) with its parameters, or a set of cluster ids imported from elsewhere
(with the corpus, or from a side file made by datatrove, text-dedup or NeMo Curator). A
detection keeps every verified candidate pair down to ``low`` (``DocPair``); a stratified
sample of them per similarity band goes on the pair-review queue, where reviewers say whether
the two texts are the same content. Applying a threshold writes the run's clusters (connected
components of its pairs at or above it) as a ``Clustering``, its documents' cluster ids in
``DocumentCluster`` rows nobody reads yet, then makes it the golden set's clustering in one
short transaction (``GoldenSet.clustering_id``), and records the estimated precision and
recall at that threshold. A clustering never changes once written: earlier ones stay, for
the runs measured with them, and every cluster figure names the clustering it rests on.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

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
)
from sqlmodel import Field, SQLModel

from app.models.base import UTCDateTime, utcnow


class DetectorSource(StrEnum):
    #: Found by misstriage's detector over the stored corpus: pairs kept, calibrated.
    DETECTOR = "detector"
    #: Cluster ids made elsewhere (with the corpus, or a side file): not calibrated.
    IMPORTED = "imported"


class PairAction(StrEnum):
    """What a ``PairEvent`` records."""

    LABEL = "label"
    #: A label changed by a lead, or by its own reviewer, on a labelled pair.
    RELABEL = "relabel"
    RELEASE = "release"
    SKIP = "skip"
    #: Refused attempts, kept so no judgment is silently lost: a stale version (409).
    CONFLICT = "conflict"


def _user_fk() -> Column[int]:
    return Column(Integer, ForeignKey("user_account.id", ondelete="SET NULL"))


class DetectorRun(SQLModel, table=True):
    __tablename__ = "detector_run"

    id: int | None = Field(default=None, primary_key=True)
    golden_set_id: int = Field(
        sa_column=Column(
            Integer, ForeignKey("golden_set.id", ondelete="CASCADE"), nullable=False, index=True
        )
    )
    #: ``DetectorSource``
    source: str = Field(sa_column=Column(String(16), nullable=False))
    #: What the detector was asked (``DedupParams`` resolved, the library and its version),
    #: or, for imported ids, where they came from ({"file": ...} or {"with": "corpus"}).
    parameters: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    #: The lowest similarity kept (pairs below are not stored); None for imported ids.
    low: float | None = None
    #: Documents read and verified pairs kept (similarity >= low).
    documents: int = 0
    pairs: int = 0
    #: The candidate search's recall against the exact similarity, per band and overall
    #: (``app.services.dedup.calibration``): {"value", "ci", "how", "bands": [...]}.
    candidate_recall: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    seconds: float = 0.0
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    created_by_id: int | None = Field(default=None, sa_column=_user_fk())
    #: Set when a threshold was applied (imported ids: at import). Applying again replaces.
    threshold: float | None = None
    clusters: int | None = None
    clustered_documents: int | None = None
    #: The estimates at the applied threshold, from the reviewed sample:
    #: {"value", "ci": [lo, hi], "reviewed", "how"}; None when not calibrated.
    precision: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    recall: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    applied_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    applied_by_id: int | None = Field(default=None, sa_column=_user_fk())
    #: Every time a threshold was applied, oldest first: {"threshold", "at", "by",
    #: "clusters", "clustered_documents", "precision", "recall"} (what it said then).
    applications: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSON))


class Clustering(SQLModel, table=True):
    """One set of cluster ids of a golden set's corpus: a detector run applied at a threshold,
    or ids imported (with the corpus, or from a side file). Written before it is made live;
    ``live_at`` None: not made live (being written, or left by a write that failed)."""

    __tablename__ = "clustering"

    id: int | None = Field(default=None, primary_key=True)
    golden_set_id: int = Field(
        sa_column=Column(
            Integer, ForeignKey("golden_set.id", ondelete="CASCADE"), nullable=False, index=True
        )
    )
    #: None while the ids of an import are written (its detector run is made with the switch)
    detector_run_id: int | None = Field(
        default=None,
        sa_column=Column(
            Integer, ForeignKey("detector_run.id", ondelete="CASCADE"), nullable=True, index=True
        ),
    )
    #: The detector run's threshold it was applied at; None: imported ids
    threshold: float | None = None
    #: Documents with a cluster id (rows of ``DocumentCluster``), and their clusters
    clustered_documents: int = 0
    clusters: int = 0
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    live_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class DocumentCluster(SQLModel, table=True):
    """A document's cluster id in a clustering (a document without a row is its own
    cluster)."""

    __tablename__ = "document_cluster"
    __table_args__ = (
        # a cluster's members (a document's mates, the hints)
        Index("ix_document_cluster_members", "clustering_id", "cluster_id"),
    )

    clustering_id: int = Field(
        sa_column=Column(
            Integer,
            ForeignKey("clustering.id", ondelete="CASCADE"),
            primary_key=True,
            nullable=False,
        )
    )
    doc_id: str = Field(sa_column=Column(String(300), primary_key=True, nullable=False))
    cluster_id: str = Field(sa_column=Column(String(300), nullable=False))


class DocPair(SQLModel, table=True):
    """A verified candidate pair of a detection (doc_a < doc_b), with its similarity and
    band; a sampled one is an item of the pair-review queue."""

    __tablename__ = "doc_pair"
    __table_args__ = (
        UniqueConstraint("detector_run_id", "doc_a", "doc_b"),
        # claim: the next open sampled pair in queue order
        Index("ix_doc_pair_queue", "detector_run_id", "sampled", "labelled", "position"),
        # the clusters at a threshold: the run's pairs by similarity
        Index("ix_doc_pair_similarity", "detector_run_id", "similarity"),
    )

    id: int | None = Field(default=None, primary_key=True)
    detector_run_id: int = Field(
        sa_column=Column(Integer, ForeignKey("detector_run.id", ondelete="CASCADE"), nullable=False)
    )
    doc_a: str = Field(sa_column=Column(String(300), nullable=False))
    doc_b: str = Field(sa_column=Column(String(300), nullable=False))
    similarity: float
    #: Index of its similarity band (``app.services.dedup.calibration.bands``).
    band: int
    sampled: bool = Field(default=False, sa_column=Column(Boolean, nullable=False))
    #: Queue order of a sampled pair (bands interleaved); 0 otherwise.
    position: int = Field(default=0, sa_column=Column(Integer, nullable=False))
    labelled: bool = Field(default=False, sa_column=Column(Boolean, nullable=False))
    #: The reviewer's judgment: the same content (True) or different (False).
    same: bool | None = None
    version: int = Field(default=1, sa_column=Column(Integer, nullable=False))
    lease_holder_id: int | None = Field(default=None, sa_column=_user_fk())
    lease_expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    labelled_by_id: int | None = Field(default=None, sa_column=_user_fk())
    labelled_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class PairEvent(SQLModel, table=True):
    """Append-only audit of the pair-review queue (``PairAction``)."""

    __tablename__ = "pair_event"

    id: int | None = Field(default=None, primary_key=True)
    pair_id: int = Field(
        sa_column=Column(
            Integer, ForeignKey("doc_pair.id", ondelete="CASCADE"), nullable=False, index=True
        )
    )
    detector_run_id: int = Field(
        sa_column=Column(Integer, ForeignKey("detector_run.id", ondelete="CASCADE"), nullable=False)
    )
    user_id: int | None = Field(default=None, sa_column=_user_fk())
    at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    action: str = Field(sa_column=Column(String(32), nullable=False))
    before: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    after: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    note: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))


class PairSkip(SQLModel, table=True):
    """A skip in force: a reviewer passed a pair on; it goes to the others."""

    __tablename__ = "pair_skip"
    __table_args__ = (
        UniqueConstraint("pair_id", "user_id"),
        Index("ix_pair_skip_run", "detector_run_id", "user_id", "pair_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    pair_id: int = Field(
        sa_column=Column(Integer, ForeignKey("doc_pair.id", ondelete="CASCADE"), nullable=False)
    )
    detector_run_id: int = Field(
        sa_column=Column(Integer, ForeignKey("detector_run.id", ondelete="CASCADE"), nullable=False)
    )
    user_id: int = Field(
        sa_column=Column(Integer, ForeignKey("user_account.id", ondelete="CASCADE"), nullable=False)
    )
    at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
