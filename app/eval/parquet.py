"""Runs and logs in Parquet, as a data lake keeps them: a row a result.

A lake's tables name their columns as their writers chose (``query_id``, ``docid``,
``bm25_score``...): ``RunColumns`` maps the four the conventions need, query id, document id,
and score or rank (one of them, as the order needs), onto the run's ``qid``, ``doc_id``,
``score`` and ``rank``; other columns are not read. A row's "line" is its 1-based row number,
so an error names the row as a text run's names its line. Ids may be strings or integers
(written as text); scores any number (finite); ranks integers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from app.eval.errors import InputError, shorten, shorten_name
from app.eval.textio import current_decompression_limit

PARQUET_MAGIC = b"PAR1"
#: The longest id a Parquet file may hold, in bytes: the widest the service stores (300
#: characters) at UTF-8's widest. polars holds a value that many rows share (a dictionary's)
#: once, and steps that key rows by their ids (sorts and joins on several columns, a
#: distinct) copy it for each row: a 15 kB file of 1 MB ids took 3 GB. A text file weighs
#: what its rows hold, so the bound is a Parquet file's alone.
MAX_PARQUET_ID_BYTES = 1200
#: What an id may not hold, as in a JSONL run: a blank (whitespace) or a control character
#: (a NUL byte too, which no database keeps in text).
FORBIDDEN_IN_ID = r"[\s\p{Cc}]"
#: The fewest bytes a result takes as a line of text (two ids, a number, separators): a
#: Parquet file's rows times this is the least text it stands for.
ROW_TEXT_BYTES = 16
#: Rows handed over at once by the block reader (some 20 MB of a log's two id columns).
BLOCK_ROWS = 500_000


@dataclass(frozen=True, slots=True)
class RunColumns:
    """Which Parquet column holds each field of a result."""

    qid: str = "qid"
    doc_id: str = "doc_id"
    score: str = "score"
    rank: str = "rank"


def parquet_schema(path: Path) -> dict[str, pl.DataType]:
    """The file's columns. Every polars read of a user's file names it literally
    (``glob=False``): polars would take ``*``, ``?`` and ``[`` in a name as a pattern and
    read other files (``run[1].parquet`` read as ``run1.parquet``)."""
    return dict(pl.scan_parquet(path, glob=False).collect_schema())


def _schema(path: Path) -> dict[str, pl.DataType]:
    try:
        return parquet_schema(path)
    except (OSError, pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
        raise InputError(path, None, f"not a readable Parquet file ({reason_of(exc)})") from None


def reason_of(exc: BaseException) -> str:
    """A reader's error in a few words: its first line, at most 200 characters."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


def check_expansion(path: Path) -> None:
    """An InputError for a file that stands for more text than a compressed file may inflate
    to (gzip's rule, ``textio.DecompressionLimit``): Parquet holds a million rows of one
    repeated value in a few bytes, and the readers hold rows, not bytes."""
    try:
        rows = int(pl.scan_parquet(path, glob=False).select(pl.len()).collect().item())
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
        raise InputError(path, None, f"not a readable Parquet file ({reason_of(exc)})") from None
    limit = current_decompression_limit()
    size = path.stat().st_size
    allowed = limit.allowed(size)
    if rows * ROW_TEXT_BYTES > allowed:
        raise InputError(
            path,
            None,
            f"{rows:,} rows in {size:,} bytes stand for at least {rows * ROW_TEXT_BYTES:,} bytes "
            f"of text, more than {allowed:,}, the limit ({limit.why(size)}): refused as a "
            "decompression bomb",
        )


def _selection(
    path: Path, columns: RunColumns, *, with_rank: bool, needs_score: bool = False
) -> list[pl.Expr]:
    """The expressions that turn a file's columns into qid, doc_id, score, rank; an
    InputError naming the missing columns and those the file has (the rank's ``with_rank``,
    the score's when the order ``needs_score`` or the caller named it)."""
    schema = _schema(path)
    check_expansion(path)
    if columns.qid == columns.doc_id:  # every query would hold one document: itself
        raise InputError(
            path,
            None,
            f"the query id and the document id are both column "
            f"{shorten_name(columns.qid, 40)!r}: name the column of each",
        )
    missing = [c for c in (columns.qid, columns.doc_id) if c not in schema]
    if with_rank and columns.rank not in schema:
        missing.append(columns.rank)
    # a score column named by the caller and not there is a mistake, whatever the order (the
    # default name may be absent: order rank or file needs no score)
    if (needs_score or columns.score != RunColumns().score) and columns.score not in schema:
        missing.append(columns.score)
    if missing:
        have = ", ".join(shorten_name(c, 40) for c in list(schema)[:12])
        raise InputError(
            path,
            None,
            f"no column {', '.join(repr(shorten_name(c, 40)) for c in missing)} (the file has: "
            f"{have}{', ...' if len(schema) > 12 else ''}); name the columns with the options "
            "for the query id, document id, score and rank columns"
            + (
                " (order trec_eval ranks by the score; order rank or file needs none)"
                if needs_score and columns.score in missing
                else ""
            ),
        )
    for field, name in (("query id", columns.qid), ("document id", columns.doc_id)):
        dtype = schema[name]
        # text as pandas writes a "category" column (a dictionary: Categorical) counts too
        if not (
            dtype == pl.String or dtype.is_integer() or isinstance(dtype, pl.Categorical | pl.Enum)
        ):
            raise InputError(
                path, None, f"column {name!r} ({field}) holds {dtype}, not text or integers"
            )
    score = pl.col(columns.score) if columns.score in schema else pl.lit(None, dtype=pl.Float64)
    if columns.score in schema and not schema[columns.score].is_numeric():
        raise InputError(
            path, None, f"column {columns.score!r} (score) holds {schema[columns.score]}"
        )
    rank = pl.col(columns.rank) if with_rank else pl.lit(None, dtype=pl.Int64)
    if with_rank and not schema[columns.rank].is_integer():
        raise InputError(path, None, f"column {columns.rank!r} (rank) holds {schema[columns.rank]}")
    return [
        pl.col(columns.qid).cast(pl.String).alias("qid"),
        pl.col(columns.doc_id).cast(pl.String).alias("doc_id"),
        score.cast(pl.Float64).alias("score"),
        rank.cast(pl.Int64).alias("rank"),
    ]


def _id_unreadable(column: str) -> pl.Expr:
    """True on an id missing, empty or longer than MAX_PARQUET_ID_BYTES (its length alone:
    quick, whatever the id)."""
    return pl.col(column).is_null() | ~pl.col(column).str.len_bytes().is_between(
        1, MAX_PARQUET_ID_BYTES
    )


def _forbidden(column: str) -> pl.Expr:
    """True on an id with a blank or a control character (asked of ids of a readable
    length only: a 1 MB id is refused by its length, not searched)."""
    return pl.col(column).str.contains(FORBIDDEN_IN_ID)


def _bad_number() -> pl.Expr:
    """True on a score that is not finite (a rank is any 64-bit integer, as in a text run)."""
    return ~pl.col("score").is_finite().fill_null(True)


def _has_bad_row(frame: pl.DataFrame) -> bool:
    """Whether a row of ``frame`` is one the conventions cannot read: an id missing, empty,
    too long or holding a blank or a control character, a score not finite."""
    if frame.select(
        (_id_unreadable("qid") | _id_unreadable("doc_id") | _bad_number()).any()
    ).item():
        return True
    return bool(frame.select((_forbidden("qid") | _forbidden("doc_id")).any()).item())


def _checked(frame: pl.DataFrame, path: Path, first_row: int) -> pl.DataFrame:
    """The rows numbered (``line``), or an InputError naming the first bad row."""
    frame = frame.with_columns(
        (pl.int_range(0, pl.len(), dtype=pl.UInt32) + first_row).alias("line")
    )
    unreadable = _id_unreadable("qid") | _id_unreadable("doc_id")
    found = pl.concat(
        [
            frame.filter(unreadable | _bad_number()).head(1),
            frame.filter(~unreadable).filter(_forbidden("qid") | _forbidden("doc_id")).head(1),
        ]
    ).sort("line")
    if found.height:
        row = found.row(0, named=True)
        qid_bad, doc_bad = (
            found.head(1)
            .select(
                _id_unreadable("qid") | _forbidden("qid"),
                _id_unreadable("doc_id") | _forbidden("doc_id"),
            )
            .row(0)
        )
        if qid_bad or doc_bad:
            what = _id_said(row["qid"] if qid_bad else row["doc_id"], qid_bad)
        else:
            what = f"a score that is not a finite number ({row['score']})"
        raise InputError(path, int(row["line"]), f"the row holds {what}")
    return frame


def _id_said(value: str | None, is_query: bool) -> str:
    """What is wrong with an id ``_checked`` refuses, in words."""
    name = "query id" if is_query else "document id"
    if not value:
        return f"an empty {name}"
    size = len(value.encode())
    if size > MAX_PARQUET_ID_BYTES:
        return f"a {name} of {size:,} bytes (at most {MAX_PARQUET_ID_BYTES:,})"
    return f"a {name} with a blank or a control character ({shorten(value, 40)})"


def checked_batches(
    path: Path,
    columns: RunColumns = RunColumns(),
    *,
    with_rank: bool = False,
    needs_score: bool = False,
    rows: int | None = None,
) -> Iterator[pl.DataFrame]:
    """The file's results (qid, doc_id, score, rank) some ``rows`` at a time, in file
    order: a batch is checked by one pass, and numbered only when a row of it is bad (its
    InputError names the row, as it does a missing column)."""
    first_row = 1
    for batch in unchecked_batches(
        path, columns, with_rank=with_rank, needs_score=needs_score, rows=rows
    ):
        if _has_bad_row(batch):
            _checked(batch, path, first_row)
        yield batch
        first_row += batch.height


def unchecked_batches(
    path: Path,
    columns: RunColumns = RunColumns(),
    *,
    with_rank: bool = False,
    needs_score: bool = False,
    rows: int | None = None,
) -> Iterator[pl.DataFrame]:
    """``checked_batches``' batches as polars reads them, their rows not checked: for a
    reader that checks them its own way (and leaves a bad row to ``checked_batches``)."""
    selection = _selection(path, columns, with_rank=with_rank, needs_score=needs_score)
    try:
        yield from (
            pl.scan_parquet(path, glob=False)
            .select(selection)
            .collect_batches(chunk_size=rows or BLOCK_ROWS)
        )
    except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
        # a panic too: a corrupt file is bad input, not a crash
        raise InputError(path, None, f"cannot be read as a run ({reason_of(exc)})") from None


def parquet_blocks(
    path: Path,
    columns: RunColumns = RunColumns(),
    *,
    with_rank: bool = False,
    needs_score: bool = False,
    rows: int | None = None,
) -> Iterator[pl.DataFrame]:
    """The file's results (qid, doc_id, score, rank, line) some ``rows`` at a time, in file
    order; an InputError names a missing column or the first bad row."""
    first_row = 1
    for batch in checked_batches(
        path, columns, with_rank=with_rank, needs_score=needs_score, rows=rows
    ):
        yield batch.with_columns(
            (pl.int_range(0, pl.len(), dtype=pl.UInt32) + first_row).alias("line")
        )
        first_row += batch.height


def read_parquet_run(
    path: Path,
    columns: RunColumns = RunColumns(),
    *,
    with_rank: bool = False,
    needs_score: bool = False,
) -> pl.DataFrame:
    """The whole file's results: qid, doc_id, score, rank, line (see ``parquet_blocks``)."""
    parts = list(parquet_blocks(path, columns, with_rank=with_rank, needs_score=needs_score))
    if not parts:
        schema = {"qid": pl.String, "doc_id": pl.String, "score": pl.Float64, "rank": pl.Int64}
        return pl.DataFrame(schema={**schema, "line": pl.UInt32})
    return pl.concat(parts)
