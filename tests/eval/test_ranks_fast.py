"""The compiled path of a TREC run's ranking (app.eval.ranks_fast, app.eval.compiled.ranks,
built ahead of time: app.eval.aot) gives the careful path's ranking, or declines the file.

The reference is the careful path (``read_trec_run`` then ``rank_run``, itself checked against
pytrec_eval and ranx elsewhere). Generated runs hold every edge the pass decides something
about: ties of score written in and out of trec_eval's order (docno descending, "9" before
"10"), scores in no order, repeated documents (judged or not, in golden queries or not),
queries the golden set does not know, golden queries the run does not answer, queries with a
text and no judgment, judgments of grade 0 and below, queries with many judged documents
(looked up in a table, ranked from a sort), long decimals, exponents, -0.0, CRLF, blank lines,
tabs; blocks a few queries long and a scratch of 16 lines, so that every boundary falls
somewhere; each order.
"""

from __future__ import annotations

import gzip
import os
import random
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from app.eval import ranks_fast, sources
from app.eval.aot import load_passes
from app.eval.conventions import Order
from app.eval.errors import InputError
from app.eval.golden import Judgments, golden_from_frame
from app.eval.ranking import RankedRun, rank_run
from app.eval.sources import load_run
from app.eval.trec import read_trec_run
from tests.support.scores import SCORES

ORDERS = [Order.TREC_EVAL, Order.RANK, Order.FILE]


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    """The module built ahead of time (``make install`` builds it): in CI its absence fails."""
    load_passes.cache_clear()
    if load_passes() is None:
        message = "the compiled ranking is not built: make install (app.eval.aot)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def _small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks a few queries long, taken apart 16 lines at a time (a query of 45 lines grows
    the scratch; one of a few hundred bytes grows the block); any file read in two halves,
    a query's beginning looked for in 200 bytes (not always found: one pass then)."""
    monkeypatch.setattr(ranks_fast, "BLOCK_BYTES", 300)
    monkeypatch.setattr(ranks_fast, "_BATCH_LINES", 16)
    monkeypatch.setattr(ranks_fast, "SPLIT_FROM", 0)
    monkeypatch.setattr(ranks_fast, "_CUT_WINDOW", 200)


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    _small(monkeypatch)


def _golden(rng: random.Random, queries: int) -> Judgments:
    """Judgments of most of the queries (some with many judged documents, grades from -1 to
    3), and texts of some queries without a judgment."""
    rows = []
    for q in range(queries):
        if rng.random() < 0.15:
            continue  # a query the golden set does not know
        many = rng.random() < 0.2
        docs = rng.sample(range(60), rng.randint(30, 50) if many else rng.randint(1, 5))
        rows += [(f"q{q:03}", f"d{d}", rng.choice([-1, 0, 1, 1, 2, 3])) for d in docs]
    rows.append(("q999", "d1", 2))  # a golden query no run answers
    frame = pl.DataFrame(rows, schema=["qid", "doc_id", "grade"], orient="row")
    texts = {"q998": "a query with a text and no judgment", "q001": "text"}
    return golden_from_frame(frame, queries=texts)


def _lines(rng: random.Random, queries: int) -> list[str]:
    """A run query by query: most written best first, some with ties out of trec_eval's
    order or scores in no order, documents repeated now and then."""
    out = []
    qids = [f"q{q:03}" for q in range(queries)] + ["q998"]
    for qid in qids:
        n = rng.choice([1, 2, 4, 9, 15, 25, 45, 70])
        docs = [f"d{rng.randint(0, 70)}" for _ in range(n)]  # repeats now and then
        texts = [rng.choice(SCORES) for _ in docs]
        if rng.random() < 0.6:
            texts.sort(key=float, reverse=True)
        ranks = list(range(1, n + 1))
        if rng.random() < 0.2:
            ranks = [rng.randint(1, 5) for _ in docs]
        out += [f"{qid} Q0 {d} {r} {s} run" for d, r, s in zip(docs, ranks, texts, strict=True)]
    return out


def _careful(path: Path, golden: Judgments, order: Order) -> RankedRun:
    frame = read_trec_run(path, with_rank=order is Order.RANK)
    return rank_run(frame, golden, order=order, name="run", source=str(path), fmt="trec")


def _assert_same(fast: RankedRun | None, careful: RankedRun) -> None:
    assert fast is not None, "the compiled path declined a run it reads"
    assert_frame_equal(fast.judged, careful.judged)
    assert fast.retrieved == careful.retrieved
    assert fast.report == careful.report
    assert fast.order == careful.order


def _fast(path: Path, golden: Judgments, order: Order) -> RankedRun | None:
    return ranks_fast.rank_compiled(path, golden, order=order, name="run", source=str(path))


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.usefixtures("small_blocks")
def test_generated_runs_rank_as_the_careful_path_does(
    tmp_path: Path, order: Order, seed: int
) -> None:
    rng = random.Random(seed)
    golden = _golden(rng, 60)
    path = tmp_path / "run.trec"
    path.write_text("\n".join(_lines(rng, 60)) + "\n")
    careful = _careful(path, golden, order)
    # the run holds what the pass decides about
    assert careful.report.duplicates_dropped > 0
    assert careful.report.unknown_queries > 0
    assert careful.report.golden_queries_absent > 0
    assert careful.judged.group_by("qid").len().get_column("len").max() > 16  # type: ignore[operator]
    _assert_same(_fast(path, golden, order), careful)


@pytest.mark.parametrize("order", ORDERS)
def test_whole_blocks_rank_as_the_careful_path_does(tmp_path: Path, order: Order) -> None:
    """The usual sizes: blocks of megabytes, a scratch of 16,392 lines, one query longer."""
    rng = random.Random(7)
    golden = _golden(rng, 401)
    lines = _lines(rng, 400)
    lines += [f"q400 Q0 d{i % 90} {i} {rng.choice(SCORES)} run" for i in range(20_000)]
    path = tmp_path / "run.trec"
    path.write_text("\n".join(lines) + "\n")
    _assert_same(_fast(path, golden, order), _careful(path, golden, order))


@pytest.mark.usefixtures("small_blocks")
def test_ties_by_docno_in_byte_order(tmp_path: Path) -> None:
    """Equal scores: docno descending in byte order ("9" before "10"), whatever the file's
    order; 17 judged documents tied (ranked from a sort) and 3 (counted over)."""
    docs = [str(d) for d in range(1, 21)]
    judged = pl.DataFrame(
        {"qid": ["a"] * 17 + ["b"] * 3, "doc_id": [*docs[:17], "9", "10", "2"], "grade": 1}
    )
    golden = golden_from_frame(judged)
    path = tmp_path / "run.trec"
    path.write_text(
        "".join(f"a Q0 {d} 1 1.5 x\n" for d in docs) + "".join(f"b Q0 {d} 1 2 x\n" for d in docs)
    )
    fast = _fast(path, golden, Order.TREC_EVAL)
    _assert_same(fast, _careful(path, golden, Order.TREC_EVAL))
    assert fast is not None
    ranks = dict(fast.judged.filter(pl.col("qid") == "b").select("doc_id", "rank").iter_rows())
    assert ranks == {"9": 1, "2": 9, "10": 19}


def test_crlf_blank_lines_tabs_and_no_last_line_feed(tmp_path: Path) -> None:
    golden = golden_from_frame(
        pl.DataFrame({"qid": ["q1", "q1", "q2"], "doc_id": ["d2", "d3", "d1"], "grade": 1})
    )
    for name, text in {
        "crlf": "q1 Q0 d1 1 3 r\r\nq1 Q0 d2 2 2 r\r\n\r\nq2 Q0 d1 1 1 r\r\n",
        "tabs": "q1\tQ0\td1\t1\t3\tr\nq1\tQ0\td2\t2\t2\tr\nq2\tQ0\td1\t1\t1\tr",
        "blank": "\nq1 Q0 d1 1 3 r\n\nq1 Q0 d3 2 3 r\nq2 Q0 d1 1 1 r\n\n",
    }.items():
        path = tmp_path / f"{name}.trec"
        path.write_bytes(text.encode())
        for order in ORDERS:
            _assert_same(_fast(path, golden, order), _careful(path, golden, order))


def test_what_the_pass_declines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Interleaved queries, non-ASCII ids, gzip, an empty file, a bad line: declined (None);
    ``load_run`` then reads the file the careful way, with the same answer or error."""
    monkeypatch.setattr(sources, "COMPILED_FROM_BYTES", 0)
    golden = golden_from_frame(
        pl.DataFrame({"qid": ["q1", "q2"], "doc_id": ["d1", "d1"], "grade": 1})
    )
    cases = {
        "interleaved.trec": b"q1 Q0 d1 1 3 r\nq2 Q0 d1 1 3 r\nq1 Q0 d2 2 2 r\n",
        "utf8.trec": "q1 Q0 d\u00e9 1 3 r\nq1 Q0 d1 2 2 r\n".encode(),
        "control.trec": b"q1 Q0 d\x01 1 3 r\nq1 Q0 d1 2 2 r\n",
        "two_spaces.trec": b"q1 Q0  d1 1 3 r\n",
        "empty.trec": b"",
        "short.trec": b"q1 Q0 d1 1 3\n",
        "nan.trec": b"q1 Q0 d1 1 nan r\n",
        "gzip.trec": gzip.compress(b"q1 Q0 d1 1 3 r\n"),
    }
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert _fast(path, golden, Order.TREC_EVAL) is None, name
        try:
            careful: RankedRun | str = load_run(path, golden, name="run")
        except InputError as exc:
            careful = str(exc)
        load_passes.cache_clear()
        os.environ["MISSTRIAGE_AOT"] = "0"
        try:
            assert load_passes() is None
            try:
                expected: RankedRun | str = load_run(path, golden, name="run")
            except InputError as exc:
                expected = str(exc)
        finally:
            del os.environ["MISSTRIAGE_AOT"]
            load_passes.cache_clear()
        if isinstance(expected, str):
            assert careful == expected, name
        else:
            assert isinstance(careful, RankedRun)
            _assert_same(careful, expected)


def test_a_run_of_no_golden_query_is_the_same_error(tmp_path: Path) -> None:
    golden = golden_from_frame(pl.DataFrame({"qid": ["q1"], "doc_id": ["d1"], "grade": 1}))
    path = tmp_path / "run.trec"
    path.write_text("x1 Q0 d1 1 3 r\nx2 Q0 d1 1 3 r\n")
    with pytest.raises(InputError) as fast:
        _fast(path, golden, Order.TREC_EVAL)
    with pytest.raises(InputError) as careful:
        _careful(path, golden, Order.TREC_EVAL)
    assert str(fast.value) == str(careful.value)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["q1", "q2", "q3", "q10"]),
            st.sampled_from(["d1", "d2", "d9", "d10", "d100", "D1"]),
            st.integers(-2, 5),
            st.sampled_from(SCORES),
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from(ORDERS),
)
def test_any_run_ranks_as_the_careful_path_does_or_is_declined(
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[tuple[str, str, int, str]],
    order: Order,
) -> None:
    """Random runs (interleaved or not, repeats, ties): the pass's answer is the careful
    path's, or it declines."""
    golden = golden_from_frame(
        pl.DataFrame(
            {"qid": ["q1", "q1", "q2", "q10"], "doc_id": ["d9", "d10", "d1", "D1"], "grade": 1}
        )
    )
    path = tmp_path_factory.mktemp("run") / "run.trec"
    path.write_text("".join(f"{q} Q0 {d} {r} {s} run\n" for q, d, r, s in rows))
    with pytest.MonkeyPatch.context() as monkeypatch:
        _small(monkeypatch)
        try:
            careful = _careful(path, golden, order)
        except InputError as exc:
            expected = str(exc)
            try:
                answer: RankedRun | str | None = _fast(path, golden, order)
            except InputError as fast_error:
                answer = str(fast_error)
            assert answer is None or answer == expected  # declined, or the same error
            return
        fast = _fast(path, golden, order)
    if fast is None:
        qids = [q for q, _, _, _ in rows]
        together = [q for i, q in enumerate(qids) if i == 0 or q != qids[i - 1]]
        assert len(together) != len(set(together)), "declined a run whose queries are together"
        return
    _assert_same(fast, careful)


def test_a_run_is_cut_where_a_query_begins(tmp_path: Path) -> None:
    """The halves' cut: the first line past the middle whose query is not the line
    before's (blank lines are no query); None when no query begins in the window."""
    text = b"q1 Q0 d1 1 3 r\nq1 Q0 d2 2 2 r\n\nq1 Q0 d3 3 1 r\nq22 Q0 d1 1 3 r\nq22 Q0 d2 2 1 r\n"
    path = tmp_path / "run.trec"
    path.write_bytes(text)
    with path.open("rb") as handle:
        for middle in range(len(text)):
            cut = ranks_fast._query_cut(handle, middle, b" ")
            expected = text.index(b"q22") if middle < text.index(b"q1 Q0 d3") else None
            assert cut == expected, middle
    crlf = b"q1\tQ0\td1\t1\t3\tr\r\nq2\tQ0\td1\t1\t3\tr\r\nq3\tQ0\td1\t1\t3\tr\r\n"
    path.write_bytes(crlf)
    with path.open("rb") as handle:
        assert ranks_fast._query_cut(handle, 0, b"\t") == crlf.index(b"q3")


def test_a_large_run_is_read_in_two_halves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads, two halves cut where a query begins: the careful path's ranking."""
    cuts: list[int | None] = []
    cut = ranks_fast._query_cut

    def recorded(handle: BinaryIO, middle: int, sep: bytes) -> int | None:
        cuts.append(cut(handle, middle, sep))
        return cuts[-1]

    monkeypatch.setattr(ranks_fast, "_query_cut", recorded)
    monkeypatch.setattr(ranks_fast, "SPLIT_FROM", 1000)
    rng = random.Random(11)
    golden = _golden(rng, 80)
    path = tmp_path / "run.trec"
    path.write_text("\n".join(_lines(rng, 80)) + "\n")
    for order in ORDERS:
        _assert_same(_fast(path, golden, order), _careful(path, golden, order))
    assert len(cuts) == len(ORDERS)
    assert None not in cuts


def test_a_pipe_is_refused_not_waited_on(tmp_path: Path) -> None:
    """A named pipe can be read once, and a run is read more than once (its first bytes,
    then its lines): refused at once, by both paths, whatever the format said."""
    golden = golden_from_frame(pl.DataFrame({"qid": ["q1"], "doc_id": ["d2"], "grade": 1}))
    pipe = tmp_path / "pipe.trec"
    os.mkfifo(pipe)
    assert _fast(pipe, golden, Order.TREC_EVAL) is None
    for fmt in (None, "trec", "jsonl", "parquet"):
        with pytest.raises(InputError, match="not a regular file"):
            load_run(pipe, golden, name="run", fmt=fmt)


def test_load_run_takes_the_pass_from_its_size_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below ``COMPILED_FROM_BYTES`` the careful reader reads the run (loading numpy for the
    pass would take longer); from it on, the pass, with the careful reader's answer."""
    calls: list[Path] = []
    rank_compiled = ranks_fast.rank_compiled

    def counted(path: Path, *args: Any, **kwargs: Any) -> RankedRun | None:
        calls.append(path)
        return rank_compiled(path, *args, **kwargs)

    monkeypatch.setattr(ranks_fast, "rank_compiled", counted)
    rng = random.Random(5)
    golden = _golden(rng, 40)
    path = tmp_path / "run.trec"
    path.write_text("\n".join(_lines(rng, 40)) + "\n")
    careful = _careful(path, golden, Order.TREC_EVAL)
    _assert_same(load_run(path, golden, name="run"), careful)
    assert calls == []
    monkeypatch.setattr(sources, "COMPILED_FROM_BYTES", path.stat().st_size)
    _assert_same(load_run(path, golden, name="run"), careful)
    assert calls == [path]
    # the head of each ranking kept (the service, clusters): the careful reader
    _assert_same(load_run(path, golden, name="run", keep_results=True), careful)
    assert calls == [path]


def test_a_file_that_cannot_be_read_is_left_to_the_careful_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error of the file (permissions, the disk) is the careful reader's to word."""
    golden = golden_from_frame(pl.DataFrame({"qid": ["q1"], "doc_id": ["d2"], "grade": 1}))
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d1 1 3 r\n")

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(Path, "open", refused)
    assert _fast(path, golden, Order.TREC_EVAL) is None


def test_the_driver_reads_the_pass_s_answer_as_the_pass_writes_it() -> None:
    """The module built ahead of time holds no Python constants: the driver repeats the
    places of the answer's fields, the scratch's shape, the outcome and the orders' codes."""
    from app.eval.compiled import lines, ranks

    assert ranks_fast.LINE_FIELDS == lines.LINE_FIELDS
    assert ranks_fast.REFUSED == lines.REFUSED
    assert ranks_fast.ORDER_CODES == {
        Order.TREC_EVAL: lines.TREC_EVAL,
        Order.RANK: lines.RANK,
        Order.FILE: lines.FILE,
    }
    fields = (ranks.P_QUERY, ranks.P_LINES, ranks.P_DROPPED, ranks.P_NAME_START, ranks.P_NAME_END)
    assert fields == (
        ranks_fast._P_QUERY,
        ranks_fast._P_LINES,
        ranks_fast._P_DROPPED,
        ranks_fast._P_NAME_START,
        ranks_fast._P_NAME_END,
    )
    assert ranks_fast._P_FIELDS == ranks.P_FIELDS == len(fields)
    assert (ranks_fast._T_JUDGMENT, ranks_fast._T_RANK) == (ranks.T_JUDGMENT, ranks.T_RANK)
    assert ranks_fast._T_FIELDS == ranks.T_FIELDS == 2
