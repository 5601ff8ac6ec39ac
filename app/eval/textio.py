"""Whitespace-separated text tables (TREC runs and qrels), read column-wise.

Two paths give the same result:

* the fast path hands the file to polars' CSV reader, streaming, when the file uses one
  separator character (space or tab) consistently; polars keeps one row per line (a blank line
  is a row of nulls), so row ``i`` is line ``i + 1``. Anything unexpected sends the file to
* the tolerant path, which splits lines on runs of blanks and tabs, chunk by chunk, with line
  numbers tracked explicitly. It handles what the fast path refuses (runs of spaces, mixed
  separators) and is the one that words the errors (bad values, wrong column counts).

Gzip input is recognised by its magic bytes and decompressed to a temporary file, streaming,
within a :class:`DecompressionLimit`; a UTF-8 byte-order mark at the start is dropped.
"""

from __future__ import annotations

import contextlib
import gzip
import re
import shutil
import tempfile
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar, Token
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import polars as pl

from app.eval.errors import InputError
from app.eval.values import float_column, int_column

GZIP_MAGIC = b"\x1f\x8b"
#: A UTF-8 byte-order mark, which some editors write at the start of a text file: stripped.
BOM = b"\xef\xbb\xbf"
CHUNK_BYTES = 32 << 20
#: The fast path's blocks: small enough that the reader's buffers are reused from one to the
#: next, large enough that polars parses each in parallel.
FAST_BLOCK_BYTES = 4 << 20
#: Fields are separated by runs of blanks and tabs, as trec_eval's whitespace splitting does.
_SEP = r"[ \t\v\f]+"
_FIELD = r"([^ \t\v\f\r\n]+)"
_BLANK_CHARS = " \t\v\f\r"

#: The longest line read: a JSON ranking of a million documents is 20 MB; a gigabyte without
#: a newline is not a line of any of our formats, and would be held in memory whole.
MAX_LINE_BYTES = 256 << 20

ProgressFn = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class DecompressionLimit:
    """How much a gzip file may expand: at most ``max_bytes``, and beyond ``ratio_floor``
    bytes at most ``max_ratio`` times its compressed size. Text tables compress 5 to 20
    times; a decompression bomb (a gigabyte of zeros in a megabyte) about a thousand."""

    max_bytes: int = 8 << 30
    max_ratio: int = 100
    ratio_floor: int = 64 << 20

    def allowed(self, compressed: int) -> int:
        return min(self.max_bytes, max(self.ratio_floor, self.max_ratio * compressed))


#: A limit, or a function that finds it: asked only when a gzip file is read, so that a
#: command reading plain files never loads what finds the limit (the service's settings).
LimitSource = DecompressionLimit | Callable[[], DecompressionLimit]

_LIMIT: ContextVar[LimitSource] = ContextVar(
    "decompression_limit",
    default=DecompressionLimit(),  # noqa: B039 (frozen, so never mutated)
)


def set_decompression_limit(limit: LimitSource) -> Token[LimitSource]:
    """Apply ``limit`` to every gzip file read in the current context (a request, a command)."""
    return _LIMIT.set(limit)


def current_decompression_limit() -> DecompressionLimit:
    """The limit of the current context (a function given for it is called now)."""
    limit = _LIMIT.get()
    return limit if isinstance(limit, DecompressionLimit) else limit()


@contextlib.contextmanager
def decompression_limit(limit: LimitSource) -> Iterator[None]:
    token = _LIMIT.set(limit)
    try:
        yield
    finally:
        _LIMIT.reset(token)


def _head(path: Path) -> bytes:
    """The first bytes of a file, or an InputError when it cannot be read at all."""
    if not path.exists():
        raise InputError(path, None, "file not found")
    if not path.is_file():
        raise InputError(path, None, "not a file (a directory?)")
    try:
        with path.open("rb") as handle:
            return handle.read(3)
    except OSError as exc:
        raise InputError(path, None, f"cannot be read ({exc.strerror or exc})") from None


@contextlib.contextmanager
def plain_file(path: Path) -> Iterator[Path]:
    """Yield a path to the uncompressed bytes of ``path`` (itself, or a temporary copy), with
    a leading byte-order mark removed. Decompression stops at the context's
    :class:`DecompressionLimit`; gzip inside gzip is refused."""
    head = _head(path)
    if not head.startswith((GZIP_MAGIC, BOM)):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="misstriage-") as tmp:
        target = Path(tmp) / (path.name.removesuffix(".gz")[-100:] or "input")
        if head.startswith(BOM):
            with path.open("rb") as src, target.open("wb") as dst:
                src.seek(len(BOM))
                shutil.copyfileobj(src, dst, 1 << 20)
        else:
            _gunzip(path, target)
        yield target


def _gunzip(path: Path, target: Path) -> None:
    limit = current_decompression_limit()
    allowed = limit.allowed(path.stat().st_size)
    if allowed < limit.max_bytes:
        why = f"{limit.max_ratio} times its compressed size (MISSTRIAGE_DECOMPRESSION_MAX_RATIO)"
    else:
        why = "MISSTRIAGE_DECOMPRESSED_MAX_BYTES"
    written = 0
    try:
        with gzip.open(path, "rb") as src, target.open("wb") as dst:
            # GzipFile.read(n) inflates at most n bytes: memory stays bounded.
            block = src.read(1 << 20)
            if block.startswith(GZIP_MAGIC):
                raise InputError(path, None, "gzip inside gzip: compress the file once")
            block = block.removeprefix(BOM)
            while block:
                written += len(block)
                if written > allowed:
                    raise InputError(
                        path,
                        None,
                        f"decompresses to more than {allowed:,} bytes, the limit ({why}): "
                        "refused as a decompression bomb",
                    )
                dst.write(block)
                block = src.read(1 << 20)
    except EOFError:
        raise InputError(path, None, "truncated gzip file (unexpected end of data)") from None
    except (OSError, zlib.error) as exc:
        raise InputError(path, None, f"not a readable gzip file ({exc})") from None


def numbered_lines(handle: BinaryIO, source: str) -> Iterator[tuple[int, bytes]]:
    """(1-based number, bytes) of every line of a binary file, each at most
    ``MAX_LINE_BYTES`` long (a longer one is an error naming it, read no further)."""
    number = 0
    while True:
        raw = handle.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE_BYTES:
            raise InputError(source, number, f"a line longer than {MAX_LINE_BYTES:,} bytes")
        yield number, raw


def sniff_separator(path: Path) -> str | None:
    """The single separator character of the file, or None when the fast path cannot be used.

    Looks at the first 64 KiB: tabs only or single spaces only between fields.
    """
    with path.open("rb") as handle:
        head = handle.read(64 << 10)
    lines = head.split(b"\n")
    if len(lines) > 1:
        lines = lines[:-1]  # the last one may be cut in the middle
    has_tab = any(b"\t" in line for line in lines)
    has_space = any(b" " in line for line in lines)
    if has_tab and has_space:
        return None
    if any(b"  " in line or b"\t\t" in line for line in lines):
        return None
    if any(line[:1] in (b" ", b"\t") for line in lines):
        return None
    return "\t" if has_tab else " "


def read_table(
    path: Path,
    *,
    columns: Sequence[str],
    keep: Sequence[str],
    expected: str,
    source: str,
    floats: Sequence[str] = (),
    ints: Sequence[str] = (),
    progress: ProgressFn | None = None,
) -> pl.DataFrame:
    """Read a whitespace-separated table with exactly ``len(columns)`` fields a line.

    Returns the ``keep`` columns plus ``line`` (UInt32, 1-based): ``floats`` as finite doubles
    (-0.0 folded into 0.0, so that they tie), ``ints`` as Int64, the rest as strings. Blank
    lines are skipped. ``expected`` describes a line for error messages
    (``qid Q0 docno rank score tag``).
    """
    separator = sniff_separator(path)
    if separator is not None:
        frame = read_fast(
            path, columns=columns, keep=keep, separator=separator, floats=floats, ints=ints
        )
        if frame is not None:
            if progress is not None:
                progress(path.stat().st_size)
            return frame
    frame = _read_tolerant(
        path, columns=columns, keep=keep, expected=expected, source=source, progress=progress
    )
    for column in floats:
        frame = float_column(frame, column, source=source, what=column)
    for column in ints:
        frame = int_column(frame, column, source=source, what=column)
    return frame


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
    """polars' CSV reader, block by block; None when anything is off (too many or too few
    fields, an empty field, a blank character other than ``separator``, a value that does not
    parse, a NUL byte): the tolerant path then finds and words the problem. ``path`` may be a
    block of whole lines already (bytes), the first numbered ``first_line``.

    The file is handed over in blocks of whole lines (``FAST_BLOCK_BYTES``): given the whole
    file, the reader's buffers stay allocated after it returns and a run's peak memory grows by
    about half its size. Two blocks are parsed at a time, in threads (polars releases the GIL),
    while the next is read: one block at a time leaves a core idle. Numbers are parsed by the
    reader itself (no text column kept for them): a value it cannot parse stops it, and the
    tolerant path, which casts the text with the same parser, names the line.
    """
    parse = _BlockParser(columns, keep, separator, floats, ints)
    if isinstance(path, bytes):
        return _parsed_or_none(parse, first_line, path)
    parts: list[pl.DataFrame] = []
    pending: deque[Future[pl.DataFrame | None]] = deque()
    with ThreadPoolExecutor(_PARSERS) as pool:
        try:
            for line_number, block in _line_blocks(path):
                pending.append(pool.submit(_parsed_or_none, parse, line_number, block))
                del block
                # one block more than the parsers take, read while they parse; at most that
                # many wait, so memory stays a few blocks whatever the file
                while len(pending) > _PARSERS:
                    part = pending.popleft().result()
                    if part is None:
                        return None
                    parts.append(part)
            while pending:
                part = pending.popleft().result()
                if part is None:
                    return None
                parts.append(part)
        except (OSError, _LineTooLong):
            return None
        finally:
            for future in pending:
                future.cancel()
    if not parts:
        return pl.DataFrame(schema={**{c: parse.schema[c] for c in keep}, "line": pl.UInt32})
    return pl.concat(parts)


#: Blocks parsed at once (the machines this runs on have two cores or more).
_PARSERS = 2


def _parsed_or_none(parse: _BlockParser, line_number: int, block: bytes) -> pl.DataFrame | None:
    try:
        return parse(line_number, block)
    except (pl.exceptions.PolarsError, UnicodeDecodeError):
        return None


class _BlockParser:
    """Parses one block of whole lines (see ``read_fast``)."""

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

    def __call__(self, line_number: int, block: bytes) -> pl.DataFrame | None:
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
            .with_row_index("line", offset=line_number)
            # flagged, not filtered: a filter would copy every column, for blank lines that
            # are rare
            .select(*self.values, "line", self.blank.alias("_blank"), self.bad.alias("_bad"))
            .collect(engine="streaming")
        )
        blank = part.get_column("_blank")
        if (part.get_column("_bad") & ~blank).any():
            return None
        if blank.any():
            part = part.filter(~blank)
        return part.drop("_blank", "_bad")


class _LineTooLong(Exception):
    """A line longer than a fast-path block: the tolerant path reads the file."""


def _line_blocks(path: Path) -> Iterator[tuple[int, bytes]]:
    """(number of the first line, bytes) of blocks of whole lines, about ``FAST_BLOCK_BYTES``
    each; ``_LineTooLong`` when a line does not fit in one."""
    line = 1
    with path.open("rb") as handle:
        while block := handle.read(FAST_BLOCK_BYTES):
            if len(block) == FAST_BLOCK_BYTES:
                cut = block.rfind(b"\n") + 1
                if cut == 0:
                    raise _LineTooLong
                handle.seek(cut - len(block), 1)
                block = block[:cut]
            yield line, block
            line += block.count(b"\n")


def _more(count: int) -> str:
    return f" (and {count - 1} more such lines)" if count > 1 else ""


def _read_tolerant(
    path: Path,
    *,
    columns: Sequence[str],
    keep: Sequence[str],
    expected: str,
    source: str,
    progress: ProgressFn | None,
) -> pl.DataFrame:
    ncols = len(columns)
    pattern = "^" + f"[ \\t\\v\\f]*{_FIELD}" + f"{_SEP}{_FIELD}" * (ncols - 1) + "[ \\t\\v\\f\\r]*$"
    parts: list[pl.DataFrame] = []
    for first_line, text in _chunks(path, source=source, progress=progress):
        lines = pl.DataFrame({"raw": pl.Series([text]).str.split("\n").explode()})
        lines = lines.with_row_index("line", offset=first_line)
        blank = pl.col("raw").str.strip_chars(_BLANK_CHARS) == ""
        lines = lines.filter(~blank)
        fields = lines.select(
            "line", "raw", pl.col("raw").str.extract_groups(pattern).alias("f")
        ).unnest("f")
        names = {str(i + 1): name for i, name in enumerate(columns)}
        fields = fields.rename(names)
        bad = fields.filter(pl.col(columns[0]).is_null())
        if bad.height:
            first = bad.row(0, named=True)
            found = len(re.split(_SEP, first["raw"].strip(_BLANK_CHARS)))
            raise InputError(
                source,
                int(first["line"]),
                f"expected {ncols} columns ({expected}), found {found}" + _more(bad.height),
            )
        for column in keep:
            nul = fields.filter(pl.col(column).str.contains("\x00", literal=True))
            if nul.height:
                raise InputError(
                    source,
                    int(nul.get_column("line")[0]),
                    f"a NUL byte in the {column} field: not a text file" + _more(nul.height),
                )
        parts.append(fields.select(*keep, pl.col("line").cast(pl.UInt32)))
    if not parts:
        return pl.DataFrame(schema={**dict.fromkeys(keep, pl.String), "line": pl.UInt32})
    return pl.concat(parts, rechunk=True)


def _chunks(path: Path, *, source: str, progress: ProgressFn | None) -> Iterator[tuple[int, str]]:
    """Yield (number of the chunk's first line, decoded text) over whole lines of the file."""
    line = 1
    rest = b""
    with path.open("rb") as handle:
        while True:
            block = handle.read(CHUNK_BYTES)
            if progress is not None and block:
                progress(len(block))
            data = rest + block
            if block:
                cut = data.rfind(b"\n")
                if cut < 0:
                    if len(data) > MAX_LINE_BYTES:
                        raise InputError(
                            source, line, f"a line longer than {MAX_LINE_BYTES:,} bytes"
                        )
                    rest = data
                    continue
                rest, data = data[cut + 1 :], data[:cut]
            elif not data:
                return
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad_line = line + data.count(b"\n", 0, exc.start)
                column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
                raise InputError(
                    source,
                    bad_line,
                    f"not valid UTF-8 text (byte 0x{data[exc.start]:02x} at column {column})",
                ) from None
            yield line, text
            line += data.count(b"\n") + 1
            if not block:
                return
