"""The hostile-upload catalogue: cases written from the classes of issue 13 (decompression,
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

CASES: list[Case] = [
    # --- gzip: broken, nested, several members ---
    Case("qrels-gzip-truncated", "qrels", _cut(gz(QRELS * 300)), None, "truncated gzip"),
    Case("run-gzip-truncated", "run", _cut(gz(RUN * 500)), None, "gzip"),
    Case("corpus-gzip-truncated", "corpus", _cut(gz(CORPUS * 100)), None, "gzip"),
    Case("manifest-gzip-header-only", "manifest", gz(MANIFEST)[:10], None, "gzip"),
    Case("qrels-gzip-of-gzip", "qrels", gz(gz(QRELS)), None, "gzip inside gzip"),
    Case("run-gzip-of-gzip", "run", gz(gz(RUN)), None, "gzip inside gzip"),
    Case("queries-gzip-of-gzip", "queries", gz(gz(QUERIES)), None, "gzip inside gzip"),
    Case("manifest-gzip-of-gzip", "manifest", gz(gz(MANIFEST)), None, "gzip inside gzip"),
    Case("run-gzip-trailing-garbage", "run", gz(RUN) + b"garbage!", None, "gzip"),
    Case(
        "qrels-gzip-two-members",
        "qrels",
        gz("q1 0 a 2\nq1 0 b 1\n") + gz("q2 0 c 1\nq3 0 z 0\n"),
        accept=GRADES,
    ),
    Case(
        "run-gzip-two-members",
        "run",
        gz("q1 Q0 a 1 9 t\n") + gz("q1 Q0 x 2 8 t\nq2 Q0 c 1 5 t\n"),
        accept={"lines": 3, "queries": 2},
    ),
    # --- JSON nested 100,000 deep (and just over the bound), never a RecursionError ---
    Case(
        "run-jsonl-lists-nested-deep",
        "run",
        _b('{"qid": "q1", "docs": ' + _nested(DEEP) + "}\n"),
        1,
        "nested deeper than",
        filename="bad.jsonl",
    ),
    Case(
        "run-jsonl-hits-nested-deep",
        "run",
        _b('{"qid": "q1", "doc_id": "a", "score": 1}\n{"qid": ' + _nested(DEEP) + "}\n"),
        2,
        "nested deeper than",
        filename="bad.jsonl",
    ),
    Case(
        "queries-jsonl-nested-deep",
        "queries",
        _b('{"_id": "q1", "text": "ok"}\n{"_id": "q2", "text": ' + _nested(DEEP) + "}\n"),
        2,
        "nested deeper than",
        filename="q.jsonl",
    ),
    Case(
        "corpus-nested-deep-objects",
        "corpus",
        _b('{"_id": "a"}\n{"_id": "b", "meta": ' + '{"k": ' * DEEP + "1" + "}" * DEEP + "}\n"),
        2,
        "nested deeper than",
    ),
    Case(
        "corpus-nested-65-levels",
        "corpus",
        _b('{"_id": "a", "meta": ' + _nested(64) + "}\n"),
        1,
        "nested deeper than 64",
    ),
    Case(
        "corpus-brackets-inside-a-string-are-text",
        "corpus",
        _jsonl(*({"_id": d, "text": "[{" * 50_000} for d in "abcz")),
        accept={"documents": 4},
    ),
    # --- integers beyond their columns ---
    Case("qrels-grade-2-31", "qrels", _b(f"q1 0 a 1\nq1 0 b {INT32}\n"), 2, "out of range"),
    Case("qrels-grade-minus-2-31-1", "qrels", _b(f"q1 0 a 1\nq1 0 b {-INT32 - 1}\n"), 2, "range"),
    Case("qrels-grade-100-digits", "qrels", _b("q1 0 a 1\nq1 0 b " + "9" * 100 + "\n"), 2, "grade"),
    Case(
        "beir-qrels-grade-2-40",
        "qrels",
        _b(f"query-id\tcorpus-id\tscore\nq1\ta\t1\nq1\tb\t{2**40}\n"),
        3,
        "out of range",
        filename="bad.tsv",
    ),
    Case(
        "corpus-chunk-index-2-31",
        "corpus",
        _jsonl({"_id": "a"}, {"_id": "b", "chunk_index": INT32}),
        2,
        "out of range",
    ),
    Case(
        "corpus-chunk-index-negative",
        "corpus",
        _jsonl({"_id": "a", "chunk_index": -1}),
        1,
        "out of range",
    ),
    Case(
        "corpus-chunk-index-5000-digits",
        "corpus",
        _b('{"_id": "a", "chunk_index": ' + "7" * 5000 + "}\n"),
        1,
        "not valid JSON",
    ),
    Case(
        "run-jsonl-rank-2-70",
        "run",
        _jsonl({"qid": "q1", "doc_id": "a", "score": 1, "rank": 2**70}),
        1,
        "out of range",
        filename="bad.jsonl",
        form={"order": "rank"},
    ),
    Case(
        "run-jsonl-score-10-400",
        "run",
        _b('{"qid": "q1", "doc_id": "a", "score": 1' + "0" * 400 + "}\n"),
        1,
        "not a finite number",
        filename="bad.jsonl",
    ),
    Case(
        "run-trec-score-400-digits",
        "run",
        _b("q1 Q0 a 1 9 t\nq1 Q0 b 2 " + "9" * 400 + " t\n"),
        2,
        "not a finite number",
    ),
    Case(
        "run-trec-rank-2-70",
        "run",
        _b(f"q1 Q0 a 1 9 t\nq1 Q0 b {2**70} 8 t\n"),
        2,
        "not an integer",
        form={"order": "rank"},
    ),
    Case(
        "run-jsonl-score-5000-digits",
        "run",
        _b('{"qid": "q1", "doc_id": "a", "score": ' + "1" * 5000 + "}\n"),
        1,
        "not valid JSON",
        filename="bad.jsonl",
    ),
    # --- ids beyond their columns, in every file kind (the database's limit: evaluate has none)
    Case(
        "qrels-qid-201",
        "qrels",
        _b("q1 0 a 1\n" + "q" * 201 + " 0 b 1\n"),
        2,
        "at most 200",
        evaluate=False,
    ),
    Case(
        "qrels-docno-301",
        "qrels",
        _b("q1 0 a 1\nq1 0 " + "d" * 301 + " 1\n"),
        2,
        "at most 300",
        evaluate=False,
    ),
    Case(
        "beir-qrels-docno-301",
        "qrels",
        _b("query-id\tcorpus-id\tscore\nq1\t" + "d" * 301 + "\t1\n"),
        2,
        "at most 300",
        filename="bad.tsv",
        evaluate=False,
    ),
    Case(
        "queries-tsv-qid-201",
        "queries",
        _b("q1\tok\n" + "q" * 201 + "\tlong\n"),
        2,
        "at most 200",
        evaluate=False,
    ),
    Case(
        "queries-jsonl-id-201",
        "queries",
        _jsonl({"_id": "q1", "text": "ok"}, {"_id": "q" * 201, "text": "long"}),
        2,
        "at most 200",
        filename="q.jsonl",
        evaluate=False,
    ),
    Case(
        "corpus-id-301",
        "corpus",
        _jsonl({"_id": "a"}, {"_id": "d" * 301}),
        2,
        "at most 300",
        evaluate=False,
    ),
    Case(
        "corpus-parent-id-301",
        "corpus",
        _jsonl({"_id": "a", "parent_id": "p" * 301}),
        1,
        "at most 300",
        evaluate=False,
    ),
    Case(
        "corpus-cluster-id-301",
        "corpus",
        _jsonl({"_id": "a"}, {"_id": "b", "cluster_id": "c" * 301}),
        2,
        "at most 300",
        evaluate=False,
    ),
    Case("manifest-id-301", "manifest", _b("a\n" + "d" * 301 + "\n"), 2, "at most 300"),
    Case(
        "run-trec-qid-201",
        "run",
        _b(RUN + "q" * 201 + " Q0 a 1 9 t\n"),
        4,
        "at most 200",
        evaluate=False,
    ),
    Case(
        "run-trec-docno-301",
        "run",
        _b(RUN + "q1 Q0 " + "d" * 301 + " 3 7 t\n"),
        4,
        "at most 300",
        evaluate=False,
    ),
    Case(
        "run-jsonl-lists-doc-301",
        "run",
        _jsonl({"qid": "q1", "docs": ["a", "d" * 301]}),
        1,
        "at most 300",
        filename="bad.jsonl",
        evaluate=False,
    ),
    Case(
        "run-jsonl-hits-qid-4000-digit-integer",
        "run",
        _b('{"qid": "q1", "doc_id": "a", "score": 1}\n{"qid": ' + "4" * 4000)
        + _b(', "doc_id": "a", "score": 1}\n'),
        2,
        "at most 200",
        filename="bad.jsonl",
        evaluate=False,
    ),
    # --- a 1 MB value is never echoed back (message under 1 KB) ---
    Case(
        "run-score-1mb-token", "run", _b(f"q1 Q0 a 1 9 t\nq1 Q0 b 2 {BIG} t\n"), 2, "not a number"
    ),
    Case("qrels-grade-1mb-token", "qrels", _b(f"q1 0 a 1\nq1 0 b {BIG}\n"), 2, "not an integer"),
    Case(
        "queries-jsonl-1mb-id-with-a-space",
        "queries",
        _jsonl({"_id": "q1", "text": "ok"}, {"_id": BIG[:150] + " " + BIG[:150], "text": "x"}),
        2,
        "",
        filename="q.jsonl",
    ),
    Case(
        "queries-conflicting-texts-1mb-id",
        "queries",
        _b(f"{BIG[:199]}\tone\n{BIG[:199]}\ttwo\n"),
        2,
        "appears twice with different texts",
    ),
    Case(
        "qrels-conflicting-grades-long-ids",
        "qrels",
        _b(f"{BIG[:199]} 0 {BIG[:299]} 1\n{BIG[:199]} 0 {BIG[:299]} 2\n"),
        2,
        "judged again",
    ),
    Case(
        "manifest-1mb-id-with-control-byte",
        "manifest",
        _b("a\n" + BIG + "\x01\n"),
        2,
        "",
    ),
    Case(
        "run-jsonl-doc-1mb-with-a-control-byte",
        "run",
        _jsonl({"qid": "q1", "docs": ["a", BIG + "\x07"]}),
        1,
        "control",
        filename="bad.jsonl",
    ),
    # --- a byte-order mark is stripped, in every file kind, plain and gzipped ---
    Case("qrels-bom", "qrels", BOM + _b(QRELS), accept=GRADES),
    Case("qrels-bom-gzipped", "qrels", gz(BOM + _b(QRELS)), accept=GRADES),
    Case(
        "beir-qrels-bom-with-header",
        "qrels",
        BOM + _b("query-id\tcorpus-id\tscore\nq1\ta\t2\nq1\tb\t1\nq2\tc\t1\nq3\tz\t0\n"),
        filename="good.tsv",
        accept=GRADES,
    ),
    Case(
        "queries-tsv-bom",
        "queries",
        BOM + _b(QUERIES),
        accept={"report.judgments.queries_without_text": 0},
    ),
    Case(
        "queries-jsonl-bom-gzipped",
        "queries",
        gz(BOM + _jsonl(*({"_id": q, "text": q} for q in ("q1", "q2", "q3")))),
        filename="q.jsonl.gz",
        accept={"report.judgments.queries_without_text": 0},
    ),
    Case(
        "corpus-bom-gzipped",
        "corpus",
        gz(BOM + _b(CORPUS)),
        accept={"documents": 4, "report.corpus.relevant_documents_not_in_corpus": 0},
    ),
    Case(
        "manifest-bom",
        "manifest",
        BOM + _b(MANIFEST),
        accept={"report.manifest.indexed": 3, "report.manifest.unknown_to_corpus": 0},
    ),
    Case("run-trec-bom", "run", BOM + _b(RUN), accept={"report.unknown_queries": 0, "lines": 3}),
    Case(
        "run-jsonl-bom-gzipped",
        "run",
        gz(BOM + _jsonl({"qid": "q1", "docs": ["a", "x"]}, {"qid": "q2", "docs": ["c"]})),
        filename="good.jsonl.gz",
        accept={"format": "jsonl-lists", "report.unknown_queries": 0, "lines": 3},
    ),
    # --- a BOM alone, and empty or blank files: refused like any empty file ---
    Case("qrels-only-a-bom", "qrels", BOM, None, "empty"),
    Case("run-only-a-bom", "run", BOM, None, "the run is empty"),
    Case("queries-only-a-bom", "queries", BOM, None, "no query"),
    Case("corpus-only-a-bom", "corpus", BOM, None, "the corpus is empty"),
    Case("manifest-only-a-bom", "manifest", BOM, None, "the manifest is empty"),
    Case("corpus-empty", "corpus", b"", None, "the corpus is empty"),
    Case("corpus-gzipped-empty", "corpus", gz(b""), None, "the corpus is empty"),
    Case("corpus-blank-lines", "corpus", b"\n \n\t\r\n", None, "the corpus is empty"),
    Case("manifest-empty", "manifest", b"", None, "the manifest is empty"),
    Case("manifest-comments-only", "manifest", b"# ids\n\n# none\n", None, "manifest is empty"),
    Case("queries-whitespace-only", "queries", b"  \n\t\n", None, "no query"),
    Case("run-whitespace-only", "run", b"\n \r\n\t\n", None, "the run is empty"),
    Case("qrels-crlf-blank-only", "qrels", b"\r\n\r\n", None, "empty"),
    # --- the older classes ---
    Case("qrels-ragged", "qrels", b"q1 0 a 1\nq1 0 b 1 extra\n", 2, "expected 4 columns"),
    Case("run-ragged", "run", b"q1 Q0 a 1 9 t\nq1 Q0 b 2 8 t x\n", 2, "expected 6 columns"),
    Case("qrels-two-columns", "qrels", b"q1 a\nq1 b\n", 1, "expected 4 columns"),
    Case("qrels-non-utf8", "qrels", b"q1 0 a 1\nq1 0 caf\xe9 1\n", 2, "not valid UTF-8"),
    Case(
        "run-jsonl-non-utf8",
        "run",
        b'{"qid": "q1", "docs": ["a"]}\n{"qid": "q2", "docs": ["caf\xe9"]}\n',
        2,
        "not valid UTF-8",
        filename="bad.jsonl",
    ),
    Case("manifest-non-utf8", "manifest", b"a\ncaf\xe9\n", 2, "not valid UTF-8"),
    Case("queries-tsv-nul", "queries", b"q1\tok\nq2\tn\x00l\n", 2, "NUL"),
    Case("manifest-nul", "manifest", b"a\nb\x00c\n", 2, "control"),
    Case("run-nul", "run", b"q1 Q0 a 1 9 t\nq1 Q0 a\x00b 2 8 t\n", 2, "NUL"),
    Case("corpus-binary-garbage", "corpus", _garbage(), 1, ""),
    Case("manifest-binary-garbage", "manifest", _garbage(), 1, ""),
    Case("queries-binary-garbage", "queries", _garbage(), 1, ""),
    Case("run-2mb-line", "run", _b("q1 Q0 a 1 9 t\n" + "r" * (2 * MB)), 2, "expected 6 columns"),
    Case("run-score-nan", "run", b"q1 Q0 a 1 9 t\nq1 Q0 b 2 NaN t\n", 2, "not a finite number"),
    Case("run-score-minus-inf", "run", b"q1 Q0 a 1 -inf t\n", 1, "not a finite number"),
    Case(
        "run-jsonl-score-infinity",
        "run",
        b'{"qid": "q1", "doc_id": "a", "score": Infinity}\n',
        1,
        "not a finite number",
        filename="bad.jsonl",
    ),
    Case(
        "run-negative-ranks-order-rank",
        "run",
        b"q1 Q0 x -2 1 t\nq1 Q0 a -1 9 t\nq2 Q0 c 0 5 t\n",
        form={"order": "rank"},
        accept={"lines": 3, "order": "rank"},
    ),
    Case(
        "corpus-duplicate-id",
        "corpus",
        _jsonl({"_id": "a"}, {"_id": "b"}, {"_id": "a"}),
        3,
        "appears twice",
    ),
    Case("manifest-duplicate-id", "manifest", b"a\nb\na\n", 3, "listed twice (first on line 1)"),
    Case("queries-duplicate-id", "queries", b"q1\tone\nq1\ttwo\n", 2, "appears twice"),
    Case("run-trec-then-json", "run", _b(RUN) + b'{"qid": "q1"}\n', 4, "expected 6 columns"),
    Case(
        "run-json-then-trec",
        "run",
        b'{"qid": "q1", "docs": ["a"]}\nq1 Q0 a 1 9 t\n',
        2,
        "not valid JSON",
        filename="bad.jsonl",
    ),
    Case(
        "queries-jsonl-list-line",
        "queries",
        b'{"_id": "q1", "text": "ok"}\n["q2", "x"]\n',
        2,
        "expected a JSON object",
        filename="q.jsonl",
    ),
    Case(
        "corpus-text-lone-surrogate",
        "corpus",
        b'{"_id": "a", "text": "ok"}\n{"_id": "b", "text": "x\\ud800y"}\n',
        2,
        "lone surrogate",
    ),
    Case(
        "run-jsonl-doc-lone-surrogate",
        "run",
        b'{"qid": "q1", "docs": ["a", "b\\udfffc"]}\n',
        1,
        "lone surrogate",
        filename="bad.jsonl",
    ),
    Case(
        "queries-jsonl-text-lone-surrogate",
        "queries",
        b'{"_id": "q1", "text": "\\ud83d alone"}\n',
        1,
        "lone surrogate",
        filename="q.jsonl",
    ),
    Case(
        "corpus-surrogate-pair-is-text",
        "corpus",
        _jsonl(*({"_id": d, "text": "\U0001f600"} for d in "abcz")),
        accept={"documents": 4},
    ),
    Case("qrels-crlf", "qrels", _crlf(QRELS), accept=GRADES),
    Case("run-crlf", "run", _crlf(RUN), accept={"lines": 3, "report.unknown_queries": 0}),
    Case("manifest-crlf", "manifest", _crlf(MANIFEST), accept={"report.manifest.not_indexed": 1}),
    Case(
        "queries-tsv-crlf",
        "queries",
        _crlf(QUERIES),
        accept={"report.judgments.queries_without_text": 0},
    ),
]


def lookup(document: dict[str, Any], dotted: str) -> Any:
    """``lookup(d, "report.corpus.documents")`` = d["report"]["corpus"]["documents"]."""
    value: Any = document
    for key in dotted.split("."):
        value = value[key]
    return value
