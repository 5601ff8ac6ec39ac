"""Query files read a block at a time: the lines of the usual shape by polars (regular
expressions over the whole block), every other line by the caller's own line parser.

BEIR ``queries.jsonl`` files are one flat object a line, ``{"_id": "q1", "text": "..."}``
(often with ``"metadata": {}``); TSV files ``qid<TAB>text``. A line of that shape whose id is
printable ASCII and whose text has no escape, control byte or surrogate gives, taken apart by
a pattern, exactly what ``json.loads`` and the caller's checks would give; only the others
(an escape, a non-ASCII id, a blank or broken line) go through the per-line parser, which
keeps the errors naming file and line. Lines are numbered (and bounded: textio.MAX_LINE_BYTES)
as ``numbered_lines`` numbers them.
Every refusal of a line comes from the line parser; a query given twice with two texts is
refused here, at the line of the second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl

from app.eval import textio
from app.eval.errors import InputError, shorten

#: Bytes read at a time (then up to the end of the line).
BLOCK_BYTES = 32 << 20
#: A JSON integer id of more digits than this is left to the line parser.
MAX_INT_DIGITS = 100

#: One line's query: (qid, text), or None for a line that holds none (a blank one).
LineParser = Callable[[int, bytes], "tuple[str, str] | None"]

_WS = r"[ \t\r]*"
_TEXT = r'"([^"\\\x00-\x1f]*)"'
_META = rf'(?:,{_WS}"metadata"{_WS}:{_WS}\{{{_WS}\}}{_WS})?'
_SCHEMA = {"line": pl.Int64, "qid": pl.String, "text": pl.String}


def _json_patterns() -> tuple[str, str]:
    """The two orders of the usual object: id first, text first. In the first, group 1 or 2
    is the id (a string, or a non-negative integer, which ``str(int)`` writes back unchanged)
    and 3 the text; in the second, 1 the text and 2 or 3 the id."""
    ident = rf'(?:"([!#-\[\]-~]+)"|(0|[1-9][0-9]{{0,{MAX_INT_DIGITS - 1}}}))'
    ident_key = rf'"(?:_id|qid)"{_WS}:{_WS}{ident}'
    text_key = rf'"(?:text|query)"{_WS}:{_WS}{_TEXT}'
    first = rf"^{_WS}\{{{_WS}{ident_key}{_WS},{_WS}{text_key}{_WS}{_META}\}}{_WS}$"
    second = rf"^{_WS}\{{{_WS}{text_key}{_WS},{_WS}{ident_key}{_WS}{_META}\}}{_WS}$"
    return first, second


def _blocks(path: Path) -> Iterator[tuple[int, bytes]]:
    """(number of the first line, bytes of whole lines) of the file, about BLOCK_BYTES each."""
    number = 1
    with path.open("rb") as handle:
        while block := handle.read(BLOCK_BYTES):
            if not block.endswith(b"\n"):
                block += handle.readline(textio.MAX_LINE_BYTES + 1)
            yield number, block
            number += block.count(b"\n")


def _raw_lines(block: bytes) -> list[bytes]:
    """The lines of a block as ``numbered_lines`` yields them (newline kept)."""
    lines = block.split(b"\n")
    last = lines.pop()
    found = [line + b"\n" for line in lines]
    if last:
        found.append(last)
    return found


def _take_apart(block: str, first: int, kind: str, max_id_chars: int | None) -> pl.DataFrame:
    """line, raw (the line, newline kept), and qid and text where the line has the usual
    shape (else null)."""
    lines = (
        pl.DataFrame({"raw": [block]})
        .select(pl.col("raw").str.split("\n", inclusive=True))
        .explode("raw")
        .filter(pl.col("raw") != "")  # after the last newline
        .with_row_index("line", offset=first)
        .with_columns(pl.col("line").cast(pl.Int64))
    )
    body = pl.col("raw").str.strip_suffix("\n")
    usual = pl.col("raw").str.len_bytes() <= textio.MAX_LINE_BYTES
    if kind == "json":
        id_first, text_first = _json_patterns()
        # most lines have one order: the other pattern only on the rest
        is_first = body.str.contains(id_first)
        first_order = lines.filter(is_first).with_columns(parts=body.str.extract_groups(id_first))
        rest = lines.filter(~is_first).with_columns(parts=body.str.extract_groups(text_first))
        parts = pl.col("parts").struct
        lines = pl.concat(
            [
                first_order.select(
                    "line",
                    "raw",
                    pl.coalesce(parts.field("1"), parts.field("2")).alias("qid"),
                    parts.field("3").alias("text"),
                ),
                rest.select(
                    "line",
                    "raw",
                    pl.coalesce(parts.field("2"), parts.field("3")).alias("qid"),
                    parts.field("1").alias("text"),
                ),
            ]
        )
    else:
        # the text stripped as str.strip would: its ends printable ASCII, or nothing
        pattern = r"^([!-~]+)\t((?:[!-~](?:[^\x00]*[!-~])?)?)\r?$"
        parts = body.str.extract_groups(pattern).struct
        lines = lines.select(
            "line", "raw", parts.field("1").alias("qid"), parts.field("2").alias("text")
        )
    if max_id_chars is not None:
        # ASCII: as many characters as bytes
        usual = usual & (pl.col("qid").str.len_bytes() <= max_id_chars)
    return lines.with_columns(pl.when(usual).then(pl.col(c)).alias(c) for c in ("qid", "text"))


def read_query_lines(
    path: Path,
    *,
    source: str,
    kind: str,
    parse_line: LineParser,
    max_id_chars: int | None = None,
    first_line_slow: bool = False,
) -> dict[str, str]:
    """Every query of a JSON lines (``kind="json"``) or TSV (``"tsv"``) file, in the order
    first seen: ``parse_line`` reads (and refuses) every line not of the usual shape, and the
    first line too with ``first_line_slow`` (a TSV header). A query id seen again with another
    text is an error naming the line, and so is the first error ``parse_line`` raises: the
    one of the lower line wins, as in a single pass."""
    frames: list[pl.DataFrame] = []
    failure: InputError | None = None
    for first, block in _blocks(path):
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError:
            taken = _slow_block(first, block)
        else:
            taken = _take_apart(text, first, kind, max_id_chars)
        if first_line_slow and first == 1:
            taken = taken.with_columns(
                pl.when(pl.col("line") != 1).then(pl.col(c)).alias(c) for c in ("qid", "text")
            )
        fast = taken.filter(pl.col("qid").is_not_null())
        slow = taken.filter(pl.col("qid").is_null())
        parsed: list[tuple[int, str, str]] = []
        for number, raw in slow.select("line", "raw").iter_rows():
            try:
                found = parse_line(number, raw if isinstance(raw, bytes) else raw.encode())
            except InputError as error:
                failure = error
                fast = fast.filter(pl.col("line") < number)
                break
            if found is not None:
                parsed.append((number, found[0], found[1]))
        frames.append(fast.select("line", "qid", "text"))
        if parsed:
            frames.append(pl.DataFrame(parsed, schema=_SCHEMA, orient="row"))
        if failure is not None:
            break
    rows = pl.concat(frames).sort("line") if frames else pl.DataFrame(schema=_SCHEMA)
    again = rows.get_column("qid").is_duplicated()
    if again.any():
        _refuse_changed_texts(rows.filter(again), source)
        if failure is None:
            rows = rows.unique("qid", keep="first", maintain_order=True)
    if failure is not None:
        raise failure
    return dict(
        zip(rows.get_column("qid").to_list(), rows.get_column("text").to_list(), strict=True)
    )


def _slow_block(first: int, block: bytes) -> pl.DataFrame:
    """A block that is not all UTF-8: every line to the line parser (it names the bad byte)."""
    lines = _raw_lines(block)
    return pl.DataFrame(
        {
            "line": pl.Series(range(first, first + len(lines)), dtype=pl.Int64),
            "raw": pl.Series(lines, dtype=pl.Binary),
            "qid": pl.Series([None] * len(lines), dtype=pl.String),
            "text": pl.Series([None] * len(lines), dtype=pl.String),
        }
    )


def _refuse_changed_texts(rows: pl.DataFrame, source: str) -> None:
    """A query given twice with different texts: an error at the first line that differs."""
    changed = rows.filter(pl.col("text") != pl.col("text").first().over("qid"))
    if changed.height:
        line, qid = changed.row(0)[:2]
        raise InputError(
            source, int(line), f"query {shorten(qid)} appears twice with different texts"
        )
