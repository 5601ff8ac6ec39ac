"""The golden set: queries and graded judgments, under a relevance threshold."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from app.eval.conventions import DEFAULT_MIN_GRADE
from app.eval.errors import InputError, shorten
from app.eval.jsonl import read_queries
from app.eval.textio import ProgressFn
from app.eval.trec import read_qrels
from app.eval.values import check_length


def count(n: int, singular: str, plural: str) -> str:
    """``count(1, "query", "queries")`` -> "1 query"; for warnings people read."""
    return f"{n} {singular if n == 1 else plural}"


@dataclass(frozen=True, slots=True)
class QrelsReport:
    """What reading the judgments found, counted."""

    source: str
    format: str
    lines: int
    judgments: int
    queries: int
    relevant: int
    evaluated_queries: int
    queries_without_relevant: int
    negative_grades: int
    duplicate_pairs_dropped: int
    queries_without_text: int
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "format": self.format,
            "lines": self.lines,
            "judgments": self.judgments,
            "queries": self.queries,
            "relevant": self.relevant,
            "evaluated_queries": self.evaluated_queries,
            "queries_without_relevant": self.queries_without_relevant,
            "negative_grades": self.negative_grades,
            "duplicate_pairs_dropped": self.duplicate_pairs_dropped,
            "queries_without_text": self.queries_without_text,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class Judgments:
    """Judgments (``qid``, ``doc_id``, ``grade``; one row per pair) and query texts.

    ``evaluated_qids`` are the queries that are averaged: those with at least one relevant
    document (grade >= ``min_grade``), in the order they first appear in the judgments.
    """

    judgments: pl.DataFrame
    queries: dict[str, str]
    min_grade: int
    report: QrelsReport

    @property
    def relevant(self) -> pl.DataFrame:
        """The relevant judgments: grade >= ``min_grade``."""
        return self.judgments.filter(pl.col("grade") >= self.min_grade)

    @property
    def evaluated_qids(self) -> list[str]:
        return self.relevant.get_column("qid").unique(maintain_order=True).to_list()

    @property
    def known_qids(self) -> pl.Series:
        """Every query of the golden set, judged or with a text, once each (judged first)."""
        texts = pl.Series(list(self.queries), dtype=pl.String)
        return pl.concat([self.judgments.get_column("qid"), texts]).unique(maintain_order=True)

    def query_text(self, qid: str) -> str | None:
        return self.queries.get(qid)


def golden_from_frame(
    frame: pl.DataFrame,
    *,
    queries: dict[str, str] | None = None,
    min_grade: int = DEFAULT_MIN_GRADE,
    source: str = "<judgments>",
    fmt: str = "frame",
) -> Judgments:
    """Build a golden set from a frame of qid, doc_id, grade (and optionally line).

    A pair judged twice with the same grade is kept once and counted; with different grades it
    is an error naming both lines.
    """
    if "line" not in frame.columns:
        frame = frame.with_row_index("line", offset=1)
    lines = frame.height
    # Most files judge each pair once: a hash of the pairs then, the grouping only when one
    # repeats (it took 3 of the 4 s of 530,000 judgments, issue 29).
    if frame.select(pl.struct("qid", "doc_id").is_duplicated().any()).item():
        pairs = _pairs(frame, source)
    else:
        pairs = frame.select("qid", "doc_id", "grade")
    judgments = pairs.select("qid", "doc_id", pl.col("grade").cast(pl.Int64))
    queries = dict(queries or {})
    relevant = judgments.filter(pl.col("grade") >= min_grade)
    judged_qids = judgments.get_column("qid").unique()
    evaluated = relevant.get_column("qid").n_unique()
    without_text = (
        int((~judged_qids.is_in(pl.Series(list(queries), dtype=pl.String).implode())).sum())
        if queries
        else 0
    )
    warnings: list[str] = []
    skipped = judged_qids.len() - evaluated
    if skipped:
        warnings.append(
            f"{count(skipped, 'judged query has', 'judged queries have')} no document with "
            f"grade >= {min_grade}: not averaged"
        )
    if queries and without_text:
        warnings.append(
            f"{count(without_text, 'judged query has', 'judged queries have')} no text in the "
            "queries file"
        )
    if not evaluated:
        raise InputError(
            source, None, f"no judgment has grade >= {min_grade}: there is nothing to evaluate"
        )
    report = QrelsReport(
        source=source,
        format=fmt,
        lines=lines,
        judgments=judgments.height,
        queries=judged_qids.len(),
        relevant=relevant.height,
        evaluated_queries=evaluated,
        queries_without_relevant=skipped,
        negative_grades=int((judgments.get_column("grade") < 0).sum()),
        duplicate_pairs_dropped=lines - judgments.height,
        queries_without_text=without_text,
        warnings=warnings,
    )
    return Judgments(judgments=judgments, queries=queries, min_grade=min_grade, report=report)


def _pairs(frame: pl.DataFrame, source: str) -> pl.DataFrame:
    """qid, doc_id, grade, a row per pair in the order first judged; a pair judged again with
    a different grade is an error naming both lines."""
    pairs = frame.group_by("qid", "doc_id", maintain_order=True).agg(
        pl.col("grade").first(),
        pl.col("grade").n_unique().alias("grades"),
        pl.col("line").first().alias("first_line"),
        pl.col("line").filter(pl.col("grade") != pl.col("grade").first()).first().alias("bad"),
    )
    conflicts = pairs.filter(pl.col("grades") > 1)
    if conflicts.height:
        row = conflicts.row(0, named=True)
        raise InputError(
            source,
            int(row["bad"]),
            f"query {shorten(row['qid'])}, document {shorten(row['doc_id'])} is judged again "
            "with a different "
            f"grade than on line {row['first_line']}",
        )
    return pairs


@dataclass(frozen=True, slots=True)
class IdLimits:
    """The longest query and document ids a store keeps (its column widths)."""

    query: int
    document: int


def load_golden(
    qrels: Path,
    *,
    queries: Path | None = None,
    min_grade: int = DEFAULT_MIN_GRADE,
    progress: ProgressFn | None = None,
    id_limits: IdLimits | None = None,
) -> Judgments:
    """Read a qrels file (TREC or BEIR TSV) and optional query texts into a golden set.

    With ``id_limits``, a longer id is an error naming its line (evaluation alone has none).
    """
    frame, fmt = read_qrels(qrels, progress=progress)
    if id_limits is not None:
        for column, limit, what in (
            ("qid", id_limits.query, "query id"),
            ("doc_id", id_limits.document, "document id"),
        ):
            check_length(frame, column, limit=limit, source=str(qrels), what=what)
    max_qid = id_limits.query if id_limits is not None else None
    texts = read_queries(queries, max_id_chars=max_qid) if queries is not None else {}
    return golden_from_frame(frame, queries=texts, min_grade=min_grade, source=str(qrels), fmt=fmt)
