"""Runs, reduced to what every measure and every review page needs.

The raw file is not kept: the rank of every judged document (``run_judged``) gives recall and
nDCG at every cutoff; the result count per query (``run_query``) tells "rank 73 of 1000" from
"not retrieved"; the head of each ranking (``run_head``: the first ``keep_depth`` results of a
query in one row) shows reviewers what won instead.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlmodel import Field, SQLModel

from app.eval.cluster_profile import ClusterProfile
from app.eval.ranking import RunReport
from app.models.base import UTCDateTime, utcnow
from app.provenance import DetectorRunRef
from app.readmodel import IsoDateTime, ReadModel

#: A run measured against the judgments, and one of production query-log results without any.
JUDGED, LOG = "judged", "log"
RUN_KINDS = (JUDGED, LOG)


def _run_fk() -> Column[int]:
    return Column(Integer, ForeignKey("run.id", ondelete="CASCADE"), nullable=False)


class Run(SQLModel, table=True):
    __tablename__ = "run"
    __table_args__ = (
        UniqueConstraint("golden_set_id", "name"),
        Index("ix_run_series", "golden_set_id", "series", "id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    golden_set_id: int = Field(
        sa_column=Column(
            Integer, ForeignKey("golden_set.id", ondelete="CASCADE"), nullable=False, index=True
        )
    )
    name: str = Field(sa_column=Column(String(200), nullable=False))
    #: "judged" (measured against the golden set's judgments) or "log" (production query-log
    #: results imported without judgments: cluster measures only)
    kind: str = Field(
        default="judged",
        sa_column=Column(String(10), nullable=False, default="judged", server_default="judged"),
    )
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    source_name: str = Field(sa_column=Column(String(500), nullable=False))
    sha256: str = Field(sa_column=Column(String(64), nullable=False))
    format: str = Field(sa_column=Column(String(20), nullable=False))
    order: str = Field(sa_column=Column("ordering", String(20), nullable=False))
    lines: int = Field(sa_column=Column(BigInteger, nullable=False))
    queries: int
    keep_depth: int
    report: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    created_by_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("user_account.id", ondelete="SET NULL")),
    )
    #: the configuration this run is one evaluation of ("bm25-main"), commit after commit;
    #: none for a run of its own
    series: str | None = Field(default=None, sa_column=Column(String(200), nullable=True))
    #: its provenance: ``commit``, ``branch``, ``time`` and free key-values, all strings
    meta: dict[str, str] = Field(
        default_factory=dict,
        sa_column=Column(JSON, nullable=False, default=dict, server_default=text("'{}'")),
    )


class RunQuery(SQLModel, table=True):
    """How many results the run returned for a golden query (absent queries: no row)."""

    __tablename__ = "run_query"
    __table_args__ = (PrimaryKeyConstraint("run_id", "qid"),)

    run_id: int = Field(sa_column=_run_fk())
    qid: str = Field(sa_column=Column(String(200), nullable=False))
    retrieved: int


class RunJudged(SQLModel, table=True):
    """The rank (1-based, after the conventions) of every judged document the run returned."""

    __tablename__ = "run_judged"
    __table_args__ = (PrimaryKeyConstraint("run_id", "qid", "doc_id"),)

    run_id: int = Field(sa_column=_run_fk())
    qid: str = Field(sa_column=Column(String(200), nullable=False))
    doc_id: str = Field(sa_column=Column(String(300), nullable=False))
    rank: int


class RunJudgedCluster(SQLModel, table=True):
    """A judged document's cluster rank (app.eval.cluster_ranks) where it differs from its own
    rank: the first rank at which a member of its duplicate cluster appears in the query's
    ranking, when a member comes before it or it was not returned itself. Every other judged
    document's cluster rank is its rank in ``run_judged`` (or none). Stored at import when
    ``RunClusterTotals.cluster_ranks`` says so: cluster-recall at any k."""

    __tablename__ = "run_judged_cluster"
    __table_args__ = (PrimaryKeyConstraint("run_id", "qid", "doc_id"),)

    run_id: int = Field(sa_column=_run_fk())
    qid: str = Field(sa_column=Column(String(200), nullable=False))
    doc_id: str = Field(sa_column=Column(String(300), nullable=False))
    cluster_rank: int


class RunHead(SQLModel, table=True):
    """The head of one query's ranking (ranks 1..keep_depth), for review context.

    One row a query, ``ranking`` = {"doc_ids": [...], "scores": [...]} in rank order (scores
    null for runs without them): a review page reads one row, and an import writes thousands
    of rows instead of millions.
    """

    __tablename__ = "run_head"
    __table_args__ = (PrimaryKeyConstraint("run_id", "qid"),)

    run_id: int = Field(sa_column=_run_fk())
    qid: str = Field(sa_column=Column(String(200), nullable=False))
    ranking: dict[str, Any] = Field(sa_type=JSON)


class RunClusterQuery(SQLModel, table=True):
    """One query's cluster trace (app.eval.cluster_profile.QueryTrace), for every query the
    run answers, judged or not: its result count and the ranks at which a result repeats a
    cluster already seen higher. Distinct clusters at any k follow from these two."""

    __tablename__ = "run_cluster_query"
    __table_args__ = (PrimaryKeyConstraint("run_id", "qid"),)

    run_id: int = Field(sa_column=_run_fk())
    qid: str = Field(sa_column=Column(String(200), nullable=False))
    returned: int
    repeats: list[int] = Field(default_factory=list, sa_type=JSON)


class RunClusterTotals(SQLModel, table=True):
    """The run's per-rank totals over its queries (app.eval.cluster_profile.RankTotals):
    {"clustered": [...], "known": [...], "tokens": [...] | null}. Its presence says the run's
    cluster traces were stored (runs imported before they were have none)."""

    __tablename__ = "run_cluster_totals"

    run_id: int = Field(
        sa_column=Column(
            Integer, ForeignKey("run.id", ondelete="CASCADE"), primary_key=True, nullable=False
        )
    )
    totals: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    #: True when the judged documents' cluster ranks were stored (``run_judged_cluster``):
    #: cluster-recall at any k; false for runs imported before (up to keep_depth only)
    cluster_ranks: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    #: The detector run whose clusters these traces were made with (None: no clusters).
    detector_run_id: int | None = None
    #: The clustering (app/models/dedup.py) they were made with: a run kept on it after
    #: another was made live names its threshold. None: measured before this was recorded.
    clustering_id: int | None = None
    #: Traced again from the stored rankings when another detector run was applied: exact
    #: up to this rank (the kept head); None: traced at import, over the whole run.
    traced_depth: int | None = None
    #: The only cutoffs the figures are known at: a log run imported as its per-query profile
    #: (docs/sql/unique_clusters.sql's output, app.eval.profile_rows); None: any k.
    exact_ks: list[int] | None = Field(default=None, sa_column=Column(JSON, nullable=True))


class RunPublic(ReadModel):
    """A run as the API answers it and the pages show it (API.md)."""

    id: int
    name: str
    golden_set_id: int
    #: "judged" or "log" (no judgments: cluster measures only)
    kind: str
    description: str
    source_name: str
    sha256: str
    format: str
    order: str
    queries: int
    lines: int
    keep_depth: int
    #: What importing the run found (nothing dropped silently), the file's name as ``source``.
    report: RunReport
    created_at: IsoDateTime
    #: the series the run belongs to (null: none)
    series: str | None = None
    #: its provenance (``commit``, ``branch``, ``time``, free key-values)
    meta: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def of(cls, run: Run) -> RunPublic:
        return cls.model_validate(run)


class ClusterDepthPublic(ReadModel):
    """The cluster figures at one k (definitions: app/eval/cluster_profile.py)."""

    k: int
    #: the mean over queries of the distinct clusters in the top k
    mean_distinct: float
    #: mean_distinct / k
    distinct_fraction: float
    #: (mean(k) - mean(previous k)) / (k - previous k); null at the first k
    marginal_per_slot: float | None
    median: float
    p10: float
    p90: float
    #: share of queries with at most ``threshold`` distinct clusters in the top k
    share_at_or_below: float
    #: distinct clusters -> number of queries (only counts that occur)
    histogram: dict[str, int]
    #: queries with fewer than k results (counted on what they returned)
    short_queries: int
    #: the mean prompt tokens of the top k; null when the corpus has no text
    prompt_tokens: float | None
    #: prompt_tokens * queries_per_day * price_per_mtok / 1e6; null without both
    daily_price: float | None


class RunClustersPublic(ReadModel):
    """unique-clusters@k over every query a run answers, judged or not (API.md)."""

    run_id: int
    kind: str
    queries: int
    #: the longest ranking of the run
    depth: int
    threshold: int
    short_queries_rule: str = (
        "a query with fewer than k results counts the distinct clusters among what it returned"
    )
    #: how a document's prompt tokens are estimated; null when the corpus has no text
    token_estimate: str | None
    price_per_mtok: float | None
    queries_per_day: float | None
    #: results (within the largest k) without a cluster_id: each its own cluster
    unclustered_results: int
    #: results (within the largest k) not in the corpus (counted where the corpus has text)
    unknown_results: int
    depths: list[ClusterDepthPublic]
    #: the detector run the cluster ids come from, with its error rates (null: no clusters)
    detector_run: DetectorRunRef | None = None
    #: the only k the figures are known at: a log run imported as its per-query cluster
    #: profile (the output of docs/sql/unique_clusters.sql); null: any k
    exact_ks: list[int] | None = None

    @classmethod
    def of(
        cls,
        profile: ClusterProfile,
        *,
        run_id: int,
        kind: str,
        depth: int,
        token_estimate: str | None,
        detector_run: DetectorRunRef | None = None,
        exact_ks: list[int] | None = None,
    ) -> RunClustersPublic:
        return cls(
            detector_run=detector_run,
            exact_ks=exact_ks,
            run_id=run_id,
            kind=kind,
            queries=profile.queries,
            depth=depth,
            threshold=profile.threshold,
            token_estimate=token_estimate,
            price_per_mtok=profile.price_per_million,
            queries_per_day=profile.queries_per_day,
            unclustered_results=profile.unclustered_results,
            unknown_results=profile.unknown_results,
            depths=[
                ClusterDepthPublic(
                    k=d.k,
                    mean_distinct=d.mean_distinct,
                    distinct_fraction=d.distinct_fraction,
                    marginal_per_slot=d.marginal_per_slot,
                    median=d.median,
                    p10=d.p10,
                    p90=d.p90,
                    share_at_or_below=d.share_at_or_below,
                    histogram={str(n): c for n, c in d.histogram.items()},
                    short_queries=d.short_queries,
                    prompt_tokens=d.prompt_tokens,
                    daily_price=d.daily_price,
                )
                for d in profile.depths
            ],
        )
