"""Misses: relevant documents a run left out of its top ``depth``."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from app.eval.golden import Judgments
from app.eval.ranking import RankedRun


@dataclass(frozen=True, slots=True)
class MissedDocument:
    """A (query, document) pair: relevant, and not in the run's top ``depth``.

    ``rank`` is where the run put the document when it returned it deeper, None when the run
    did not return it at all ("not retrieved").
    """

    qid: str
    doc_id: str
    grade: int
    rank: int | None


def misses_frame(golden: Judgments, ranked: RankedRun, depth: int) -> pl.DataFrame:
    """The misses as a frame (qid, doc_id, grade, rank), in golden-query order, grade
    descending, then document id."""
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    order = pl.DataFrame({"qid": golden.evaluated_qids}, schema={"qid": pl.String}).with_row_index(
        "_q"
    )
    return (
        golden.relevant.join(
            ranked.judged.select("qid", "doc_id", "rank"), on=["qid", "doc_id"], how="left"
        )
        .filter(pl.col("rank").is_null() | (pl.col("rank") > depth))
        .join(order, on="qid")
        .sort(["_q", "grade", "doc_id"], descending=[False, True, False])
        .select("qid", "doc_id", "grade", "rank")
    )


def enumerate_misses(golden: Judgments, ranked: RankedRun, depth: int) -> list[MissedDocument]:
    """Every (qid, doc_id, grade, rank in the run or None) with the document relevant and not
    in the run's top ``depth``."""
    return [
        MissedDocument(qid=row[0], doc_id=row[1], grade=row[2], rank=row[3])
        for row in misses_frame(golden, ranked, depth).iter_rows()
    ]
