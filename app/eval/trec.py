"""TREC run and qrels files (and BEIR's three-column qrels TSV), plain or gzip."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from app.eval.errors import InputError
from app.eval.textio import ProgressFn, numbered_lines, plain_file, read_table
from app.eval.values import check_range, int_column

RUN_COLUMNS = ("qid", "q0", "doc_id", "rank", "score", "tag")
RUN_EXPECTED = "qid Q0 docno rank score tag"
QRELS_COLUMNS = ("qid", "iteration", "doc_id", "grade")
QRELS_EXPECTED = "qid iteration docno grade"
BEIR_QRELS_COLUMNS = ("qid", "doc_id", "grade")
BEIR_QRELS_EXPECTED = "query-id corpus-id score"
_INTEGER = re.compile(r"^[+-]?\d+$")


def read_trec_run(
    path: Path, *, with_rank: bool = False, progress: ProgressFn | None = None
) -> pl.DataFrame:
    """Read a TREC run: columns qid, doc_id, score (finite double), rank (Int64 or null), line.

    The rank column is parsed only when ``with_rank`` (order ``rank``): trec_eval ignores it,
    and so does every other order.
    """
    source = str(path)
    keep = ["qid", "doc_id", "score"] + (["rank"] if with_rank else [])
    with plain_file(path) as plain:
        frame = read_table(
            plain,
            columns=RUN_COLUMNS,
            keep=keep,
            expected=RUN_EXPECTED,
            source=source,
            floats=["score"],
            ints=["rank"] if with_rank else [],
            progress=progress,
        )
    return run_columns(frame, with_rank=with_rank)


def run_columns(frame: pl.DataFrame, *, with_rank: bool) -> pl.DataFrame:
    """qid, doc_id, score, rank, line of parsed run lines (rank null unless ``with_rank``)."""
    if not with_rank:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Int64).alias("rank"))
    return frame.select("qid", "doc_id", "score", "rank", "line")


def read_qrels(path: Path, *, progress: ProgressFn | None = None) -> tuple[pl.DataFrame, str]:
    """Read judgments: TREC qrels (4 columns) or BEIR TSV (3 columns, header optional).

    Returns (frame with qid, doc_id, grade (Int64), line; the format name).
    """
    source = str(path)
    with plain_file(path) as plain:
        first = _first_data_line(plain, source)
        if first is None:
            raise InputError(source, None, "the qrels file is empty")
        number, fields = first
        columns: tuple[str, ...]
        if len(fields) == 4:
            columns, expected, fmt, header = QRELS_COLUMNS, QRELS_EXPECTED, "trec", None
        elif len(fields) == 3:
            columns, expected, fmt = BEIR_QRELS_COLUMNS, BEIR_QRELS_EXPECTED, "beir"
            header = number if not _INTEGER.match(fields[2]) else None
        else:
            raise InputError(
                source,
                number,
                f"expected 4 columns ({QRELS_EXPECTED}) or 3 ({BEIR_QRELS_EXPECTED}), "
                f"found {len(fields)}",
            )
        frame = read_table(
            plain,
            columns=columns,
            keep=["qid", "doc_id", "grade"],
            expected=expected,
            source=source,
            ints=[] if header is not None else ["grade"],
            progress=progress,
        )
    if header is not None:
        frame = frame.filter(pl.col("line") != header)
        frame = int_column(frame, "grade", source=source, what="grade")
    check_range(frame, "grade", source=source, what="grade")
    return frame, fmt


def _first_data_line(path: Path, source: str) -> tuple[int, list[str]] | None:
    with path.open("rb") as handle:
        for number, raw in numbered_lines(handle, source):
            text = raw.decode("utf-8", errors="replace").strip()
            if text:
                return number, text.split()
    return None
