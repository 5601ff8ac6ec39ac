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
import io
import re
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from app.eval.errors import InputError
from app.eval.fastread import read_fast as read_fast  # re-exported (app.eval.streaming)
from app.eval.values import float_column, int_column

GZIP_MAGIC = b"\x1f\x8b"
#: A UTF-8 byte-order mark, which some editors write at the start of a text file: stripped.
BOM = b"\xef\xbb\xbf"
CHUNK_BYTES = 32 << 20
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

    def why(self, compressed: int) -> str:
        """Which setting ``allowed(compressed)`` comes from, for an error."""
        if self.allowed(compressed) < self.max_bytes:
            return (
                f"{self.max_ratio} times its compressed size (MISSTRIAGE_DECOMPRESSION_MAX_RATIO)"
            )
        return "MISSTRIAGE_DECOMPRESSED_MAX_BYTES"


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


def check_regular_file(path: Path) -> None:
    """An InputError unless ``path`` is a file: not a directory, and not a pipe either (an
    input is opened more than once: its first bytes, then its lines)."""
    if not path.is_file():
        what = "not a file (a directory?)" if path.is_dir() else "not a regular file (a pipe?)"
        raise InputError(path, None, "file not found" if not path.exists() else what)


def _head(path: Path) -> bytes:
    """The first bytes of a file, or an InputError when it cannot be read at all."""
    check_regular_file(path)
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
        with plain_stream(path) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        try:
            yield target
        except InputError as exc:
            # an error of the copy is the file's: it names the file given, never the copy
            if exc.source != str(target):
                raise
            raise InputError(path, exc.line, exc.message) from None


@contextlib.contextmanager
def plain_stream(path: Path) -> Iterator[BinaryIO]:
    """The uncompressed bytes of ``path`` as a stream read front to back, without a copy on
    disk: ``plain_file``'s bytes, its errors worded the same way."""
    head = _head(path)
    if not head.startswith(GZIP_MAGIC):
        with path.open("rb") as handle:
            if head.startswith(BOM):
                handle.seek(len(BOM))
            yield handle
        return
    limit = current_decompression_limit()
    with gzip.open(path, "rb") as inner:
        yield _Inflated(inner, path, limit)  # type: ignore[misc]


class _Inflated(io.RawIOBase):
    """A gzip file's bytes within a decompression limit: an InputError past it, for gzip
    inside gzip, and for a truncated or unreadable file."""

    def __init__(self, inner: gzip.GzipFile, path: Path, limit: DecompressionLimit) -> None:
        super().__init__()
        self._inner = inner
        self._path = path
        self._allowed = limit.allowed(path.stat().st_size)
        self._why = limit.why(path.stat().st_size)
        self._written = 0
        self._first = True

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        try:
            got = self._inner.readinto(view)
            if self._first and got:
                self._first = False
                # the first bytes may come short of the magic's or the mark's length
                while got < len(BOM) and (more := self._inner.readinto(view[got:])):
                    got += more
                if bytes(view[:2]) == GZIP_MAGIC:
                    raise InputError(self._path, None, "gzip inside gzip: compress the file once")
                if bytes(view[: len(BOM)]) == BOM:
                    view[: got - len(BOM)] = view[len(BOM) : got]
                    got -= len(BOM)
        except EOFError:
            raise InputError(
                self._path, None, "truncated gzip file (unexpected end of data)"
            ) from None
        except (OSError, zlib.error) as exc:
            raise InputError(self._path, None, f"not a readable gzip file ({exc})") from None
        self._written += got
        if self._written > self._allowed:
            raise InputError(
                self._path,
                None,
                f"decompresses to more than {self._allowed:,} bytes, the limit ({self._why}): "
                "refused as a decompression bomb",
            )
        return got


class LineTooLong(Exception):
    """A line longer than ``MAX_LINE_BYTES``."""


def whole_line_blocks(handle: BinaryIO, size: int) -> Iterator[tuple[bytes, bool, int]]:
    """(bytes of whole lines, whether they are the last, bytes read for them), about
    ``size`` bytes at a time; the last may end without a newline (and be empty). LineTooLong
    when a line would pass ``MAX_LINE_BYTES``."""
    rest, read = b"", 0
    while True:
        data = handle.read(size)
        read += len(data)
        last = not data
        data = rest + data
        if not last:
            cut = data.rfind(b"\n") + 1
            if not cut:
                if len(data) > MAX_LINE_BYTES:
                    raise LineTooLong
                rest = data
                continue
            data, rest = data[:cut], data[cut:]
        yield data, last, read
        read = 0
        if last:
            return


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
    """The single separator character of the file, or None when the fast path cannot be used
    (``separator_of`` its first 64 KiB)."""
    with path.open("rb") as handle:
        return separator_of(handle.read(64 << 10))


def separator_of(head: bytes) -> str | None:
    """The single separator of the lines of ``head`` (a file's first bytes, the last line
    perhaps cut): tabs only or single spaces only between fields; None otherwise."""
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
