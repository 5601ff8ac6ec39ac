"""A log tallied block by block (app.eval.cluster_stream) gives the whole-file figures.

Generated logs hold every edge: queries shorter than k, documents absent from the corpus and
without a cluster, repeated documents in one query, tied scores written in and out of ranking
order; in TREC, gzip, JSONL (hits and lists) and Parquet (with its own column names), read in
blocks a few queries long. The whole-file path (``load_log_run`` then ``cluster_profile``,
itself checked against a plain-Python oracle in test_cluster_profile.py) is the reference.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from app.eval import jsonl, parquet, streaming
from app.eval.cluster_profile import (
    ClusterCorpus,
    CorpusSource,
    cluster_profile,
    profile_of_tally,
    profile_of_traces,
)
from app.eval.cluster_stream import stream_log_traces, tally_log
from app.eval.conventions import Order
from app.eval.errors import InputError
from app.eval.log_fast import compiled_tally
from app.eval.parquet import RunColumns
from app.eval.sources import load_log_run, load_log_traces
from app.eval.streaming import SeenQueries
from tests.support.cluster_logs import random_corpus

KS_CASES = [(1,), (3, 5, 10, 20), (2, 40)]


def _log_rows(rng: random.Random, queries: int = 300) -> list[tuple[str, str, int, float]]:
    """(qid, doc_id, rank, score) written query by query, most best first (as a system
    writes its log), some with ties out of trec_eval's order or scores in no order."""
    rows = []
    for q in range(queries):
        n = rng.choice([1, 2, 4, 9, 15, 25, 45])  # short queries at every k
        docs = [f"d{rng.randint(0, 179):03}" for _ in range(n)]  # d150..: not in the corpus
        style = rng.random()
        if style < 0.6:
            scores = sorted(rng.choice([1.0, 2.0, 3.0, round(rng.random(), 2)]) for _ in docs)
            scores.reverse()
        else:
            scores = [rng.choice([1.0, 2.0, rng.random()]) for _ in docs]
        pairs = enumerate(zip(docs, scores, strict=True))
        rows += [(f"q{q:04}", d, r + 1, s) for r, (d, s) in pairs]
    return rows


def _write_all(tmp_path: Path, rows: list[tuple[str, str, int, float]]) -> dict[str, Path]:
    trec = tmp_path / "log.trec"
    trec.write_text("".join(f"{q} Q0 {d} {r} {s!r} log\n" for q, d, r, s in rows))
    gz = tmp_path / "log.trec.gz"
    gz.write_bytes(gzip.compress(trec.read_bytes()))
    hits = tmp_path / "log.jsonl"
    hits.write_text(
        "".join(
            json.dumps({"qid": q, "doc_id": d, "score": s, "rank": r}) + "\n" for q, d, r, s in rows
        )
    )
    frame = pl.DataFrame(rows, schema=["query", "doc", "position", "bm25"], orient="row")
    pq = tmp_path / "log.parquet"
    frame.write_parquet(pq, row_group_size=97)
    return {"trec": trec, "gzip": gz, "jsonl": hits, "parquet": pq}


PARQUET_COLUMNS = RunColumns(qid="query", doc_id="doc", score="bm25", rank="position")


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks a few queries long: every query boundary falls somewhere in a block."""
    monkeypatch.setattr(streaming, "BLOCK_BYTES", 700)
    monkeypatch.setattr(parquet, "BLOCK_ROWS", 23)
    monkeypatch.setattr(jsonl, "BLOCK_RESULTS", 31)


@pytest.mark.usefixtures("small_blocks")
@pytest.mark.parametrize("order", list(Order))
def test_streamed_equals_whole_file_in_every_format(tmp_path: Path, order: Order) -> None:
    rng = random.Random(29)
    clusters, tokens = random_corpus(rng)
    files = _write_all(tmp_path, _log_rows(rng))
    corpus = ClusterCorpus.of(clusters, tokens)
    for ks in KS_CASES:
        top = load_log_run(files["trec"], depth=max(ks), order=order)
        want = cluster_profile(top, clusters, ks=ks, tokens=tokens)
        assert want.queries == 300
        for fmt, path in files.items():
            columns = PARQUET_COLUMNS if fmt == "parquet" else None
            got = tally_log(path, corpus, ks, order=order, columns=columns)
            assert got.streamed, fmt
            assert profile_of_tally(got.tally) == want, (fmt, ks)


@pytest.mark.usefixtures("small_blocks")
def test_a_corpus_without_clusters_or_text(tmp_path: Path) -> None:
    rng = random.Random(3)
    files = _write_all(tmp_path, _log_rows(rng, 60))
    top = load_log_run(files["trec"], depth=10)
    want = cluster_profile(top, {}, ks=(5, 10))
    got = tally_log(files["trec"], ClusterCorpus.of({}), (5, 10))
    assert profile_of_tally(got.tally) == want
    assert want.depths[0].prompt_tokens is None


@pytest.mark.usefixtures("small_blocks")
def test_json_lists_stream(tmp_path: Path) -> None:
    rng = random.Random(8)
    clusters, tokens = random_corpus(rng)
    rows = _log_rows(rng, 80)
    by_query: dict[str, list[str]] = {}
    for q, d, _, _ in rows:
        by_query.setdefault(q, []).append(d)
    lists = tmp_path / "lists.jsonl"
    lists.write_text("".join(json.dumps({"qid": q, "docs": d}) + "\n" for q, d in by_query.items()))
    trec = tmp_path / "same.trec"  # list order is the ranking: order file over the same lines
    trec.write_text("".join(f"{q} Q0 {d} {r} 1.0 x\n" for q, d, r, _ in rows))
    want = cluster_profile(
        load_log_run(trec, depth=20, order=Order.FILE), clusters, ks=(5, 20), tokens=tokens
    )
    got = tally_log(lists, ClusterCorpus.of(clusters, tokens), (5, 20))
    assert got.streamed
    assert profile_of_tally(got.tally) == want


@pytest.mark.usefixtures("small_blocks")
def test_queries_not_together_are_read_whole(tmp_path: Path) -> None:
    rng = random.Random(11)
    clusters, tokens = random_corpus(rng)
    rows = _log_rows(rng, 120)
    files = _write_all(tmp_path, rows)
    corpus = ClusterCorpus.of(clusters, tokens)
    want = profile_of_tally(tally_log(files["trec"], corpus, (5, 10)).tally)
    # the first line moved to the end: its query's lines are in two places
    lines = files["trec"].read_text().splitlines(keepends=True)
    mixed = tmp_path / "mixed.trec"
    mixed.write_text("".join(lines[1:] + lines[:1]))
    got = tally_log(mixed, corpus, (5, 10))
    assert not got.streamed
    assert profile_of_tally(got.tally) == want


@pytest.mark.usefixtures("small_blocks")
def test_the_streamed_traces_are_the_whole_files(tmp_path: Path) -> None:
    """What a log run's import stores, block by block: every query's trace and the totals."""
    rng = random.Random(17)
    clusters, tokens = random_corpus(rng)
    files = _write_all(tmp_path, _log_rows(rng, 150))
    source = CorpusSource.of(ClusterCorpus.of(clusters, tokens))
    report, traces = load_log_traces(files["trec"], source)
    for fmt in ("trec", "gzip", "parquet"):
        rows: list[pl.DataFrame] = []
        columns = PARQUET_COLUMNS if fmt == "parquet" else None
        streamed_report, totals = stream_log_traces(
            files[fmt], source, sink=rows.append, columns=columns
        )
        stored = pl.concat(rows).sort("qid")
        assert stored.get_column("qid").to_list() == sorted(traces.queries)
        assert stored.get_column("returned").to_list() == [
            traces.queries[q].returned for q in sorted(traces.queries)
        ]
        assert [json.loads(r) for r in stored.get_column("repeats")] == [
            list(traces.queries[q].repeats) for q in sorted(traces.queries)
        ]
        assert totals == traces.totals
        assert streamed_report.queries == report.queries
        assert streamed_report.duplicates_dropped == report.duplicates_dropped
        assert streamed_report.lines == report.lines
        assert streamed_report.warnings == report.warnings
    assert profile_of_traces(traces, ks=(5,)).queries == 150


def test_seen_queries_finds_every_earlier_one() -> None:
    seen = SeenQueries()
    rng = np.random.default_rng(4)
    added = []
    for _ in range(40):
        block = rng.integers(0, 2**63, 50, dtype=np.uint64)
        assert not seen.seen_any(block)
        seen.add(block)
        added.append(block)
    for block in added:
        assert seen.seen_any(block[17:18])
    assert not seen.seen_any(np.array([1, 2, 3], dtype=np.uint64))


def test_parquet_errors_name_the_file_and_the_row(tmp_path: Path) -> None:
    path = tmp_path / "log.parquet"
    pl.DataFrame({"query_id": ["q1", "q1"], "docid": ["a", None], "s": [1.0, 2.0]}).write_parquet(
        path
    )
    with pytest.raises(
        InputError, match=r"no column 'qid', 'doc_id', 'score' \(the file has: query_id"
    ):
        tally_log(path, ClusterCorpus.of({}), (5,))
    with pytest.raises(InputError, match=r"log.parquet, line 2: the row holds an empty"):
        tally_log(path, ClusterCorpus.of({}), (5,), columns=RunColumns("query_id", "docid", "s"))
    # a score column named and not there, in an order that needs no score too
    for order in (Order.TREC_EVAL, Order.FILE):
        with pytest.raises(InputError, match=r"no column 'relevance' \(the file has: query_id"):
            tally_log(
                path,
                ClusterCorpus.of({}),
                (5,),
                order=order,
                columns=RunColumns("query_id", "docid", "relevance"),
            )
    pl.DataFrame({"qid": ["q1"], "doc_id": ["a"], "score": [float("inf")]}).write_parquet(path)
    with pytest.raises(
        InputError, match=r"line 1: the row holds a score that is not a finite number"
    ):
        tally_log(path, ClusterCorpus.of({}), (5,))


TRICKY_LINES = [
    '{"qid": "q1", "doc_id": "d1", "score": -0.0}',
    '{"qid": 7, "doc_id": 12, "score": 3, "rank": 2}',
    '{"qid": -7, "doc_id": "d1", "score": 1E2, "rank": -0}',
    '{"qid": "q1", "doc_id": "d1", "score": 1, "rank": null}',
    '{"doc_id": "d1", "qid": "q1", "score": 1}',  # another key order
    '{"qid": "q\\u0031", "doc_id": "d1", "score": 1}',  # an escape
    '{"qid": "é", "doc_id": "ß", "score": 2.5}\r',
    "",  # a blank line
    '{"qid": "q 1", "doc_id": "d1", "score": 1}',
    '{"qid": "q\u00a01", "doc_id": "d1", "score": 1}',  # a no-break space
    '{"qid": "", "doc_id": "d1", "score": 1}',
    '{"qid": 5.0, "doc_id": "d1", "score": 1}',
    '{"qid": "q1", "doc_id": "d1", "score": "1"}',
    '{"qid": "q1", "doc_id": "d1", "score": true}',
    '{"qid": "q1", "doc_id": "d1", "score": 1e400}',
    '{"qid": "q1", "doc_id": "d1", "score": NaN}',
    '{"qid": "q1", "doc_id": "d1", "score": 1, "rank": 1.5}',
    '{"qid": "q1", "doc_id": "d1", "score": 1, "rank": 99999999999999999999}',
    '{"qid": "q1", "qid": "q2", "doc_id": "d1", "score": 1}',  # a repeated key
    '{"qid": "q1", "doc_id": "d1", "score": 1, "tag": "x"}',  # another key
    '{"qid": 123456789012345678901234, "doc_id": "d1", "score": 1}',
    "[1, 2]",
]


@pytest.mark.parametrize("tricky", TRICKY_LINES)
def test_the_fast_json_reader_reads_as_the_careful_one(
    tmp_path: Path, tricky: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A block of the usual lines with one other line in it: the fast path's results, or its
    error, are the careful reader's (``read_jsonl_run``, line by line)."""
    from app.eval import jsonl_fast

    monkeypatch.setattr(jsonl_fast, "BLOCK_BYTES", 300)
    usual = [f'{{"qid": "q{i // 4}", "doc_id": "d{i}", "score": {10 - i % 4}}}' for i in range(40)]
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join([*usual[:21], tricky, *usual[21:]]) + "\n")
    try:
        want: pl.DataFrame | str = jsonl.read_jsonl_run(path)[0]
    except InputError as error:
        want = str(error)
    try:
        got: pl.DataFrame | str = pl.concat(list(jsonl_fast.hit_blocks(path, str(path))))
    except InputError as error:
        got = str(error)
    if isinstance(want, str):
        assert got == want
    else:
        assert isinstance(got, pl.DataFrame)
        assert got.to_dicts() == want.to_dicts()
        assert [str(s) for s in got.get_column("score")] == [
            str(s) for s in want.get_column("score")
        ]  # -0.0 is 0.0 on both


@pytest.mark.parametrize("dtype", ["categorical", "enum"])
def test_parquet_ids_held_as_categories_read_as_text(tmp_path: Path, dtype: str) -> None:
    """A "category" column (pandas writes one as a Parquet dictionary, polars reads it as
    Categorical) and an Enum hold text: the figures of the same ids as strings, on the
    careful and the compiled path."""
    rng = random.Random(5)
    rows = [(f"q{i // 8}", f"d{rng.randrange(40)}", float(8 - i % 8)) for i in range(800)]
    plain = pl.DataFrame(rows, schema=["qid", "doc_id", "score"], orient="row")
    kind = (
        pl.Categorical()
        if dtype == "categorical"
        else pl.Enum(sorted(set(plain["qid"]) | set(plain["doc_id"])))
    )
    coded = plain.with_columns(pl.col("qid", "doc_id").cast(kind))
    plain.write_parquet(tmp_path / "plain.parquet")
    coded.write_parquet(tmp_path / "coded.parquet")
    corpus = ClusterCorpus.of({f"d{i}": f"c{i % 9}" for i in range(40)})
    want = profile_of_tally(tally_log(tmp_path / "plain.parquet", corpus, (3, 8)).tally)
    # the compiled path takes them (it does not decline them to the careful one)
    tally, lines = compiled_tally(
        tmp_path / "coded.parquet", corpus, (3, 8), order=Order.TREC_EVAL, fmt="parquet"
    )
    assert (profile_of_tally(tally), lines) == (want, 800)
    for compiled_from in (0, 1 << 40):
        got = tally_log(tmp_path / "coded.parquet", corpus, (3, 8), compiled_from=compiled_from)
        assert profile_of_tally(got.tally) == want
