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
    Column,
    ForeignKey,
    Integer,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
)
from sqlmodel import Field, SQLModel

from app.eval.ranking import RunReport
from app.models.base import UTCDateTime, utcnow
from app.readmodel import IsoDateTime, ReadModel


def _run_fk() -> Column[int]:
    return Column(Integer, ForeignKey("run.id", ondelete="CASCADE"), nullable=False)


class Run(SQLModel, table=True):
    __tablename__ = "run"
    __table_args__ = (UniqueConstraint("golden_set_id", "name"),)

    id: int | None = Field(default=None, primary_key=True)
    golden_set_id: int = Field(
        sa_column=Column(
            Integer, ForeignKey("golden_set.id", ondelete="CASCADE"), nullable=False, index=True
        )
    )
    name: str = Field(sa_column=Column(String(200), nullable=False))
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


class RunPublic(ReadModel):
    """A run as the API answers it and the pages show it (API.md)."""

    id: int
    name: str
    golden_set_id: int
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

    @classmethod
    def of(cls, run: Run) -> RunPublic:
        return cls.model_validate(run)
