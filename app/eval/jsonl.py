"""JSON Lines inputs: runs, BEIR queries and corpus files (plain or gzip).

Runs come in two shapes, decided by the first non-blank line:

* one ranking a line: ``{"qid": "q1", "docs": ["d3", "d1", ...]}`` (list order is the ranking;
  entries may also be ``{"doc_id": .., "score": ..}`` objects);
* one hit a line: ``{"qid": "q1", "doc_id": "d3", "score": 12.5}`` (optional ``"rank"``),
  ordered like a TREC run.

The reader is a plain line loop: it checks every value and names the line of the first bad one.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from app.eval import textio
from app.eval.errors import InputError, shorten
from app.eval.query_lines import read_query_lines
from app.eval.textio import ProgressFn, numbered_lines, plain_file
from app.eval.values import INT32_MAX

#: The deepest nesting of arrays and objects a line may have. Our shapes need 3; stdlib json
#: recurses once a level, so a line ``[[[[...`` 100,000 deep would exhaust the stack.
MAX_JSON_DEPTH = 64
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: A lone UTF-16 surrogate (``"\ud800"`` in JSON) is no character: no UTF-8 text holds it.
_SURROGATE = re.compile("[\ud800-\udfff]")

LIST_FORMAT = "jsonl-lists"
HIT_FORMAT = "jsonl-hits"


def _lines(path: Path, source: str) -> Iterator[tuple[int, int, Any]]:
    """Yield (line number, byte length, parsed JSON value) for every non-blank line."""
    with path.open("rb") as handle:
        yield from _values(numbered_lines(handle, source), source)


def _values(numbered: Iterable[tuple[int, bytes]], source: str) -> Iterator[tuple[int, int, Any]]:
    """(line number, byte length, parsed JSON value) of every non-blank line of
    ``numbered`` ((number, bytes) of each line), checked as ``_parse_line`` says."""
    for number, raw in numbered:
        if raw.strip():
            yield number, len(raw), _parse_line(raw, source=source, number=number)


def _parse_line(raw: bytes, *, source: str, number: int) -> Any:
    """One non-blank line's JSON value (UTF-8, nested at most MAX_JSON_DEPTH deep)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            source, number, f"not valid UTF-8 text (byte at column {exc.start + 1})"
        ) from None
    depth = nesting_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise InputError(
            source,
            number,
            f"JSON nested deeper than {MAX_JSON_DEPTH} levels (at least {depth})",
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(source, number, f"not valid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        # ValueError: an integer of more than 4,300 digits (Python's limit).
        raise InputError(source, number, f"not valid JSON ({shorten(str(exc), 100)})") from None


def nesting_depth(raw: bytes) -> int:
    """The deepest nesting of ``[`` and ``{`` outside strings, found without recursion (a
    scan before ``json.loads``, which recurses); the count of brackets when that is smaller
    than the limit, which bounds the depth and costs two ``bytes.count``."""
    opening = raw.count(b"[") + raw.count(b"{")
    if opening <= MAX_JSON_DEPTH:
        return opening
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for byte in brackets:
        depth += 1 if byte in (0x5B, 0x7B) else -1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_JSON_DEPTH:
                break
    return deepest


def _identifier(value: Any, *, source: str, line: int, field: str, limit: int | None = None) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(
            source, line, f'"{field}" must be a string or an integer, got {_kind(value)}'
        )
    text = str(value)
    # the length first: it costs nothing, where the checks below read every character (a
    # Parquet file can hand the same megabyte id over on every row)
    _check_length(text, limit, source=source, line=line, what=f'"{field}"')
    _check_unicode(text, source=source, line=line, field=field)
    if not text or any(c.isspace() or unicodedata.category(c) == "Cc" for c in text):
        raise InputError(
            source,
            line,
            f'"{field}" {shorten(text)} is empty or contains whitespace or control bytes',
        )
    return text


def _check_length(text: str, limit: int | None, *, source: str, line: int, what: str) -> None:
    if limit is not None and len(text) > limit:
        raise InputError(
            source,
            line,
            f"{what} {shorten(text, 40)} is {len(text):,} characters long (at most {limit})",
        )


def _text(value: Any, *, source: str, line: int, field: str) -> str:
    """A free-text field: a string without NUL bytes (binary data, which no database keeps)."""
    if not isinstance(value, str):
        raise InputError(source, line, f'"{field}" must be a string, got {_kind(value)}')
    if "\x00" in value:
        raise InputError(source, line, f'"{field}" contains a NUL byte')
    _check_unicode(value, source=source, line=line, field=field)
    return value


def _check_unicode(text: str, *, source: str, line: int, field: str) -> None:
    found = _SURROGATE.search(text)
    if found:
        raise InputError(
            source,
            line,
            f'"{field}" holds a lone surrogate \\u{ord(found.group()):04x}: not valid Unicode',
        )


def _number(value: Any, *, source: str, line: int, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(source, line, f'"{field}" must be a number, got {_kind(value)}')
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise InputError(source, line, f'"{field}" {shorten(value)} is not a finite number')
    return number + 0.0


def _integer(
    value: Any,
    *,
    source: str,
    line: int,
    field: str,
    low: int = INT64_MIN,
    high: int = INT64_MAX,
) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(source, line, f'"{field}" must be an integer, got {_kind(value)}')
    if not low <= value <= high:
        raise InputError(
            source, line, f'"{field}" {shorten(value)} is out of range ({low} to {high})'
        )
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", str: "a string", list: "a list", dict: "an object"}.get(
        type(value), type(value).__name__
    )


def _object(value: Any, *, source: str, line: int, required: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(source, line, f"expected a JSON object, got {_kind(value)}")
    missing = [key for key in required if key not in value]
    if missing:
        raise InputError(source, line, f"missing field {', '.join(repr(m) for m in missing)}")
    return value


#: Results handed over at once by ``jsonl_run_blocks``.
BLOCK_RESULTS = 200_000
_RUN_SCHEMA = {
    "qid": pl.String,
    "doc_id": pl.String,
    "score": pl.Float64,
    "rank": pl.Int64,
    "line": pl.UInt32,
}


def read_jsonl_run(path: Path, *, progress: ProgressFn | None = None) -> tuple[pl.DataFrame, str]:
    """Read a JSONL run: (frame with qid, doc_id, score (or null), rank (or null), line; format)."""
    parts: list[pl.DataFrame] = []
    fmt = HIT_FORMAT
    for part, shape in jsonl_run_blocks(path, progress=progress):
        parts.append(part)
        fmt = shape
    return (pl.concat(parts) if parts else pl.DataFrame(schema=_RUN_SCHEMA)), fmt


def jsonl_run_blocks(
    path: Path, *, progress: ProgressFn | None = None, results: int | None = None
) -> Iterator[tuple[pl.DataFrame, str]]:
    """A JSONL run some ``results`` at a time, at line boundaries: (frame with qid, doc_id,
    score (or null), rank (or null), line; format, decided by the first line)."""
    source = str(path)
    results = results or BLOCK_RESULTS
    qids: list[str] = []
    docs: list[str] = []
    scores: list[float | None] = []
    ranks: list[int | None] = []
    lines: list[int] = []
    fmt: str | None = None

    def frame() -> pl.DataFrame:
        made = pl.DataFrame(
            {"qid": qids, "doc_id": docs, "score": scores, "rank": ranks, "line": lines},
            schema=_RUN_SCHEMA,
        )
        for column in (qids, docs, scores, ranks, lines):
            column.clear()
        return made

    with plain_file(path) as plain:
        for line, size, value in _lines(plain, source):
            if progress is not None:
                progress(size)
            if len(qids) >= results:
                yield frame(), fmt or HIT_FORMAT
            if fmt is None:
                is_dict = isinstance(value, dict)
                fmt = LIST_FORMAT if is_dict and "docs" in value else HIT_FORMAT
            if fmt == LIST_FORMAT:
                obj = _object(value, source=source, line=line, required=("qid", "docs"))
                qid = _identifier(obj["qid"], source=source, line=line, field="qid")
                entries = obj["docs"]
                if not isinstance(entries, list):
                    raise InputError(source, line, f'"docs" must be a list, got {_kind(entries)}')
                for entry in entries:
                    score: float | None = None
                    if isinstance(entry, dict):
                        entry_obj = _object(entry, source=source, line=line, required=("doc_id",))
                        doc = _identifier(
                            entry_obj["doc_id"], source=source, line=line, field="doc_id"
                        )
                        if "score" in entry_obj:
                            score = _number(
                                entry_obj["score"], source=source, line=line, field="score"
                            )
                    else:
                        doc = _identifier(entry, source=source, line=line, field="docs[]")
                    qids.append(qid)
                    docs.append(doc)
                    scores.append(score)
                    ranks.append(None)
                    lines.append(line)
            else:
                qid, doc, score, rank = _hit(value, source=source, line=line)
                qids.append(qid)
                docs.append(doc)
                scores.append(score)
                ranks.append(rank)
                lines.append(line)
    if qids or fmt is None:
        yield frame(), fmt or HIT_FORMAT


def _hit(value: Any, *, source: str, line: int) -> tuple[str, str, float, int | None]:
    """(qid, doc_id, score, rank or None) of a one-hit-a-line run's line, checked."""
    obj = _object(value, source=source, line=line, required=("qid", "doc_id", "score"))
    qid = _identifier(obj["qid"], source=source, line=line, field="qid")
    doc = _identifier(obj["doc_id"], source=source, line=line, field="doc_id")
    score = _number(obj["score"], source=source, line=line, field="score")
    rank = obj.get("rank")
    if rank is not None:
        rank = _integer(rank, source=source, line=line, field="rank")
    return qid, doc, score, rank


def careful_hits(block: bytes, first_line: int, source: str) -> pl.DataFrame:
    """A block of whole lines of a one-hit-a-line run (its first line ``first_line``), read
    line by line with every check (an InputError names the first bad line)."""
    rows = []
    pieces = block.split(b"\n")
    if not pieces[-1]:
        pieces.pop()  # the block ends with a newline
    numbered = enumerate(pieces, start=first_line)
    for line, _, value in _values(numbered, source):
        rows.append((*_hit(value, source=source, line=line), line))
    return pl.DataFrame(rows, schema=_RUN_SCHEMA, orient="row")


def read_queries(path: Path, *, max_id_chars: int | None = None) -> dict[str, str]:
    """Read query texts: BEIR ``queries.jsonl`` (``_id``, ``text``) or TSV ``qid<TAB>text``.

    Lines of the usual shape are taken apart a block at a time (app.eval.query_lines), the
    others one by one below, with the same checks and errors naming the line.
    A file without a single query is an error (an empty upload, the wrong file)."""
    source = str(path)
    with plain_file(path) as plain:
        with plain.open("rb") as handle:
            head = handle.read(1 << 12).lstrip()
        is_json = head.startswith(b"{")

        def json_line(number: int, raw: bytes) -> tuple[str, str] | None:
            _check_line_length(raw, source=source, number=number)
            if not raw.strip():
                return None
            obj = _object(
                _parse_line(raw, source=source, number=number),
                source=source,
                line=number,
                required=(),
            )
            key = "_id" if "_id" in obj else "qid" if "qid" in obj else None
            if key is None:
                raise InputError(source, number, "missing field '_id'")
            text = _text(
                obj.get("text", obj.get("query")), source=source, line=number, field="text"
            )
            qid = _identifier(obj[key], source=source, line=number, field=key, limit=max_id_chars)
            _check_query_id(qid, source=source, line=number)
            return qid, text

        def tsv_line(number: int, raw: bytes) -> tuple[str, str] | None:
            _check_line_length(raw, source=source, number=number)
            try:
                decoded = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise InputError(source, number, "not valid UTF-8 text") from None
            if not decoded.strip():
                return None
            qid, sep, text = decoded.partition("\t")
            if not sep:
                raise InputError(source, number, "expected 2 tab-separated columns (qid text)")
            if number == 1 and qid.strip().lower() in ("qid", "query-id", "query_id", "id"):
                return None
            if "\x00" in decoded:
                raise InputError(source, number, "a NUL byte: not a text file")
            qid = qid.strip()
            _check_length(qid, max_id_chars, source=source, line=number, what="query id")
            _check_query_id(qid, source=source, line=number)
            return qid, text.strip()

        queries = read_query_lines(
            plain,
            source=source,
            kind="json" if is_json else "tsv",
            parse_line=json_line if is_json else tsv_line,
            max_id_chars=max_id_chars,
            first_line_slow=not is_json,
        )
    if not queries:
        raise InputError(
            source,
            None,
            "no query in this file (expected qid<TAB>text lines or "
            'JSON lines {"_id": ..., "text": ...})',
        )
    return queries


def _check_line_length(raw: bytes, *, source: str, number: int) -> None:
    limit = textio.MAX_LINE_BYTES  # read when called: the tests lower it
    if len(raw) > limit:
        raise InputError(source, number, f"a line longer than {limit:,} bytes")


def _check_query_id(qid: str, *, source: str, line: int) -> None:
    if not qid or any(c.isspace() for c in qid):
        raise InputError(source, line, f"query id {shorten(qid)} is empty or contains whitespace")


@dataclass(frozen=True, slots=True)
class CorpusRecord:
    """A corpus entry: the index manifest, and context for reviewers."""

    doc_id: str
    title: str
    text: str
    parent_id: str | None = None
    chunk_index: int | None = None
    cluster_id: str | None = None


def read_corpus(path: Path, *, max_id_chars: int | None = None) -> Iterator[CorpusRecord]:
    """Stream a BEIR ``corpus.jsonl`` (``_id``, ``title``, ``text``; optional ``parent_id``,
    ``chunk_index``, ``cluster_id``), one document at a time; ids up to ``max_id_chars``."""
    source = str(path)
    seen: set[str] = set()
    with plain_file(path) as plain:
        for line, _size, value in _lines(plain, source):
            obj = _object(value, source=source, line=line, required=("_id",))
            doc_id = _identifier(
                obj["_id"], source=source, line=line, field="_id", limit=max_id_chars
            )
            if doc_id in seen:
                raise InputError(source, line, f"document {shorten(doc_id)} appears twice")
            seen.add(doc_id)
            fields: dict[str, Any] = {}
            for name in ("title", "text"):
                fields[name] = _text(obj.get(name, ""), source=source, line=line, field=name)
            for name in ("parent_id", "cluster_id"):
                raw = obj.get(name)
                fields[name] = (
                    None
                    if raw is None
                    else _identifier(raw, source=source, line=line, field=name, limit=max_id_chars)
                )
            chunk = obj.get("chunk_index")
            if chunk is not None:
                chunk = _integer(
                    chunk, source=source, line=line, field="chunk_index", low=0, high=INT32_MAX
                )
            yield CorpusRecord(doc_id=doc_id, chunk_index=chunk, **fields)
    if not seen:
        raise InputError(source, None, 'the corpus is empty (expected JSON lines {"_id": ...})')


def read_manifest(path: Path, *, max_id_chars: int | None = None) -> list[str]:
    """Read an index manifest: the ids of the documents the search index holds, one a line
    (blank lines and lines starting with ``#`` skipped; plain or gzip). A repeated id is an
    error naming both lines, because a manifest that lists a document twice was not made by
    the tool we think it was."""
    source = str(path)
    first_seen: dict[str, int] = {}
    with plain_file(path) as plain, plain.open("rb") as handle:
        for number, raw in numbered_lines(handle, source):
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                raise InputError(
                    source, number, f"not valid UTF-8 text (byte at column {exc.start + 1})"
                ) from None
            if not text or text.startswith("#"):
                continue
            if any(c.isspace() for c in text):
                raise InputError(
                    source, number, f"a document id has no spaces, got {shorten(text)}"
                )
            if any(unicodedata.category(c) == "Cc" for c in text):
                raise InputError(
                    source, number, f"a document id has no control bytes, got {shorten(text)}"
                )
            _check_length(text, max_id_chars, source=source, line=number, what="document id")
            if text in first_seen:
                raise InputError(
                    source,
                    number,
                    f"document {shorten(text)} is listed twice (first on line {first_seen[text]})",
                )
            first_seen[text] = number
    if not first_seen:
        raise InputError(source, None, "the manifest is empty (expected one document id a line)")
    return list(first_seen)
