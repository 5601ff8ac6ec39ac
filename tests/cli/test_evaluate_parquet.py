"""``misstriage evaluate`` over a Parquet run, as a lake keeps it: its columns named by the
options (``--qid-column`` and the others, as ``misstriage clusters`` takes them), the format
given or detected, the figures those of the same run written as TREC text."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest

from tests.support.cli import evaluate_cli


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    rng = random.Random(29)
    rows = []
    for q in range(12):
        for rank in range(1, 31):
            # tied scores, so the document ids decide the order
            rows.append((f"q{q}", f"d{rng.randrange(60)}", float(rng.randrange(8)), rank))
    frame = pl.DataFrame(rows, schema=["qid", "doc_id", "score", "rank"], orient="row")
    trec = tmp_path / "run.trec"
    frame.select(
        "qid", pl.lit("Q0").alias("q0"), "doc_id", "rank", "score", pl.lit("t").alias("tag")
    ).write_csv(trec, separator=" ", include_header=False)
    lake = tmp_path / "run.parquet"
    frame.rename(
        {"qid": "query_id", "doc_id": "docid", "score": "bm25", "rank": "pos"}
    ).write_parquet(lake)
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(
        "".join(
            f"q{q} 0 d{rng.randrange(60)} {rng.randrange(1, 3)}\n"
            for q in range(12)
            for _ in range(4)
        )
    )
    return {"trec": trec, "parquet": lake, "qrels": qrels}


COLUMNS = ["--qid-column", "query_id", "--doc-column", "docid", "--score-column", "bm25"]


@pytest.mark.parametrize("order", ["trec_eval", "rank", "file"])
@pytest.mark.parametrize("given", [True, False], ids=["format-given", "format-detected"])
def test_a_parquet_run_with_its_own_column_names_gives_the_text_runs_figures(
    files: dict[str, Path], order: str, given: bool
) -> None:
    common = ["evaluate", "--qrels", files["qrels"], "--order", order, "--format", "json"]
    common += ["--per-query", "--k", "5", "--depth", "10"]
    text = evaluate_cli(*common, "--run", f"r={files['trec']}")
    assert text.returncode == 0, text.stderr
    lake_options = [*COLUMNS, "--rank-column", "pos"]
    if given:
        lake_options += ["--run-format", "parquet"]
    lake = evaluate_cli(*common, "--run", f"r={files['parquet']}", *lake_options)
    assert lake.returncode == 0, lake.stderr

    def figures(out: str) -> object:
        (run,) = json.loads(out)["runs"]
        return {key: run[key] for key in ("measures", "micro", "depth_curve", "per_query")}

    assert figures(lake.stdout) == figures(text.stdout)


def test_a_column_named_for_two_fields_or_missing_is_said(files: dict[str, Path]) -> None:
    common = ["evaluate", "--qrels", files["qrels"], "--run", f"r={files['parquet']}"]
    twice = evaluate_cli(*common, "--qid-column", "docid", "--doc-column", "docid")
    assert twice.returncode == 2
    assert "the query id and the document id are both column 'docid'" in twice.stderr
    assert "Traceback" not in twice.stderr
    missing = evaluate_cli(*common)  # the default names are not the file's
    assert missing.returncode == 2
    assert "no column 'qid', 'doc_id', 'score' (the file has: query_id, docid" in missing.stderr
    assert "order trec_eval ranks by the score; order rank or file needs none" in missing.stderr
    # order file reads no score: the ids' columns are all it needs
    by_file = evaluate_cli(
        *common, "--qid-column", "query_id", "--doc-column", "docid", "--order", "file"
    )
    assert by_file.returncode == 0, by_file.stderr
    wrong = evaluate_cli(*common, "--run-format", "parquet", "--qid-column", "query_id")
    assert wrong.returncode == 2
    assert "no column 'doc_id'" in wrong.stderr


def test_the_gate_reads_parquet_runs_by_their_column_names(files: dict[str, Path]) -> None:
    """``misstriage gate`` over a baseline and a run kept in a lake: the text runs' answer."""
    common = ["gate", "--qrels", files["qrels"], "--format", "json", "--depth", "10", "--k", "5"]
    text = evaluate_cli(*common, "--baseline", files["trec"], "--run", files["trec"])
    lake = evaluate_cli(
        *common, "--baseline", files["parquet"], "--run", files["parquet"], *COLUMNS
    )
    assert text.returncode == 0, text.stderr
    assert lake.returncode == 0, lake.stderr
    assert json.loads(lake.stdout) == json.loads(text.stdout)
    assert json.loads(lake.stdout)["measures"]  # the figures are there to compare
