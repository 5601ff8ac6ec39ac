"""The log pass as its drivers call it (app.eval.passes): the module built ahead of time and
numba's give the same tallies, in every format and order; the codes copied for the drivers
are the passes' own; a log's tally through the built module loads no numba."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from app.eval import aot, passes
from app.eval.aot import passes_unbuilt
from app.eval.cluster_profile import ClusterCorpus, ClusterTally
from app.eval.conventions import Order
from app.eval.log_fast import compiled_tally
from tests.support.cluster_logs import random_corpus


@pytest.fixture
def built() -> None:
    """The module ``make install`` built (``cluster_stream.warm``); in CI its absence fails."""
    aot.load_passes.cache_clear()
    if aot.load_passes() is None:
        message = "the passes are not built ahead of time: make install (app.eval.aot)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def test_the_codes_are_the_passes_own() -> None:
    """The built module holds no Python constants: the drivers' copies of them."""
    from app.eval.compiled import columns, corpus, lines, tally

    assert (passes.DONE, passes.REFUSED) == (lines.DONE, lines.REFUSED)
    assert (passes.DONE, passes.REFUSED) == (corpus.DONE, corpus.REFUSED)
    assert (passes.TREC, passes.JSONL) == (lines.TREC, lines.JSONL)
    assert passes.ORDER_CODES == {
        Order.TREC_EVAL: lines.TREC_EVAL,
        Order.RANK: lines.RANK,
        Order.FILE: lines.FILE,
    }
    assert passes.LINE_FIELDS == lines.LINE_FIELDS
    counters = (passes.Q_QUERIES, passes.Q_LINES, passes.Q_DROPPED, passes.Q_SHOWN)
    assert counters == (tally.Q_QUERIES, tally.Q_LINES, tally.Q_DROPPED, tally.Q_SHOWN)
    assert (passes.Q_EPOCH, passes.Q_COUNTERS) == (tally.Q_EPOCH, tally.Q_COUNTERS)
    assert passes.MAX_QUERY_LINES == tally.MAX_QUERY_LINES
    assert (passes.BLANK_OR_CONTROL, passes.PAST_ASCII) == (
        columns.BLANK_OR_CONTROL,
        columns.PAST_ASCII,
    )
    fields = (
        passes.C_ID_START,
        passes.C_ID_END,
        passes.C_CLUSTER_START,
        passes.C_CLUSTER_END,
        passes.C_TITLE_CHARS,
        passes.C_TEXT_CHARS,
        passes.CORPUS_FIELDS,
    )
    assert fields == (
        corpus.C_ID_START,
        corpus.C_ID_END,
        corpus.C_CLUSTER_START,
        corpus.C_CLUSTER_END,
        corpus.C_TITLE_CHARS,
        corpus.C_TEXT_CHARS,
        corpus.CORPUS_FIELDS,
    )
    from app.eval import log_dictionary
    from app.eval.compiled import dictionary

    assert log_dictionary.ENTRY_WORDS == dictionary.ENTRY_WORDS


def test_every_export_is_built_and_signed(built: None) -> None:
    """The built module exports each of the log pass's functions (and evaluate's), and
    the build signs each one."""
    from app.eval.compiled.aot_build import LOG_SIGNATURES

    module = aot.load_passes()
    assert set(LOG_SIGNATURES) == set(passes.LOG_EXPORTS)
    for name in [*passes.LOG_EXPORTS, "golden_tables", "rank_block"]:
        assert callable(getattr(module, name)), name
    with passes_unbuilt():
        assert passes.log_pass() is not module
        assert set(vars(passes.log_pass())) == set(passes.LOG_EXPORTS)


def _log(tmp_path: Path, seed: int) -> tuple[dict[str, Path], ClusterCorpus]:
    """A log in every format the pass reads: queries of 1 to 40 results, repeats, ties,
    documents outside the corpus, ids in their string views and longer ones."""
    rng = random.Random(seed)
    clusters, tokens = random_corpus(rng)
    corpus = ClusterCorpus.of(clusters, tokens)
    names = [*tokens, "outside-the-corpus-1", "outside-2", "a-name-longer-than-a-view-holds"]
    rows = []
    for q in range(400):
        qid = f"q{q}" if q % 9 else f"query-number-{q}-long"
        for r in range(rng.choice([1, 2, 5, 20, 40])):
            rows.append((qid, rng.choice(names), r + 1, rng.choice([1.0, 0.5, 0.25, 2.0])))
    frame = pl.DataFrame(rows, schema=["qid", "doc_id", "rank", "score"], orient="row")
    trec = tmp_path / "log.trec"
    trec.write_text("".join(f"{q} Q0 {d} {r} {s} t\n" for q, d, r, s in rows))
    hits = tmp_path / "log.jsonl"
    frame.select("qid", "doc_id", "score", "rank").write_ndjson(hits)
    parquet = tmp_path / "log.parquet"
    frame.write_parquet(parquet, row_group_size=333)
    return {"trec": trec, "jsonl-hits": hits, "parquet": parquet}, corpus


@pytest.mark.parametrize("order", list(Order))
@pytest.mark.parametrize("seed", [1, 2])
def test_the_built_pass_tallies_as_numbas(
    built: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: Order, seed: int
) -> None:
    """The same log in every format, tallied by the built module and by numba's pass, with
    blocks and batches small enough that queries run across them and pieces are cut."""
    from app.eval import log_fast, log_parquet

    monkeypatch.setattr(log_fast, "_BATCH_LINES", 64)
    monkeypatch.setattr(log_fast, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(log_fast, "PIECES_FROM", 1024)
    monkeypatch.setattr(log_parquet, "PARQUET_ROWS", 97)
    monkeypatch.setattr(log_parquet, "PIECES_FROM", 10)
    logs, corpus = _log(tmp_path, seed)
    rows = pl.read_parquet(logs["parquet"]).height
    for fmt, path in logs.items():
        aot.load_passes.cache_clear()
        built_tally = compiled_tally(path, corpus, (1, 5, 20), order=order, fmt=fmt)
        with passes_unbuilt():
            numbas = compiled_tally(path, corpus, (1, 5, 20), order=order, fmt=fmt)
        assert isinstance(built_tally[0], ClusterTally)
        assert built_tally == numbas, fmt
        assert built_tally[1] == rows


def test_a_logs_tally_through_the_built_pass_loads_no_numba(built: None, tmp_path: Path) -> None:
    """``misstriage clusters`` over a large Parquet log and corpus, in a process of its own:
    the log pass and the corpus's read come from the built module, and numba is not
    loaded (its start alone takes some 0.5 s)."""
    logs, corpus = _log(tmp_path, 3)
    code = (
        "import sys; from pathlib import Path; import polars as pl; "
        "from app.eval.cluster_profile import ClusterCorpus; "
        "from app.eval.log_fast import compiled_tally; from app.eval.conventions import Order; "
        "from app.eval.cluster_corpus import read_compiled; "
        f"corpus = read_compiled(Path({str(tmp_path / 'corpus.jsonl')!r})); "
        "assert corpus is not None; "
        f"tally, lines = compiled_tally(Path({str(logs['parquet'])!r}), corpus, (5,), "
        "order=Order.TREC_EVAL, fmt='parquet'); "
        "print(lines, 'numba' in sys.modules)"
    )
    documents = corpus.documents
    (tmp_path / "corpus.jsonl").write_text(
        "".join(
            f'{{"_id": "{d}", "text": "t", "cluster_id": "{c}"}}\n'
            if c is not None
            else f'{{"_id": "{d}", "text": "t"}}\n'
            for d, c in zip(
                documents.get_column("doc_id").to_list(),
                documents.get_column("cluster_id").to_list(),
                strict=True,
            )
        )
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    lines, numba = result.stdout.split()
    assert int(lines) == pl.scan_parquet(logs["parquet"]).select(pl.len()).collect().item()
    assert numba == "False"


def test_warm_raises_when_the_pass_declines_its_own_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``warm``'s check reads each tiny log by the compiled path itself: a pass that
    declines every log (the careful path would then give the same tallies) is an error."""
    from types import SimpleNamespace

    import numpy as np

    from app.eval import cluster_stream

    jitted = passes.jitted()

    def refused_rows(*args: object) -> tuple[int, np.ndarray]:
        return passes.REFUSED, np.empty(0, np.uint64)

    def refused_block(*args: object) -> tuple[int, int, np.ndarray]:
        return passes.REFUSED, 0, np.empty(0, np.uint64)

    declining = SimpleNamespace(
        **{**vars(jitted), "tally_rows": refused_rows, "tally_block": refused_block}
    )
    monkeypatch.setattr(passes, "load_passes", lambda: declining)
    with pytest.raises(RuntimeError, match=r"the log pass declined log\.trec"):
        cluster_stream._warm_logs(tmp_path)


def test_rows_of_another_type_are_refused_before_the_pass() -> None:
    """The built pass takes its arrays unchecked: the rows' types and order are checked as
    they are made."""
    import numpy as np

    from app.eval.log_parquet import Rows

    ids = np.zeros(32, np.uint8)
    none = np.empty(0, np.int64)
    Rows(ids, none, ids, none, np.zeros(2), np.zeros(2, np.int64))
    with pytest.raises(TypeError, match="int64 wanted"):
        Rows(ids, none, ids, none, np.zeros(2), np.zeros(2, np.int32))
    with pytest.raises(TypeError, match="float64 wanted"):
        Rows(ids, none, ids, none, np.zeros(4)[::2], np.zeros(2, np.int64))


def test_the_digest_covers_the_exports_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module built for other exports (``passes.LOG_EXPORTS`` changed alone) is another
    source's: never loaded, where a missing name would fail at its first call."""
    import shutil

    source = tmp_path / "app" / "eval"
    (source / "compiled").mkdir(parents=True)
    for path in aot.COMPILED.glob("*.py"):
        shutil.copy2(path, source / "compiled" / path.name)
    shutil.copy2(aot.COMPILED.parent / "passes.py", source / "passes.py")
    monkeypatch.setattr(aot, "COMPILED", source / "compiled")
    before = aot.source_digest()
    with (source / "passes.py").open("a") as handle:
        handle.write("\n# another export\n")
    assert aot.source_digest() != before
