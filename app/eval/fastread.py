"""The fast path of the table reader (``app.eval.textio``): polars' CSV reader, block by block.

It takes a file only when it can see every way a line may be off, and gives it up (None) at
the first doubt: too many or too few fields, an empty field, a blank character other than the
separator, a carriage return inside a line, a value that does not parse, a NUL byte. The
tolerant path then reads the file and words the problem, naming the line.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import polars as pl

#: The blocks: small enough that the reader's buffers are reused from one to the next, large
#: enough that the fixed cost of a parse (about a millisecond) stays small (8 MB: 3% less CPU
#: than 4 MB at 7M lines, the same peak memory).
FAST_BLOCK_BYTES = 8 << 20
#: Blocks parsed at once (the machines this runs on have two cores or more).
_PARSERS = 2

#: A parsed block and the number of lines it holds.
_Parsed = tuple[pl.DataFrame, int]


def read_fast(
    path: Path | bytes,
    *,
    columns: Sequence[str],
    keep: Sequence[str],
    separator: str,
    floats: Sequence[str],
    ints: Sequence[str],
    first_line: int = 1,
) -> pl.DataFrame | None:
    """The ``keep`` columns and ``line`` (UInt32) of a table with ``columns``, or None when
    anything is off (see the module). ``path`` may be a block of whole lines already (bytes),
    the first numbered ``first_line``.

    The file is handed over in blocks of whole lines (``FAST_BLOCK_BYTES``): given the whole
    file, the reader's buffers stay allocated after it returns and a run's peak memory grows by
    about half its size. Two blocks are parsed at a time, in threads (polars releases the GIL),
    while the next is read: one block at a time leaves a core idle. A block's lines are
    numbered from the number of rows of the blocks before it (polars keeps one row per line,
    a blank line too), so the bytes are never scanned for line ends. Numbers are parsed by the
    reader itself (no text column kept for them): a value it cannot parse stops it, and the
    tolerant path, which casts the text with the same parser, names the line.
    """
    parse = _BlockParser(columns, keep, separator, floats, ints)
    if isinstance(path, bytes):
        parsed = _parsed_or_none(parse, path)
        return None if parsed is None else _numbered(parsed[0], first_line)
    parts: list[pl.DataFrame] = []
    pending: deque[Future[_Parsed | None]] = deque()
    line = first_line

    def take() -> bool:
        nonlocal line
        parsed = pending.popleft().result()
        if parsed is None:
            return False
        part, lines = parsed
        parts.append(_numbered(part, line))
        line += lines
        return True

    with ThreadPoolExecutor(_PARSERS) as pool:
        try:
            for block in _line_blocks(path):
                pending.append(pool.submit(_parsed_or_none, parse, block))
                del block
                # one block more than the parsers take, read while they parse; at most that
                # many wait, so memory stays a few blocks whatever the file
                while len(pending) > _PARSERS:
                    if not take():
                        return None
            while pending:
                if not take():
                    return None
        except (OSError, _LineTooLong):
            return None
        finally:
            for future in pending:
                future.cancel()
    if not parts:
        return pl.DataFrame(schema={**{c: parse.schema[c] for c in keep}, "line": pl.UInt32})
    return pl.concat(parts)


def _numbered(part: pl.DataFrame, first_line: int) -> pl.DataFrame:
    """``line``: from the row's place in its block (0-based) to its line in the file."""
    return part.with_columns((pl.col("line") + first_line).cast(pl.UInt32))


def _parsed_or_none(parse: _BlockParser, block: bytes) -> _Parsed | None:
    try:
        return parse(block)
    except (pl.exceptions.PolarsError, UnicodeDecodeError):
        return None


class _BlockParser:
    """Parses one block of whole lines: (rows numbered from 0 in ``line``, lines), or None."""

    def __init__(
        self,
        columns: Sequence[str],
        keep: Sequence[str],
        separator: str,
        floats: Sequence[str],
        ints: Sequence[str],
    ) -> None:
        self.columns = list(columns)
        self.separator = separator
        self.schema: dict[str, type[pl.DataType]] = {
            c: pl.Float64 if c in floats else pl.Int64 if c in ints else pl.String
            for c in [*columns, "_extra"]
        }
        # The tolerant path splits on runs of any blank: another blank character than the
        # separator inside a field is a field boundary there, so the file goes to it.
        self.foreign = [c.encode() for c in " \t\v\f" if c != separator]
        # A blank line (or one of blanks only) is a row of nulls. An empty field (a line
        # starting with the separator, or two separators in a row) is a null: off, as is a
        # short line (null last field), a long one (a value in "_extra"), and a number that
        # is not finite.
        self.blank = pl.all_horizontal([pl.col(c).is_null() for c in [*columns, "_extra"]])
        anomalies = [pl.col(c).is_null() for c in columns]
        anomalies.append(pl.col("_extra").is_not_null())
        anomalies += [~pl.col(c).is_finite().fill_null(False) for c in floats]
        self.bad = pl.any_horizontal(anomalies)
        self.values = [pl.col(c) + 0.0 if c in floats else pl.col(c) for c in keep]

    def __call__(self, block: bytes) -> _Parsed | None:
        # A NUL byte is binary data (and no database stores it in text): the tolerant path
        # names it. Looking for one in the bytes costs a tenth of looking in every field.
        if b"\x00" in block or any(c in block for c in self.foreign):
            return None
        # a carriage return is only allowed in a line end (CRLF), where both paths drop it
        if b"\r" in block and block.count(b"\r") != block.count(b"\r\n"):
            return None
        part = (
            pl.scan_csv(
                block,
                separator=self.separator,
                has_header=False,
                # One column more than a line may have: with projection pushdown polars
                # stops reading a line at the last column it needs, so extra fields must
                # be asked for.
                new_columns=[*self.columns, "_extra"],
                schema=self.schema,
                missing_columns="insert",
                quote_char=None,
                raise_if_empty=False,
                encoding="utf8",
            )
            # polars keeps one row per line (a blank line is a row of nulls)
            .with_row_index("line")
            # flagged, not filtered: a filter would copy every column, for blank lines that
            # are rare
            .select(*self.values, "line", self.blank.alias("_blank"), self.bad.alias("_bad"))
            .collect(engine="streaming")
        )
        lines = part.height
        blank = part.get_column("_blank")
        if (part.get_column("_bad") & ~blank).any():
            return None
        if blank.any():
            part = part.filter(~blank)
        return part.drop("_blank", "_bad"), lines


class _LineTooLong(Exception):
    """A line longer than a block: the tolerant path reads the file."""


def _line_blocks(path: Path) -> Iterator[bytes]:
    """Blocks of whole lines, about ``FAST_BLOCK_BYTES`` each; ``_LineTooLong`` when a line
    does not fit in one."""
    with path.open("rb") as handle:
        while block := handle.read(FAST_BLOCK_BYTES):
            if len(block) == FAST_BLOCK_BYTES:
                cut = block.rfind(b"\n") + 1
                if cut == 0:
                    raise _LineTooLong
                handle.seek(cut - len(block), 1)
                block = block[:cut]
            yield block
