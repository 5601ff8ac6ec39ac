"""Ranking block by block of whole queries (app.eval.streaming) gives what the whole-file path
gives (load_run, then the heads of top_candidates), for every spelling of a run, every order,
and blocks smaller than a line, a query or the file."""

from __future__ import annotations

import threading
from collections.abc import Generator
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import app.eval.streaming as streaming
from app.eval import InputError, Order, load_run, top_candidates
from app.eval.cluster_profile import CorpusSource
from tests.support.evaluation import golden
from tests.support.service import WriteFile

QRELS = "q1 0 d2 1\nq1 0 d9 2\nq2 0 d1 1\nq3 0 d4 1\nq4 0 d1 0\n"
# Ties (d2 and d3 at 2.5; trec_eval puts the greater docno first), a repeated document (d1 in
# q1), a query not in the golden set (qx), a rank column that disagrees with the scores.
RUN = (
    "q1 Q0 d1 1 3.5 t\nq1 Q0 d2 2 2.5 t\nq1 Q0 d3 3 2.5 t\nq1 Q0 d1 4 9 t\n"
    "q1 Q0 d9 5 0.5 t\nqx Q0 d1 1 1 t\nqx Q0 d2 2 1 t\n"
    "q2 Q0 d5 1 1 t\nq2 Q0 d1 7 2 t\nq2 Q0 d6 3 2 t\nq4 Q0 d1 1 4 t\n"
)


def heads(top: pl.DataFrame) -> pl.DataFrame:
    return top.group_by("qid").agg(pl.col("doc_id").sort_by("rank"), pl.col("rank").max())


def whole_file(path: Path, gold: object, order: Order, depth: int) -> tuple[object, pl.DataFrame]:
    ranked = load_run(path, gold, name="r", order=order, keep_results=True)  # type: ignore[arg-type]
    return ranked, heads(top_candidates(ranked, depth)).sort("qid")


@pytest.mark.parametrize("block_bytes", [7, 40, 100, 1 << 20])
@pytest.mark.parametrize("order", list(Order))
@pytest.mark.parametrize(
    ("content", "by_blocks"),
    [
        pytest.param(RUN, True, id="single-spaces"),
        pytest.param(RUN.replace(" ", "\t"), True, id="tabs"),
        pytest.param(RUN.replace("\n", "\r\n"), True, id="crlf"),
        pytest.param("\n" + RUN.replace("\n", "\n\n\n") + "\n", True, id="blank-lines"),
        pytest.param(RUN.rstrip("\n"), True, id="no-final-newline"),
        # the fast reader's refusal, and a query whose lines are apart: the whole file
        pytest.param(RUN.replace(" ", "  "), False, id="runs-of-spaces"),
        pytest.param(RUN + "q1 Q0 d7 6 8 t\n", False, id="query-apart"),
    ],
)
def test_blocks_rank_as_the_whole_file(
    tmp_path: Path,
    write_file: WriteFile,
    monkeypatch: pytest.MonkeyPatch,
    content: str,
    by_blocks: bool,
    order: Order,
    block_bytes: int,
) -> None:
    monkeypatch.setattr(streaming, "BLOCK_BYTES", block_bytes)
    whole_reads: list[Path] = []

    def reading(path: Path, *args: object, **kwargs: object) -> object:
        whole_reads.append(path)
        return load_run(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(streaming, "load_run", reading)
    gold = golden(tmp_path, QRELS)
    path = write_file("run.trec", content)
    expected, expected_heads = whole_file(path, gold, order, depth=2)
    ranked, got_heads = streaming.load_run_heads(
        path, gold, name="r", keep_depth=2, shape=heads, order=order
    )
    assert ranked.report == expected.report  # type: ignore[attr-defined]
    assert ranked.retrieved == expected.retrieved  # type: ignore[attr-defined]
    assert_frame_equal(ranked.judged, expected.judged)  # type: ignore[attr-defined]
    assert_frame_equal(got_heads, expected_heads)
    assert ranked.results is None
    assert ranked.report.duplicates_dropped == 1
    assert ranked.report.unknown_queries == 1
    assert whole_reads == ([] if by_blocks else [path])


def test_traces_without_clusters_are_the_whole_files(
    tmp_path: Path, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streaming, "BLOCK_BYTES", 40)
    gold = golden(tmp_path, QRELS)
    path = write_file("run.trec", RUN)
    corpus = CorpusSource(matters=False, has_text=False, lookup=lambda ids: None)  # type: ignore[arg-type,return-value]
    expected = load_run(path, gold, name="r", keep_results=True, corpus=corpus)
    ranked, _ = streaming.load_run_heads(
        path, gold, name="r", keep_depth=2, shape=heads, corpus=corpus
    )
    assert ranked.traces is not None
    assert expected.traces is not None
    assert ranked.traces.queries == expected.traces.queries
    assert ranked.traces.queries["qx"].returned == 2
    assert ranked.traces.totals == expected.traces.totals
    assert ranked.traces.cluster_ranks is not None
    assert expected.traces.cluster_ranks is not None
    assert_frame_equal(ranked.traces.cluster_ranks, expected.traces.cluster_ranks)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(RUN + "q9 Q0 d1 1 nan t\n", "score 'nan' is not a finite number", id="nan"),
        pytest.param(RUN + "q9 Q0 d1 1 t\n", "expected 6 columns", id="short"),
        pytest.param("", "the run is empty", id="empty"),
        pytest.param("qy Q0 d1 1 1 t\n", "none of the run's 1 query", id="no-match"),
    ],
)
def test_errors_are_the_whole_files(
    tmp_path: Path,
    write_file: WriteFile,
    monkeypatch: pytest.MonkeyPatch,
    content: str,
    message: str,
) -> None:
    monkeypatch.setattr(streaming, "BLOCK_BYTES", 40)
    gold = golden(tmp_path, QRELS)
    path = write_file("run.trec", content)
    with pytest.raises(InputError) as expected:
        load_run(path, gold, name="r")
    with pytest.raises(InputError) as got:
        streaming.load_run_heads(path, gold, name="r", keep_depth=2, shape=heads)
    assert message in str(got.value)
    assert str(got.value) == str(expected.value)


def test_blocks_made_ahead_stop_with_their_reader() -> None:
    """The reading thread hands its items over in order, raises its error in the caller, and
    stops (its generator closed) when the caller leaves early."""
    closed: list[bool] = []

    def numbers(fail_at: int | None = None) -> Generator[int]:
        try:
            for n in range(1000):
                if n == fail_at:
                    raise ValueError(f"failed at {n}")
                yield n
        finally:
            closed.append(True)

    with streaming.ahead(numbers()) as items:
        assert list(items) == list(range(1000))
    with streaming.ahead(numbers(5)) as items:
        assert next(items) == 0
        with pytest.raises(ValueError, match="failed at 5"):
            list(items)
    with streaming.ahead(numbers()) as items:
        assert next(items) == 0  # then the caller leaves, the reader blocked on a full queue
    assert closed == [True, True, True]
    assert not [t for t in threading.enumerate() if t.name == "run-blocks"]
