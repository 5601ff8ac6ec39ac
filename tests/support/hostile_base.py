"""The hostile-upload catalogue's vocabulary (the cases are in hostile_cases.py and
hostile_older.py): cases written from the classes of issue 13 (decompression,
JSON nesting, integers beyond their columns, ids beyond their columns, echoed values, byte-order
marks, empty files) and the older ones (ragged lines, non-UTF-8, NUL, huge lines and numbers,
NaN, duplicates, mixed formats, broken gzip, CRLF, whitespace only).

Every case is one file of one kind, placed beside good files: judgments (``qrels``), query
texts (``queries``), a corpus, an index manifest, or a run into the golden set ``good``.
A case is either refused (4xx / exit 2, naming the file and, where one applies, the line) or,
for inputs that are odd but valid (a BOM, CRLF, several gzip members), accepted with the
numbers it must give.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from typing import Any, Literal

Target = Literal["qrels", "queries", "corpus", "manifest", "run"]

QRELS = "q1 0 a 2\nq1 0 b 1\nq2 0 c 1\nq3 0 z 0\n"
QUERIES = "q1\trate limits\nq2\tsso login\nq3\tbilling\n"
CORPUS = "".join(
    json.dumps({"_id": d, "title": d.upper(), "text": f"text of {d}"}) + "\n" for d in "abcz"
)
MANIFEST = "a\nb\nc\n"
RUN = "q1 Q0 a 1 9 t\nq1 Q0 x 2 8 t\nq2 Q0 c 1 5 t\n"
GOOD = {"qrels": QRELS, "queries": QUERIES, "corpus": CORPUS, "manifest": MANIFEST, "run": RUN}
NAMES = {
    "qrels": "bad.qrels",
    "queries": "bad-queries.tsv",
    "corpus": "bad-corpus.jsonl",
    "manifest": "bad-manifest.txt",
    "run": "bad.trec",
}
BOM = b"\xef\xbb\xbf"
MB = 1 << 20
DEEP = 100_000
#: The column widths of app/models: query ids 200, document ids 300.
QID_MAX, DOC_MAX = 200, 300
INT32 = 2**31


@dataclass(frozen=True)
class Case:
    """One file, where it goes, and the answer every import path must give."""

    id: str
    target: Target
    content: bytes
    #: the line the message names; None where the problem has no line (an empty file)
    line: int | None = None
    #: words the message must contain (same on every path)
    problem: str = ""
    filename: str = ""
    #: an odd but valid file: imported, and these fields of the golden set / run (dotted
    #: paths into the API's JSON) must hold these values
    accept: dict[str, Any] | None = None
    #: extra form fields (order=rank, min_grade)
    form: dict[str, str] = field(default_factory=dict)
    #: also fed to ``misstriage evaluate`` (it reads judgments, queries, runs and, for
    #: clusters, a corpus; never a manifest, and it has no column widths)
    evaluate: bool = True

    @property
    def name(self) -> str:
        return self.filename or NAMES[self.target]

    @property
    def refused(self) -> bool:
        return self.accept is None


def gz(data: bytes | str) -> bytes:
    return gzip.compress(data.encode() if isinstance(data, str) else data, mtime=0)


def _b(text: str) -> bytes:
    return text.encode()


def _jsonl(*rows: Any) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _garbage(size: int = 4096) -> bytes:
    """Deterministic bytes that are neither text nor gzip: NULs, high bytes, stray newlines."""
    return bytes((i * 97 + 13) % 256 for i in range(size))


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def _cut(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _crlf(text: str) -> bytes:
    return text.replace("\n", "\r\n").encode()


BIG = "x" * MB  # a 1 MB value: never echoed back whole
GRADES = {"judgments": 4, "queries": 3, "relevant": 3}


def lookup(document: dict[str, Any], dotted: str) -> Any:
    """``lookup(d, "report.corpus.documents")`` = d["report"]["corpus"]["documents"]."""
    value: Any = document
    for key in dotted.split("."):
        value = value[key]
    return value
