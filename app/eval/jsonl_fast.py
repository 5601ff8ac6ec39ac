"""The fast path of the JSONL run reader (``app.eval.jsonl``), for one hit a line.

A run written by a program has one shape on every line: ``{"qid": .., "doc_id": .., "score":
..}`` (and maybe ``"rank"``), in that order, ids as strings without escapes or as integers.
A block of such lines is taken apart by one pattern in polars, with no JSON parser and no
Python loop; a block with any other line (another key order, an escape, a blank line, a value
the checks refuse) is read line by line by the careful reader (``careful_hits``), which words
the error. Either way the results are the careful reader's: what the pattern takes, the careful
reader reads the same way (the same id text, the same double, -0.0 made 0.0).
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import polars as pl

from app.eval.errors import InputError
from app.eval.jsonl import careful_hits
from app.eval.textio import MAX_LINE_BYTES, LineTooLong, whole_line_blocks

#: Bytes of a run read at once.
BLOCK_BYTES = 8 << 20

_WS = r"[ \t\r]*"
#: A string id without escapes or control characters, or an integer id as Python writes it
#: back (no "-0", at most 18 digits); the score a JSON number; the rank an integer or null.
_ID = r'(?:"([^"\\\x00-\x1f]*)"|(0|-?[1-9][0-9]{0,17}))'
_NUMBER = r"(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
_RANK = r"(null|0|-?[1-9][0-9]{0,17})"
HIT_PATTERN = (
    rf'^{_WS}\{{{_WS}"qid"{_WS}:{_WS}{_ID}{_WS},{_WS}"doc_id"{_WS}:{_WS}{_ID}{_WS},'
    rf'{_WS}"score"{_WS}:{_WS}{_NUMBER}{_WS}(?:,{_WS}"rank"{_WS}:{_WS}{_RANK})?{_WS}\}}{_WS}$'
)
#: What the careful reader refuses in an id: whitespace (Unicode's) or a control character.
_BAD_ID = r"[\s\p{Cc}]"


def hit_blocks(path: Path, source: str) -> Generator[pl.DataFrame]:
    """A one-hit-a-line JSONL run's results (qid, doc_id, score, rank, line), a block of
    whole lines at a time (see the module); an InputError names the first bad line."""
    first_line = 1
    with path.open("rb") as handle:
        blocks = whole_line_blocks(handle, BLOCK_BYTES)
        while True:
            try:
                data, _, _ = next(blocks)
            except StopIteration:
                return
            except LineTooLong:
                message = f"a line longer than {MAX_LINE_BYTES:,} bytes"
                raise InputError(source, first_line, message) from None
            if data:
                frame = _fast(data, first_line)
                yield careful_hits(data, first_line, source) if frame is None else frame
                first_line += data.count(b"\n") + (not data.endswith(b"\n"))


def _fast(block: bytes, first_line: int) -> pl.DataFrame | None:
    """The block's results when every line has the usual shape and passes the checks."""
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = pl.Series("raw", [text.removesuffix("\n")]).str.split("\n").explode()
    if not bool(lines.str.contains(HIT_PATTERN).all()):
        return None
    parts = lines.str.extract_groups(HIT_PATTERN).struct.unnest()
    a, b, c, d, score, rank = parts.columns
    frame = parts.select(
        pl.coalesce(a, b).alias("qid"),
        pl.coalesce(c, d).alias("doc_id"),
        # -0.0 is 0.0, as the careful reader's float(value) + 0.0 makes it
        pl.when(pl.col(score).cast(pl.Float64, strict=False) == 0.0)
        .then(0.0)
        .otherwise(pl.col(score).cast(pl.Float64, strict=False))
        .alias("score"),
        pl.when(pl.col(rank) == "null")
        .then(None)
        .otherwise(pl.col(rank))
        .cast(pl.Int64, strict=False)
        .alias("rank_value"),
        pl.col(rank).alias("rank_text"),
        (pl.int_range(0, pl.len(), dtype=pl.UInt32) + first_line).alias("line"),
    )
    bad = frame.select(
        (pl.col("qid").str.len_bytes() == 0)
        | (pl.col("doc_id").str.len_bytes() == 0)
        | pl.col("qid").str.contains(_BAD_ID)
        | pl.col("doc_id").str.contains(_BAD_ID)
        | ~pl.col("score").is_finite().fill_null(False)
        | (
            pl.col("rank_value").is_null()
            & pl.col("rank_text").is_not_null()
            & (pl.col("rank_text") != "null")
        )
    ).to_series()
    if bool(bad.any()):
        return None
    return frame.select("qid", "doc_id", "score", pl.col("rank_value").alias("rank"), "line")
