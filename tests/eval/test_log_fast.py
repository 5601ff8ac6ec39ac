"""The compiled path of a log's cluster tally (app.eval.log_fast, app.eval.compiled) gives
the whole-file figures, or declines the file.

The reference is the whole-file path (``load_log_run`` then ``cluster_profile``, itself checked
against a plain-Python oracle in test_cluster_profile.py). Generated logs hold every edge the
pass decides something about: queries shorter than k, documents absent from the corpus or
without a cluster, repeated documents (in the corpus or not), ties written in and out of
trec_eval's order, scores in no order (a sort), long decimals (strtod), exponents, -0.0, CRLF,
blank lines, a byte-order mark; TREC, gzip, JSONL hits and Parquet; blocks a few queries long,
each cut in pieces, so that every query boundary falls somewhere.
"""

from __future__ import annotations

import gzip
import random
import threading
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.eval import cluster_stream, log_dictionary, log_fast, log_parquet
from app.eval.cluster_profile import ClusterCorpus, cluster_profile, profile_of_tally
from app.eval.cluster_stream import tally_log
from app.eval.compiled import columns as kernel_columns
from app.eval.compiled import lines as line_kernel
from app.eval.compiled import scan
from app.eval.conventions import Order
from app.eval.errors import InputError
from app.eval.log_fast import NotTaken, compiled_tally
from app.eval.parquet import MAX_PARQUET_ID_BYTES, RunColumns
from app.eval.sources import load_log_run
from app.eval.streaming import QueriesNotContiguous
from tests.support.cluster_logs import random_corpus
from tests.support.scores import SCORES

KS_CASES = [(1,), (3, 5, 10, 20), (2, 40)]
PARQUET_COLUMNS = RunColumns(qid="query", doc_id="doc", score="bm25", rank="position")
FORMATS = {"trec": "trec", "gzip": "trec", "jsonl": "jsonl-hits", "parquet": "parquet"}


def _log_rows(rng: random.Random, queries: int = 200) -> list[tuple[str, str, int, str]]:
    """(qid, doc_id, rank, score text) query by query: most written best first, some with
    ties out of trec_eval's order or scores in no order, documents repeated now and then."""
    rows = []
    for q in range(queries):
        n = rng.choice([1, 2, 4, 9, 15, 25, 45])
        docs = [f"d{rng.randint(0, 179):03}" for _ in range(n)]  # d150..: not in the corpus
        texts = [rng.choice(SCORES) for _ in docs]
        if rng.random() < 0.6:
            texts.sort(key=float, reverse=True)
        ranks = list(range(1, n + 1))
        if rng.random() < 0.2:
            ranks = [rng.randint(1, 5) for _ in docs]  # ties of rank, and in no order
        rows += [(f"q{q:04}", d, r, s) for d, r, s in zip(docs, ranks, texts, strict=True)]
    return rows


def _write_all(tmp_path: Path, rows: list[tuple[str, str, int, str]]) -> dict[str, Path]:
    trec = tmp_path / "log.trec"
    trec.write_text("".join(f"{q} Q0 {d} {r} {s} log\n" for q, d, r, s in rows))
    gz = tmp_path / "log.trec.gz"
    gz.write_bytes(gzip.compress(trec.read_bytes()))
    hits = tmp_path / "log.jsonl"
    hits.write_text(
        "".join(
            f'{{"qid": "{q}", "doc_id": "{d}", "score": {s}, "rank": {r}}}\n' for q, d, r, s in rows
        )
    )
    frame = pl.DataFrame(
        [(q, d, r, float(s)) for q, d, r, s in rows],
        schema=["query", "doc", "position", "bm25"],
        orient="row",
    )
    pq = tmp_path / "log.parquet"
    frame.write_parquet(pq, row_group_size=97)
    return {"trec": trec, "gzip": gz, "jsonl": hits, "parquet": pq}


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks a few queries long, each cut in pieces, taken apart 16 lines at a time
    (a query of 45 lines grows the scratch)."""
    monkeypatch.setattr(log_fast, "BLOCK_BYTES", 700)
    monkeypatch.setattr(log_fast, "_BATCH_LINES", 16)
    monkeypatch.setattr(log_fast, "PIECES_FROM", 200)
    monkeypatch.setattr(log_parquet, "PARQUET_ROWS", 23)


class _Reader:
    """Which path a test's Parquet logs take, and how often the dictionaries' was taken."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.taken = 0

    def took_its_path(self) -> bool:
        """Whether the path chosen read the logs (the polars path: never the other)."""
        return self.taken > 0 if self.name == "dictionary" else self.taken == 0


@pytest.fixture(params=["dictionary", "polars"])
def parquet_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> _Reader:
    """A Parquet test twice: its logs read with their dictionaries (``log_dictionary``, in
    batches of 23 rows: queries cut by batches' and row groups' ends, a row group's
    dictionary handed with each batch), and by polars' path (the logs taken as not
    dictionary-encoded)."""
    reader = _Reader(request.param)
    if request.param == "polars":

        def unsuited(*args: object) -> list[str]:
            raise log_dictionary.Unsuited("the test's choice")

        monkeypatch.setattr(log_fast, "readable_columns", unsuited)
    monkeypatch.setattr(log_dictionary, "BATCH_ROWS", 23)
    # the set of queries seen sized from the first row group (a log of millions of rows)
    monkeypatch.setattr(log_dictionary, "ESTIMATE_FROM_ROWS", 10)
    real = log_dictionary.tally_dictionary

    def counted(*args: object, **kwargs: object) -> None:
        reader.taken += 1
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(log_fast, "tally_dictionary", counted)
    return reader


def _compiled(path: Path, corpus: ClusterCorpus, ks: tuple[int, ...], order: Order, fmt: str):
    """The compiled tally's profile and lines."""
    columns = PARQUET_COLUMNS if fmt == "parquet" else None
    tally, lines = compiled_tally(path, corpus, ks, order=order, fmt=FORMATS[fmt], columns=columns)
    return profile_of_tally(tally), lines


def _answer(path: Path, corpus: ClusterCorpus, order: Order, *, compiled_from: int) -> object:
    """``tally_log``'s profile at k = 5, or the words of its InputError."""
    try:
        tallied = tally_log(path, corpus, (5,), order=order, compiled_from=compiled_from)
    except InputError as error:
        return str(error)
    return profile_of_tally(tallied.tally)


@pytest.mark.usefixtures("small_blocks")
@pytest.mark.parametrize("order", list(Order))
def test_the_compiled_tally_is_the_whole_files_in_every_format(
    tmp_path: Path, order: Order, parquet_reader: _Reader
) -> None:
    rng = random.Random(2029)
    clusters, tokens = random_corpus(rng)
    rows = _log_rows(rng)
    files = _write_all(tmp_path, rows)
    corpus = ClusterCorpus.of(clusters, tokens)
    for ks in KS_CASES:
        top = load_log_run(files["trec"], depth=max(ks), order=order)
        want = cluster_profile(top, clusters, ks=ks, tokens=tokens)
        assert want.queries == 200
        for fmt, path in files.items():
            got, lines = _compiled(path, corpus, ks, order, fmt)
            assert lines == len(rows), fmt
            assert got == want, (fmt, ks)
    assert parquet_reader.took_its_path()


@pytest.mark.usefixtures("small_blocks")
def test_line_ends_blank_lines_and_a_byte_order_mark(tmp_path: Path) -> None:
    rng = random.Random(5)
    clusters, tokens = random_corpus(rng)
    rows = _log_rows(rng, 60)
    corpus = ClusterCorpus.of(clusters, tokens)
    plain = _write_all(tmp_path, rows)["trec"]
    want = cluster_profile(load_log_run(plain, depth=10), clusters, ks=(5, 10), tokens=tokens)
    lines = plain.read_text().splitlines()
    variants = {
        "crlf": "\r\n".join(lines) + "\r\n",
        "blank": "\n\n".join(lines[:30]) + "\n\n\n" + "\n".join(lines[30:]),
        "no-last-newline": "\n".join(lines),
        "tabs": "\n".join(line.replace(" ", "\t") for line in lines) + "\n",
    }
    for name, text in variants.items():
        path = tmp_path / f"{name}.trec"
        path.write_bytes(text.encode())
        assert _compiled(path, corpus, (5, 10), Order.TREC_EVAL, "trec")[0] == want, name
        path.write_bytes(b"\xef\xbb\xbf" + text.encode())
        assert _compiled(path, corpus, (5, 10), Order.TREC_EVAL, "trec")[0] == want, name
        gz = tmp_path / f"{name}.trec.gz"
        gz.write_bytes(gzip.compress(b"\xef\xbb\xbf" + text.encode()))
        assert _compiled(gz, corpus, (5, 10), Order.TREC_EVAL, "trec")[0] == want, name


@pytest.mark.usefixtures("small_blocks")
def test_a_corpus_without_clusters_or_text(tmp_path: Path) -> None:
    files = _write_all(tmp_path, _log_rows(random.Random(3), 60))
    want = cluster_profile(load_log_run(files["trec"], depth=10), {}, ks=(5, 10))
    got, _ = _compiled(files["trec"], ClusterCorpus.of({}), (5, 10), Order.TREC_EVAL, "trec")
    assert got == want
    assert want.depths[0].prompt_tokens is None


DECLINED = {
    "a non-ASCII id": "q1 Q0 dé 1 1.0 x\n",
    "two spaces": "q1 Q0  d1 1 1.0 x\n",
    "a missing field": "q1 Q0 d1 1.0 x\n",
    "a field too many": "q1 Q0 d1 1 1.0 x y\n",
    "not a number": "q1 Q0 d1 1 nan x\n",
    "a hexadecimal score": "q1 Q0 d1 1 0x10 x\n",
    "an infinite score": "q1 Q0 d1 1 1e400 x\n",
    "a lone carriage return": "q1 Q0 d1 1 1.0 x\ry\n",
    "a NUL byte": "q1 Q0 d\x001 1 1.0 x\n",
    "a score that is not a number": "q1 Q0 d1 1 abc x\n",
}


@pytest.mark.parametrize("order", list(Order))
@pytest.mark.parametrize("line", list(DECLINED.values()), ids=list(DECLINED))
def test_a_line_it_does_not_take_declines_the_file(tmp_path: Path, line: str, order: Order) -> None:
    """The pass declines (NotTaken) what it is not sure to read as the careful reader, and
    ``tally_log`` then reads the file that way: the same figures, or its error."""
    usual = "".join(f"q{i // 3} Q0 d{i:03} {i % 3 + 1} {3 - i % 3} x\n" for i in range(30))
    path = tmp_path / "log.trec"
    path.write_text(usual + line + usual.replace("q", "p"))
    corpus = ClusterCorpus.of({"d001": "c1"}, {"d001": 1.0})
    with pytest.raises(NotTaken):
        compiled_tally(path, corpus, (5,), order=order, fmt="trec")
    assert _answer(path, corpus, order, compiled_from=0) == _answer(
        path, corpus, order, compiled_from=1 << 40
    )


JSON_LINES = [
    '{"qid": "q1", "doc_id": "d1", "score": -0.0}',
    '{"qid": 7, "doc_id": 12, "score": 3, "rank": 2}',
    '{"qid": -7, "doc_id": "d1", "score": 1E2, "rank": -0}',
    '{"qid": "q1", "doc_id": "d1", "score": 1, "rank": null}',
    '{"doc_id": "d1", "qid": "q1", "score": 1}',
    '{"qid": "q\\u0031", "doc_id": "d1", "score": 1}',
    '{"qid": "é", "doc_id": "ß", "score": 2.5}\r',
    "",
    '{"qid": "q 1", "doc_id": "d1", "score": 1}',
    '{"qid": "", "doc_id": "d1", "score": 1}',
    '{"qid": 5.0, "doc_id": "d1", "score": 1}',
    '{"qid": "q1", "doc_id": "d1", "score": "1"}',
    '{"qid": "q1", "doc_id": "d1", "score": 1e400}',
    '{"qid": "q1", "doc_id": "d1", "score": 01}',
    '{"qid": "q1", "doc_id": "d1", "score": 1.}',
    '{"qid": "q1", "doc_id": "d1", "score": 1, "rank": 1.5}',
    '{"qid": "q1", "doc_id": "d1", "score": 1, "rank": "1"}',
    '{"qid": "q1", "qid": "q2", "doc_id": "d1", "score": 1}',
    '{"qid": "q1", "doc_id": "d1", "score": 1, "tag": "x"}',
    '{"qid": 01, "doc_id": "d1", "score": 1}',
    '{"qid": "q1", "doc_id": "d1", "score": 0.30000000000000004}',
    '  {\t"qid" : "q1" ,"doc_id":"d1",  "score":2 }  ',
    "[1, 2]",
]
#: lines of the shape the pass reads (in trec_eval's order): it must not decline them
JSON_TAKEN = {JSON_LINES[0], JSON_LINES[3], JSON_LINES[20], JSON_LINES[21]}


@pytest.mark.parametrize("tricky", JSON_LINES)
@pytest.mark.parametrize("order", [Order.TREC_EVAL, Order.RANK])
def test_json_hits_read_as_the_careful_reader_reads_them(
    tmp_path: Path, tricky: str, order: Order
) -> None:
    usual = [
        f'{{"qid": "q{i // 4}", "doc_id": "d{i}", "score": {10 - i % 4}, "rank": {i % 4}}}'
        for i in range(40)
    ]
    path = tmp_path / "log.jsonl"
    # in the middle of query q5's lines
    path.write_text("\n".join([*usual[:21], tricky.replace('"q1"', '"q5"'), *usual[21:]]) + "\n")
    corpus = ClusterCorpus.of({"d1": "c1", "d2": "c1"}, {"d1": 1.0})
    try:
        top = load_log_run(path, depth=5, order=order)
        want: object = cluster_profile(top, {"d1": "c1", "d2": "c1"}, ks=(5,), tokens={"d1": 1.0})
    except InputError as error:
        want = str(error)
    try:
        got: object = _compiled(path, corpus, (5,), order, "jsonl")[0]
    except (NotTaken, QueriesNotContiguous):
        assert tricky not in JSON_TAKEN or order is not Order.TREC_EVAL
        return  # declined: tally_log reads it the careful way
    except InputError as error:
        got = str(error)
    assert got == want


def test_queries_not_together_are_not_streamed(tmp_path: Path) -> None:
    rows = _log_rows(random.Random(11), 50)
    files = _write_all(tmp_path, rows)
    lines = files["trec"].read_text().splitlines(keepends=True)
    mixed = tmp_path / "mixed.trec"
    mixed.write_text("".join(lines[1:] + lines[:1]))
    corpus = ClusterCorpus.of({})
    with pytest.raises(QueriesNotContiguous):
        compiled_tally(mixed, corpus, (5,), order=Order.TREC_EVAL, fmt="trec")
    got = tally_log(mixed, corpus, (5,), compiled_from=0)
    assert not got.streamed
    assert profile_of_tally(got.tally) == profile_of_tally(
        tally_log(files["trec"], corpus, (5,)).tally
    )


def test_an_empty_log_and_a_truncated_gzip(tmp_path: Path) -> None:
    empty = tmp_path / "empty.trec"
    empty.write_text("\n\n")
    with pytest.raises(NotTaken):
        compiled_tally(empty, ClusterCorpus.of({}), (5,), order=Order.TREC_EVAL, fmt="trec")
    with pytest.raises(InputError, match="the run is empty"):
        tally_log(empty, ClusterCorpus.of({}), (5,), compiled_from=0)
    whole = gzip.compress(b"q1 Q0 d1 1 1.0 x\n" * 5000)
    cut = tmp_path / "cut.trec.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(InputError, match=r"cut.trec.gz: truncated gzip file"):
        tally_log(cut, ClusterCorpus.of({}), (5,), compiled_from=0)


def test_a_large_log_takes_the_compiled_path(tmp_path: Path) -> None:
    """``tally_log`` reads a log past ``compiled_from`` by the compiled pass (and says it
    streamed), one it declines by polars: the same figures either way."""
    rng = random.Random(7)
    clusters, tokens = random_corpus(rng)
    files = _write_all(tmp_path, _log_rows(rng, 100))
    corpus = ClusterCorpus.of(clusters, tokens)
    slow = tally_log(files["trec"], corpus, (5, 10), compiled_from=1 << 40)

    def not_here(*args: object, **kwargs: object) -> None:
        raise AssertionError("the compiled path declined the log")

    with pytest.MonkeyPatch.context() as patch:  # the polars paths are not there to fall to
        patch.setattr(cluster_stream, "_streamed", not_here)
        patch.setattr(cluster_stream, "_whole", not_here)
        fast = tally_log(files["trec"], corpus, (5, 10), compiled_from=0)
    assert fast.streamed
    assert slow.streamed
    assert fast.tally == slow.tally
    assert fast.lines == slow.lines


#: decimals as a log writes them: any digits, a point, an exponent
_DECIMALS = st.builds(
    lambda sign, whole, frac, exp: f"{sign}{whole}{frac}{exp}",
    st.sampled_from(["", "-"]),
    st.integers(0, 10**20).map(str),
    st.one_of(st.just(""), st.integers(0, 10**22).map(lambda f: f".{f:0>3}")),
    st.one_of(st.just(""), st.integers(-330, 330).map(lambda e: f"e{e}")),
)


@settings(max_examples=400, deadline=None)
@given(text=_DECIMALS)
def test_a_decimal_is_read_as_python_reads_it(text: str) -> None:
    """The pass's number is Python's float (the nearest double), -0.0 made 0.0; or it
    declines a value that is not finite."""
    buf = np.frombuffer(bytearray((text + " ").encode()), np.uint8)
    taken, value = scan.number(buf, 0, len(text), False, True)
    want = float(Decimal(text)) + 0.0
    if not np.isfinite(want):
        assert not taken
    else:
        assert taken
        assert value == want
        assert str(value) == str(want)  # the same sign of zero too


def test_warm_compiles_every_format(monkeypatch: pytest.MonkeyPatch) -> None:
    """``warm`` (make install, the image) runs the compiled paths on their own small inputs:
    none of them declined (a path that fell back would leave its pass uncompiled)."""
    declined: list[str] = []
    original = log_fast.compiled_tally

    def watched(*args: object, **kwargs: object) -> object:
        try:
            return original(*args, **kwargs)  # type: ignore[arg-type]
        except NotTaken:
            declined.append(str(kwargs.get("fmt")))
            raise

    monkeypatch.setattr(cluster_stream, "compiled_tally", watched)
    cluster_stream.warm()
    assert declined == []


@pytest.mark.usefixtures("small_blocks")
@pytest.mark.parametrize("compressed", [False, True])
def test_a_query_past_the_bound_is_the_careful_readers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compressed: bool
) -> None:
    """A query longer than the pass holds (``MAX_QUERY_BYTES``) is not carried block after
    block: it declines, and ``tally_log`` answers as the careful paths do."""
    monkeypatch.setattr(log_fast, "MAX_QUERY_BYTES", 2_000)
    usual = "".join(f"q{i // 3} Q0 d{i:03} {i % 3 + 1} {3 - i % 3} x\n" for i in range(30))
    long = "".join(f"q99 Q0 d{i:03} {i + 1} {400 - i} x\n" for i in range(300))
    text = usual + long + usual.replace("q", "p")
    path = tmp_path / ("log.trec.gz" if compressed else "log.trec")
    path.write_bytes(gzip.compress(text.encode()) if compressed else text.encode())
    corpus = ClusterCorpus.of({"d001": "c1"})
    with pytest.raises(NotTaken):
        compiled_tally(path, corpus, (5,), order=Order.TREC_EVAL, fmt="trec")
    want = profile_of_tally(tally_log(path, corpus, (5,), compiled_from=1 << 40).tally)
    assert profile_of_tally(tally_log(path, corpus, (5,), compiled_from=0).tally) == want
    assert want.queries == 21


def test_long_queries_of_documents_outside_the_corpus(tmp_path: Path) -> None:
    """Queries of 65 to 300 lines, most of their documents outside the corpus, some repeated:
    the per-query set of such documents grows past its first size (a set that is not a power
    of two once sent the pass round forever)."""
    rng = random.Random(65)
    lines = []
    for q in range(12):
        n = rng.choice([65, 100, 129, 300])
        for r in range(n):
            doc = f"u{rng.randint(0, 2 * n)}" if r % 7 else f"d{rng.randint(0, 140):03}"
            lines.append(f"q{q:02} Q0 {doc} {r + 1} {1000 - r} x\n")
    path = tmp_path / "long.trec"
    path.write_text("".join(lines))
    clusters, tokens = random_corpus(rng)
    corpus = ClusterCorpus.of(clusters, tokens)
    result: list[object] = []
    worker = threading.Thread(
        target=lambda: result.append(_compiled(path, corpus, (10, 100), Order.TREC_EVAL, "trec")),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive(), "the compiled pass did not finish"
    top = load_log_run(path, depth=100)
    want = cluster_profile(top, clusters, ks=(10, 100), tokens=tokens)
    assert result == [(want, len(lines))]


@pytest.mark.parametrize(
    ("frame", "order"),
    [
        ({"qid": ["q1", "q1"], "doc_id": ["d1", "d2"], "score": [1.0, None]}, Order.TREC_EVAL),
        ({"qid": ["q1", "q1"], "doc_id": ["d1", "d2"]}, Order.TREC_EVAL),
        ({"qid": ["q1", "q1"], "doc_id": ["d1", "d2"], "rank": [1, None]}, Order.RANK),
        ({"qid": ["q1", "q2"], "doc_id": ["d1", "d2"], "score": [None, None]}, Order.FILE),
    ],
)
def test_a_parquet_log_without_what_its_order_needs(
    tmp_path: Path, frame: dict[str, list[object]], order: Order, parquet_reader: _Reader
) -> None:
    """A result without the score (or rank) its order needs: the compiled path declines and
    the careful path's answer (its error) is ``tally_log``'s."""
    path = tmp_path / "log.parquet"
    pl.DataFrame(frame).write_parquet(path)
    corpus = ClusterCorpus.of({"d1": "c1"}, {"d1": 1.0})
    assert _answer(path, corpus, order, compiled_from=0) == _answer(
        path, corpus, order, compiled_from=1 << 40
    )


@settings(max_examples=300, deadline=None)
@given(text=_DECIMALS)
def test_a_trec_lines_score_is_read_as_python_reads_it(text: str) -> None:
    """A TREC line's score as ``parse_lines`` reads it (the one-pass reader of the usual
    line, or the general reader for another) is Python's float of it, or the line is
    refused (the careful reader words it)."""
    line = f"q1 Q0 d1 1 {text} x\n".encode()
    buf = np.frombuffer(bytearray(line), np.uint8)
    lines = np.zeros((line_kernel.LINE_FIELDS, 4), np.int64)
    status, count, end = line_kernel.parse_lines(
        buf, 0, len(buf), line_kernel.TREC, 32, line_kernel.TREC_EVAL, True, True, lines, 0
    )
    if status == line_kernel.DONE:
        want = float(Decimal(text)) + 0.0
        score = lines[line_kernel.L_SCORE, :1].view(np.float64)[0]
        assert (count, end) == (1, len(buf))
        assert score == want
        assert str(score) == str(want)


_FIELD_BYTES = st.sampled_from([0, 9, 10, 13, 31, 32, 33, 48, 65, 95, 126])


@settings(max_examples=300, deadline=None)
@given(data=st.lists(_FIELD_BYTES, max_size=40), start=st.integers(0, 40), cut=st.integers(0, 8))
def test_a_fields_end_is_found_eight_bytes_at_a_time_as_one_at_a_time(
    data: list[int], start: int, cut: int
) -> None:
    """``scan.field_end`` reads words (and never past ``n``): it stops where the byte loop
    stops, at the first blank or control, whatever the field's length and place."""
    buf = np.array(data, np.uint8)
    n = max(0, len(buf) - cut)
    start = min(start, n)
    want = start
    while want < n and buf[want] > 32:
        want += 1
    assert scan.field_end(buf, start, n) == want


def test_a_block_past_ascii_is_found_as_the_bytes_say() -> None:
    """``ascii_only`` (a byte-wide maximum) refuses a DEL or a byte past ASCII anywhere."""
    clean = np.frombuffer(b"q1 Q0 d1 1 0.5 x\n" * 9, np.uint8).copy()
    assert line_kernel.ascii_only(clean, len(clean))
    for bad in (127, 128, 255):
        for where in (0, 17, len(clean) - 1):
            dirty = clean.copy()
            dirty[where] = bad
            assert not line_kernel.ascii_only(dirty, len(dirty))
            assert line_kernel.ascii_only(dirty, where)  # the bytes before it are clean


def _views(column: pl.Series) -> list[int]:
    """The number of buffers of each Arrow array polars hands ``column`` over in."""
    import nanoarrow

    return [chunk.n_buffers for chunk in nanoarrow.c_array_stream(column)]


_IDS = st.lists(
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=40),
    min_size=1,
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(first=_IDS, second=_IDS, cut=st.integers(0, 5))
def test_a_columns_ids_are_taken_from_polars_memory_as_they_are(
    first: list[str], second: list[str], cut: int
) -> None:
    """``log_parquet._copied``: the values of a column in two arrays (a batch joined to the
    query carried from the one before), one of them sliced, short values held in their views
    and long ones in data buffers: read in their views when every value is 12 bytes or
    fewer, else the bytes end to end and each value's end; and whether a byte is a blank, a
    control or DEL, or past ASCII (each byte of each value looked at)."""
    column = pl.concat([pl.Series(first).slice(min(cut, len(first) - 1)), pl.Series(second)])
    values = column.to_list()
    data, ends, found = log_parquet._copied(column)
    encoded = [v.encode() for v in values]
    assert (len(ends) == 0) == all(len(v) <= 12 for v in encoded)
    assert _read_back(data, ends, len(encoded)) == encoded
    if len(ends):
        assert ends.tolist() == np.cumsum([0, *map(len, encoded)]).tolist()
        assert data[: ends[-1]].tobytes() == b"".join(encoded)
    every = b"".join(encoded)
    blank = any(b <= 0x20 or b == 0x7F for b in every)
    assert bool(found & kernel_columns.BLANK_OR_CONTROL) == blank
    assert bool(found & kernel_columns.PAST_ASCII) == any(b >= 0x80 for b in every)


def _read_back(data: np.ndarray, ends: np.ndarray, rows: int) -> list[bytes]:
    """The values of a column as ``_copied`` gives them, read the plain way: row ``i``'s in
    its view (its length, then its bytes) when there are no ends, else between its ends."""
    if len(ends):
        return [data[ends[i] : ends[i + 1]].tobytes() for i in range(rows)]
    lengths = data.view(np.int32)[::4]
    return [data[16 * i + 4 : 16 * i + 4 + int(lengths[i])].tobytes() for i in range(rows)]


@pytest.mark.parametrize("order", list(Order))
def test_a_parquet_log_whose_batches_are_read_in_their_views_and_copied(
    tmp_path: Path, order: Order, parquet_reader: _Reader
) -> None:
    """Batches whose ids all lie in their views (12 bytes or fewer: read there) between
    batches with a longer id (copied), in either column, ids of 12 and of 13 bytes, ties
    decided by their bytes, queries running from one kind of batch into the other: the
    compiled path gives the whole file's figures."""
    rng = random.Random(29)
    short = ["d1", "d22", "d-12-bytes-x", "doc-00000009", "é-éé-é"]  # 2 to 12 bytes
    long = ["d-13-bytes-xy", "doc-with-a-long-name-000", "éééééé-é"]  # 13 bytes and more
    rows = []
    for q in range(120):
        qid = f"query-{q:06}" if q % 5 else f"q{q}-{'x' * 12}"  # 12 bytes, or past 13
        names = short + long if q % 7 == 3 else short
        for r in range(rng.choice([1, 4, 9, 30])):
            rows.append((qid, rng.choice(names), r % 4, rng.choice([1.0, 2.0])))
    path = tmp_path / "log.parquet"
    pl.DataFrame(rows, schema=["qid", "doc_id", "rank", "score"], orient="row").write_parquet(
        path, row_group_size=41
    )
    names = short + long
    clusters = {name: f"c{i % 3}" for i, name in enumerate(names) if i != 2}
    corpus = ClusterCorpus.of(clusters, {name: float(len(name)) for name in names[1:]})
    got, lines = _compiled_parquet(path, corpus, (1, 3, 10), order)
    want = profile_of_tally(
        tally_log(path, corpus, (1, 3, 10), order=order, compiled_from=1 << 40).tally
    )
    assert lines == len(rows)
    assert got == want
    assert parquet_reader.took_its_path()


def test_an_empty_or_blank_id_in_a_view_is_the_careful_readers() -> None:
    """An id read in its view is checked as a copied one is: empty, or with a blank or a
    control byte, the batch is declined (the careful reader words it)."""
    assert len(log_parquet._copied(pl.Series(["q1", "q-12-bytes-x"]))[1]) == 0
    for bad in ["", "q 1", "q\x01", "twelve-byte\x7f"]:
        with pytest.raises(log_parquet.Declined):
            log_parquet._ids(pl.Series(["q1", bad, "q2"]))


def test_ids_in_several_data_buffers() -> None:
    """One array whose long values lie in two data buffers (a rechunked join)."""
    long = [f"document-{i:05}-of-a-long-name" for i in range(300)]
    column = pl.concat([pl.Series(long[:150]), pl.Series(long[150:])], rechunk=True)
    assert _views(column) == [5]  # validity, views, two data buffers, their sizes
    data, ends, _ = log_parquet._copied(column)
    assert data[: ends[-1]].tobytes() == "".join(long).encode()
    # views that share their bytes (as a Parquet dictionary's values do): many more bytes
    # of values than of data
    shared = pl.Series(long[:2]).gather([0, 1] * 500)
    data, ends, _ = log_parquet._copied(shared)
    assert data[: ends[-1]].tobytes() == "".join(long[:2] * 500).encode()


@pytest.mark.parametrize(
    "frame",
    [
        {"qid": ["q1", "q1"], "doc_id": ["d1", ""], "score": [2.0, 1.0]},
        {"qid": ["q1", None], "doc_id": ["d1", "d2"], "score": [2.0, 1.0]},
        {"qid": ["q1", "q1"], "doc_id": ["d1", None], "score": [2.0, 1.0]},
        {"qid": ["q1", "q1"], "doc_id": ["d1", "d2"], "score": [2.0, float("nan")]},
        {"qid": ["q1", "q1"], "doc_id": ["d1", "d2"], "score": [float("inf"), 1.0]},
        {"qid": ["", "q1"], "doc_id": ["d1", "d2"], "score": [2.0, 1.0]},
    ],
)
def test_a_parquet_row_the_careful_reader_refuses(
    tmp_path: Path, frame: dict[str, list[object]], parquet_reader: _Reader
) -> None:
    """A row the careful reader refuses (an id missing or empty, a score not finite): the
    compiled path declines it, and ``tally_log``'s answer is the careful path's error."""
    path = tmp_path / "log.parquet"
    pl.DataFrame(frame).write_parquet(path)
    corpus = ClusterCorpus.of({"d1": "c1"}, {"d1": 1.0})
    order = Order.RANK if "rank" in frame else Order.TREC_EVAL
    with pytest.raises(NotTaken):
        compiled_tally(path, corpus, (5,), order=order, fmt="parquet")
    answer = _answer(path, corpus, order, compiled_from=0)
    assert isinstance(answer, str)
    assert "row" in answer
    assert answer == _answer(path, corpus, order, compiled_from=1 << 40)


@pytest.mark.parametrize("ranks", [[1, -(2**63)], [1, 2**31], [-(2**31), 1], [2**62, 5]])
def test_a_parquet_rank_beyond_32_bits_is_read_as_a_text_runs(
    tmp_path: Path, ranks: list[int], parquet_reader: _Reader
) -> None:
    """Ranks are 64-bit integers in every format: past 32 bits the compiled path declines
    (it holds 32) and the careful one gives the figures of the same log written as text."""
    frame = pl.DataFrame(
        {"qid": ["q1", "q1"], "doc_id": ["d1", "d2"], "rank": ranks, "score": [1.0, 1.0]}
    )
    path = tmp_path / "log.parquet"
    frame.write_parquet(path)
    text = tmp_path / "log.trec"
    text.write_text(
        "".join(f"q1 Q0 {d} {r} 1.0 t\n" for d, r in zip(["d1", "d2"], ranks, strict=True))
    )
    corpus = ClusterCorpus.of({"d1": "c1", "d2": "c2"}, {"d1": 1.0})
    with pytest.raises(NotTaken):
        compiled_tally(path, corpus, (5,), order=Order.RANK, fmt="parquet")
    want = _answer(text, corpus, Order.RANK, compiled_from=1 << 40)
    assert not isinstance(want, str)
    assert _answer(path, corpus, Order.RANK, compiled_from=0) == want
    assert _answer(path, corpus, Order.RANK, compiled_from=1 << 40) == want


@pytest.mark.parametrize("order", list(Order))
def test_a_parquet_log_of_long_and_unicode_ids(
    tmp_path: Path, order: Order, parquet_reader: _Reader
) -> None:
    """Ids longer than a view holds (in data buffers), ids past ASCII, ties among them (their
    bytes decide trec_eval's order), batches a few queries long cut in pieces, and one
    query longer than a piece: the compiled path gives the whole file's figures."""
    rng = random.Random(13)
    names = [f"doc-{i:03}-{'é' * (i % 4)}-of-the-corpus" for i in range(60)] + ["dé", "d1"]
    rows = []
    for q in range(80):
        n = 60 if q == 7 else rng.choice([1, 3, 12, 25])
        for r in range(n):
            rows.append(
                (
                    f"quéry-{q:03}" * (1 + q % 3),
                    rng.choice(names),
                    r % 5,
                    rng.choice([1.0, 2.0, 0.5]),
                )
            )
    path = tmp_path / "log.parquet"
    pl.DataFrame(rows, schema=["qid", "doc_id", "rank", "score"], orient="row").write_parquet(
        path, row_group_size=50
    )
    clusters = {name: f"c{i % 7}" for i, name in enumerate(names) if i % 3}
    corpus = ClusterCorpus.of(clusters, {name: float(len(name)) for name in names[::2]})
    got, lines = _compiled_parquet(path, corpus, (1, 5, 20), order)
    want = profile_of_tally(
        tally_log(path, corpus, (1, 5, 20), order=order, compiled_from=1 << 40).tally
    )
    assert lines == len(rows)
    assert got == want
    assert parquet_reader.took_its_path()


def _compiled_parquet(path: Path, corpus: ClusterCorpus, ks: tuple[int, ...], order: Order):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(log_parquet, "PARQUET_ROWS", 37)
        patch.setattr(log_parquet, "PIECES_FROM", 10)
        patch.setattr(log_fast, "_BATCH_LINES", 16)
        tally, lines = compiled_tally(path, corpus, ks, order=order, fmt="parquet")
    return profile_of_tally(tally), lines


def _last_query_start(text: bytes) -> int:
    """``lines.last_query_start``'s answer for TREC lines, the plain way."""
    whole = text[: text.rfind(b"\n") + 1]
    starts, at = [], 0
    for line in whole.splitlines(keepends=True):
        starts.append(at)
        at += len(line)
    qids = [line.split(b" ")[0] if line.strip() else None for line in whole.splitlines()]
    last = next((q for q in reversed(qids) if q is not None), None)
    cut = len(whole)
    for start, qid in zip(reversed(starts), reversed(qids), strict=True):
        if qid is not None and qid != last:
            return cut
        cut = start
    return 0


@settings(max_examples=300, deadline=None)
@given(
    queries=st.lists(
        st.tuples(st.sampled_from(["q1", "q2", "q10", "q1x"]), st.integers(1, 4)), max_size=8
    ),
    blank=st.sets(st.integers(0, 30)),
    crlf=st.booleans(),
    tail=st.sampled_from(["", "q9 Q0 d", "q1 Q0 d1 1 2", "\n"]),
)
def test_a_blocks_last_query_is_found_from_its_end(
    queries: list[tuple[str, int]], blank: set[int], crlf: bool, tail: str
) -> None:
    """Where a block's last query begins (what goes with the next block): after the last
    line of another query id, blank lines, CRLF and a line the block cut among them."""
    lines = []
    for qid, n in queries:
        lines += [f"{qid} Q0 d{r} {r + 1} {9 - r} x" for r in range(n)]
    for i in sorted(blank, reverse=True):
        if i <= len(lines):
            lines.insert(i, "")
    end = "\r\n" if crlf else "\n"
    text = "".join(line + end for line in lines).encode() + tail.encode()
    buf = np.frombuffer(text, np.uint8).copy()  # writable, as a block is (one compiled version)
    got = line_kernel.last_query_start(buf, len(buf), line_kernel.TREC, ord(" "))
    assert got == _last_query_start(text)


def test_a_parquet_query_longer_than_the_pass_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parquet_reader: _Reader
) -> None:
    """A query whose rows run over many batches is carried batch after batch only up to the
    bound the pass holds (past it, the careful path reads the log: the same figures)."""
    rows = [("q0", f"d{r:03}", 1000.0 - r) for r in range(120)] + [("q1", "d001", 1.0)]
    path = tmp_path / "log.parquet"
    pl.DataFrame(rows, schema=["qid", "doc_id", "score"], orient="row").write_parquet(path)
    clusters, tokens = random_corpus(random.Random(3))
    corpus = ClusterCorpus.of(clusters, tokens)
    monkeypatch.setattr(log_parquet, "PARQUET_ROWS", 23)
    monkeypatch.setattr(log_parquet, "MAX_QUERY_LINES", 50)
    monkeypatch.setattr(log_dictionary, "MAX_QUERY_LINES", 50)
    with pytest.raises(NotTaken):
        compiled_tally(path, corpus, (5,), order=Order.TREC_EVAL, fmt="parquet")
    want = profile_of_tally(tally_log(path, corpus, (5,), compiled_from=1 << 40).tally)
    assert profile_of_tally(tally_log(path, corpus, (5,), compiled_from=0).tally) == want


def test_a_gzip_parquet_log_is_read_by_the_careful_path(tmp_path: Path) -> None:
    """A Parquet file in gzip: the compiled path declines it (polars reads plain Parquet),
    and the careful path inflates it: the figures of the plain file."""
    rows = _log_rows(random.Random(8), queries=30)
    plain = tmp_path / "log.parquet"
    pl.DataFrame(
        [(q, d, float(s)) for q, d, _, s in rows], schema=["qid", "doc_id", "score"], orient="row"
    ).write_parquet(plain)
    packed = tmp_path / "log.parquet.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    clusters, tokens = random_corpus(random.Random(8))
    corpus = ClusterCorpus.of(clusters, tokens)
    with pytest.raises(NotTaken):
        compiled_tally(packed, corpus, (5,), order=Order.TREC_EVAL, fmt="parquet")
    want = profile_of_tally(tally_log(plain, corpus, (5,), compiled_from=1 << 40).tally)
    assert profile_of_tally(tally_log(packed, corpus, (5,), compiled_from=0).tally) == want


def test_rows_that_share_a_long_id_past_the_copy_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parquet_reader: _Reader
) -> None:
    """Many rows of one long id (a Parquet dictionary's value, held once by polars): past the
    bytes a batch copies, polars' path declines and the careful path gives the figures,
    rather than the copy growing with the rows times the id. The dictionaries' path reads
    the id once, in its dictionary: the figures, nothing copied a row."""
    long_id = "d" + "x" * 1000  # within the longest id (MAX_PARQUET_ID_BYTES)
    rows = [(f"q{i // 10}", long_id if i % 2 else "d001", float(10 - i % 10)) for i in range(400)]
    path = tmp_path / "log.parquet"
    pl.DataFrame(rows, schema=["qid", "doc_id", "score"], orient="row").write_parquet(path)
    corpus = ClusterCorpus.of({long_id: "c1", "d001": "c1"}, {long_id: 1.0})
    monkeypatch.setattr(log_parquet, "MAX_BATCH_ID_BYTES", 100_000)
    monkeypatch.setattr(log_dictionary, "MAX_BATCH_ID_BYTES", 100_000)
    want = profile_of_tally(tally_log(path, corpus, (5,), compiled_from=1 << 40).tally)
    if parquet_reader.name == "polars":
        with pytest.raises(NotTaken):
            compiled_tally(path, corpus, (5,), order=Order.TREC_EVAL, fmt="parquet")
    else:
        tally, lines = compiled_tally(path, corpus, (5,), order=Order.TREC_EVAL, fmt="parquet")
        assert (profile_of_tally(tally), lines) == (want, 400)
    assert profile_of_tally(tally_log(path, corpus, (5,), compiled_from=0).tally) == want
    monkeypatch.setattr(log_parquet, "MAX_BATCH_ID_BYTES", 256 << 20)
    tally, lines = compiled_tally(path, corpus, (5,), order=Order.TREC_EVAL, fmt="parquet")
    assert lines == 400
    assert profile_of_tally(tally) == want


BAD_IDS = {
    "nul": "d\x00x",
    "space": "d x",
    "tab": "d\tx",
    "control": "d\x01",
    "del": "d\x7f",
    "c1-control": "d\x9f",
    "next-line": "d\x85",
    "no-break-space": "d\xa0x",
    "line-separator": "d\u2028x",
    "ideographic-space": "\u3000d",
    "long-inline-blank": "abcdefghij k",  # the blank in a view's second word
    "long": "d" * (MAX_PARQUET_ID_BYTES + 1),
}


@pytest.mark.parametrize("field", ["qid", "doc_id"])
@pytest.mark.parametrize("bad", list(BAD_IDS.values()), ids=list(BAD_IDS))
def test_a_parquet_id_the_careful_reader_refuses_is_refused_on_every_path(
    tmp_path: Path, field: str, bad: str
) -> None:
    """An id with a blank or a control character (as a JSONL run's: a NUL byte too, which
    PostgreSQL refuses), or longer than MAX_PARQUET_ID_BYTES: the compiled path declines and
    the careful one names the row, whichever path is tried first."""
    rows = 5_000
    frame = pl.DataFrame(
        {
            "qid": [f"q{i // 10:05}" for i in range(rows)],
            "doc_id": [f"d{i % 37:03}" for i in range(rows)],
            "score": [float(10 - i % 10) for i in range(rows)],
        }
    )
    frame = frame.with_columns(
        pl.when(pl.int_range(pl.len()) == 4321)
        .then(pl.lit(bad))
        .otherwise(pl.col(field))
        .alias(field)
    )
    path = tmp_path / "log.parquet"
    frame.write_parquet(path)
    corpus = ClusterCorpus.of({"d001": "c1"})
    with pytest.raises(NotTaken):
        compiled_tally(path, corpus, (5,), order=Order.TREC_EVAL, fmt="parquet")
    said = "bytes" if len(bad) > MAX_PARQUET_ID_BYTES else "a blank or a control character"
    for compiled_from in (0, 1 << 40):
        with pytest.raises(InputError, match=rf"log.parquet, line 4322: the row holds .*{said}"):
            tally_log(path, corpus, (5,), compiled_from=compiled_from)
    with pytest.raises(InputError, match=r"line 4322"):
        load_log_run(path, depth=5)


def test_ids_past_ascii_without_blanks_stay_on_the_compiled_path(tmp_path: Path) -> None:
    ids = ["é", "日本語の文書", "d-ß-é-ü-long-enough-for-a-data-buffer", "d001"]
    rows = [(f"q{i // 4}", ids[i % 4], float(4 - i % 4)) for i in range(400)]
    path = tmp_path / "log.parquet"
    pl.DataFrame(rows, schema=["qid", "doc_id", "score"], orient="row").write_parquet(path)
    corpus = ClusterCorpus.of({ids[0]: "c1", ids[1]: "c1", ids[2]: "c2"})
    tally, lines = compiled_tally(path, corpus, (2, 4), order=Order.TREC_EVAL, fmt="parquet")
    assert lines == 400
    want = profile_of_tally(tally_log(path, corpus, (2, 4), compiled_from=1 << 40).tally)
    assert profile_of_tally(tally) == want


def test_a_dictionary_that_names_an_id_twice() -> None:
    """Parquet writers name each id once in a row group's dictionary, but a file may name
    one twice: both entries are one document (one mark, the first's), found in the corpus
    or not, and rows of two entries of one query id's bytes are one query."""
    import pyarrow as pa

    from app.eval.compiled import dictionary as kernel
    from app.eval.passes import log_pass

    clusters, tokens = {"d1": "c1", "d2": "c1"}, {"d1": 3.0}
    corpus = log_fast.kernel_corpus(ClusterCorpus.of(clusters, tokens))
    names = pa.array(["d1", "x9", "d1", "d2", "x9"])
    buffers = names.buffers()
    data = np.frombuffer(buffers[2], np.uint8)
    offsets = np.frombuffer(buffers[1], np.int32).astype(np.int64)
    hashes = np.empty(5, np.uint64)
    functions = log_pass()
    assert functions.entries(data, offsets, hashes)[0] == 0
    table = np.empty((5, kernel.ENTRY_WORDS), np.int64)
    row_first = np.full(corpus.documents, 3, np.int64)  # (any values: checked)
    assert functions.look_up_entries(data, offsets, hashes, corpus.arrays(), table, row_first) == 2
    assert table[:, kernel.E_FIRST].tolist() == [0, 1, 0, 3, 1]
    assert table[:, kernel.E_CODE].tolist() == [1, 0, 1, 1, 0]
    # one query (its id named twice in its dictionary) of d1, x9, d1 again, d2, x9 again
    queries = pa.array(["q1", "q1"])
    qbuffers = queries.buffers()
    qdata = np.frombuffer(qbuffers[2], np.uint8)
    qoffsets = np.frombuffer(qbuffers[1], np.int32).astype(np.int64)
    qhashes = np.empty(2, np.uint64)
    functions.entries(qdata, qoffsets, qhashes)
    qidx = np.array([0, 1, 0, 1, 1], np.int32)
    didx = np.array([0, 1, 2, 3, 4], np.int32)
    worker = log_fast._Worker(corpus, np.array([1, 2, 5], np.int64))
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    status, hashes_out = functions.tally_indices(
        qidx, qdata, qoffsets, qhashes, didx, data, offsets, table, scores,
        np.zeros(5, np.int64), 0, 5, 0, worker.ks, worker.accumulators,
    )  # fmt: skip
    assert status == 0
    assert len(hashes_out) == 1
    histograms, short, clustered, known, token_sums, counters = worker.accumulators[:6]
    # kept: d1, x9, d2 (the repeats dropped); clusters at 1: {c1}; at 2: {c1, x9}; at 5:
    # {c1, x9} (d2 is c1's), three results, short of 5
    assert counters[:4].tolist() == [1, 5, 2, 3]
    assert histograms[0, 1] == histograms[1, 2] == histograms[2, 2] == 1
    assert short.tolist() == [0, 0, 1]
    assert clustered[:3].tolist() == [1, 0, 1]
    assert known[:3].tolist() == [1, 0, 0]
    assert token_sums[:3].tolist() == [3.0, 0.0, 0.0]


def test_which_parquet_logs_are_read_by_their_dictionaries(tmp_path: Path) -> None:
    """Ids as text in dictionary pages throughout: read by their dictionaries. Ids written
    plainly, integer ids, a score of another type, no score, one column for both ids: polars'
    path reads them (and words what is wrong)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {"qid": ["q1", "q1", "q2"], "doc_id": ["d1", "d2", "d1"], "score": [2.0, 1.0, 1.0]}
    )
    cases = {
        "dictionary": (table, {}),
        "plain": (table, {"use_dictionary": False}),
        "integers": (table.set_column(0, "qid", pa.array([1, 1, 2])), {}),
        "float32": (table.set_column(2, "score", pa.array([2.0, 1.0, 1.0], pa.float32())), {}),
        "no score": (table.drop_columns(["score"]), {}),
    }
    for name, (frame, options) in cases.items():
        path = tmp_path / f"{name}.parquet"
        pq.write_table(frame, path, **options)
        if name == "dictionary":
            assert log_dictionary.readable_columns(path, RunColumns(), Order.TREC_EVAL) == [
                "qid",
                "doc_id",
                "score",
            ]
        else:
            with pytest.raises(log_dictionary.Unsuited):
                log_dictionary.readable_columns(path, RunColumns(), Order.TREC_EVAL)
    with pytest.raises(log_dictionary.Unsuited):
        log_dictionary.readable_columns(
            tmp_path / "dictionary.parquet", RunColumns(doc_id="qid"), Order.TREC_EVAL
        )


def test_a_parquet_log_with_a_page_that_cannot_be_read(tmp_path: Path) -> None:
    """A page's bytes spoilt (its footer whole): the dictionaries' path declines it, and
    ``tally_log`` answers as the careful path does (an error naming the file), never a
    crash."""
    rng = random.Random(8)
    clusters, tokens = random_corpus(rng)
    corpus = ClusterCorpus.of(clusters, tokens)
    rows = _log_rows(rng, 300)
    frame = pl.DataFrame(
        [(q, d, float(s)) for q, d, _, s in rows], schema=["qid", "doc_id", "score"], orient="row"
    )
    path = tmp_path / "log.parquet"
    frame.write_parquet(path, row_group_size=200, compression="uncompressed")
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    assert log_dictionary.readable_columns(path, RunColumns(), Order.TREC_EVAL)
    careful = _answer(path, corpus, Order.TREC_EVAL, compiled_from=1 << 40)
    assert _answer(path, corpus, Order.TREC_EVAL, compiled_from=0) == careful


def test_a_corrupt_pages_number_past_its_dictionary(tmp_path: Path) -> None:
    """A byte of a data page changed (the footer whole) so that a row's number lies past its
    dictionary's end, in a query a batch holds whole and in a batch's last query: pyarrow
    hands such numbers over as they are, and the passes read a row's entry unchecked; the
    dictionaries' path declines the file, and ``tally_log`` answers the careful path's error
    (found by fuzzing: figures, tracebacks and crashes before)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    corpus = ClusterCorpus.of({"d001": "c1", "d002": "c2", "d003": "c1"}, {"d001": 1.0})
    for row_byte in (4, 5):  # the byte holding rows 8 to 11 (inside q2), 12 to 15 (q3: last)
        path = tmp_path / f"log-{row_byte}.parquet"
        table = pa.table(
            {
                "qid": ["q1"] * 4 + ["q2"] * 8 + ["q3"] * 4,
                "doc_id": ["d001", "d002", "d003", "d001"] * 4,  # numbers 0 1 2 0: 2 bits each
                "score": [float(16 - i) for i in range(16)],
            }
        )
        pq.write_table(table, path, compression="none", use_dictionary=True)
        data = bytearray(path.read_bytes())
        column = pq.ParquetFile(path).metadata.row_group(0).column(1)
        # the bit-packed run of the numbers: width 2, two groups of eight, 0 1 2 0 ...
        at = bytes(data).find(b"\x02\x05\x24\x24\x24\x24", column.data_page_offset)
        assert at > 0
        data[at + row_byte] = 0xE4  # numbers 0 1 2 3: 3 is past the dictionary of three
        path.write_bytes(bytes(data))
        assert log_dictionary.readable_columns(path, RunColumns(), Order.TREC_EVAL)
        for order in (Order.TREC_EVAL, Order.FILE):
            with pytest.raises(NotTaken):
                compiled_tally(path, corpus, (1, 3), order=order, fmt="parquet")
            careful = _answer(path, corpus, order, compiled_from=1 << 40)
            assert isinstance(careful, str)
            assert "out-of-bounds" in careful
            assert _answer(path, corpus, order, compiled_from=0) == careful


def test_a_row_group_that_yields_fewer_rows_than_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A corrupt page may end pyarrow's reading of a row group without an error: the rows
    read are held to the metadata's count, and short of it the dictionaries' path declines
    the file (the careful path words the error) rather than tally the rest."""
    import pyarrow.parquet as pq

    rng = random.Random(8)
    clusters, tokens = random_corpus(rng)
    corpus = ClusterCorpus.of(clusters, tokens)
    path = tmp_path / "log.parquet"
    rows = _log_rows(rng, 60)
    frame = pl.DataFrame(
        [(q, d, float(s)) for q, d, _, s in rows], schema=["qid", "doc_id", "score"], orient="row"
    )
    frame.write_parquet(path, row_group_size=100)
    real = pq.ParquetFile.iter_batches

    def short(self: object, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        batches = list(real(self, *args, **kwargs))  # type: ignore[arg-type]
        return iter(batches[:-1] if kwargs.get("row_groups") == [1] else batches)

    monkeypatch.setattr(log_dictionary, "BATCH_ROWS", 23)
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", short)
    with pytest.raises(NotTaken):
        compiled_tally(path, corpus, (5,), order=Order.TREC_EVAL, fmt="parquet")


def test_a_dictionary_that_goes_on_the_last_batchs(tmp_path: Path) -> None:
    """A row group whose dictionary page filled, read on in plain pages: pyarrow hands each
    batch every id so far, and the query ids' dictionary is checked and hashed from where
    the last batch's ended; the figures are the whole file's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(21)
    clusters, tokens = random_corpus(rng)
    corpus = ClusterCorpus.of(clusters, tokens)
    rows = _log_rows(rng, 400)
    table = pa.table(
        {
            "qid": [q + "-" + "p" * 40 for q, _, _, _ in rows],
            "doc_id": [d for _, d, _, _ in rows],
            "score": [float(s) for _, _, _, s in rows],
            "rank": pa.array([r for _, _, r, _ in rows], pa.int64()),
        }
    )
    path = tmp_path / "log.parquet"
    pq.write_table(table, path, row_group_size=len(rows), dictionary_pagesize_limit=2000)
    reader = pq.ParquetFile(path, read_dictionary=["qid", "doc_id"])
    batches = list(reader.iter_batches(batch_size=500))
    sizes = [len(b.column(0).dictionary) for b in batches]
    assert sizes == sorted(sizes)  # each batch's dictionary goes on the last's
    assert sizes[0] < sizes[-1]
    functions = log_dictionary.log_pass()
    hashed: list[int] = []

    def entries(data: np.ndarray, offsets: np.ndarray, hashes: np.ndarray) -> tuple[int, int]:
        hashed.append(len(hashes))
        return functions.entries(data, offsets, hashes)  # type: ignore[no-any-return]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(log_dictionary, "BATCH_ROWS", 500)
        patch.setattr(
            log_dictionary,
            "log_pass",
            lambda: SimpleNamespace(**{**vars_of(functions), "entries": entries}),
        )
        for order in list(Order):
            tally, lines = compiled_tally(path, corpus, (1, 5), order=order, fmt="parquet")
            want = tally_log(path, corpus, (1, 5), order=order, compiled_from=1 << 40).tally
            assert lines == len(rows)
            assert profile_of_tally(tally) == profile_of_tally(want)
    # each order: the query ids hashed once each, not each batch's dictionary in full
    # (the documents' as they come)
    assert sum(hashed) // len(Order) < sum(sizes)
    assert sum(hashed) // len(Order) >= sizes[-1]


def vars_of(functions: object) -> dict[str, object]:
    """The pass's functions by name (a module built ahead of time, or numba's namespace)."""
    from app.eval.passes import LOG_EXPORTS

    return {name: getattr(functions, name) for name in LOG_EXPORTS}
