"""A log run's import streams (issue 29): a Parquet log with its own column names, a gzip
TREC log, and a log whose queries' lines are not together (read whole) all store the traces
the TREC file's import stores, and the clusters answer is the oracle's, on both databases."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest
from fastapi.testclient import TestClient

from app.eval import streaming
from app.models import Role
from tests.support.log_run_api import demo_golden_set, import_run, same_figures
from tests.support.log_runs import demo_corpus, oracle, rankings, write_log_run
from tests.support.service import Account

KS = (1, 5, 10, 30)


def _clusters(client: TestClient, lead: Account, run_id: int) -> dict[str, object]:
    answer = client.get(
        f"/api/v1/runs/{run_id}/clusters",
        headers=lead.headers,
        params={"k": ",".join(map(str, KS))},
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, object] = answer.json()
    return body


def test_every_form_of_a_log_stores_the_same_traces(
    client: TestClient,
    accounts: dict[Role, Account],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(streaming, "BLOCK_BYTES", 4096)  # many blocks, queries across them
    lead = accounts[Role.LEAD]
    golden_id = demo_golden_set(client, lead)
    trec = write_log_run(tmp_path / "log.trec")
    text = trec.read_text()
    expected = oracle(rankings(text), demo_corpus(), ks=KS, threshold=4)

    gz = tmp_path / "log-gz.trec.gz"
    gz.write_bytes(gzip.compress(trec.read_bytes()))
    lines = text.splitlines(keepends=True)
    mixed = tmp_path / "log-mixed.trec"  # the first query's first line moved to the end
    mixed.write_text("".join(lines[1:] + lines[:1]))
    frame = pl.read_csv(
        trec,
        separator=" ",
        has_header=False,
        new_columns=["query_id", "q0", "docid", "position", "bm25", "tag"],
        schema_overrides={"query_id": pl.String, "docid": pl.String},
    )
    parquet = tmp_path / "log-lake.parquet"
    frame.select("query_id", "docid", "bm25").write_parquet(parquet, row_group_size=500)

    first = import_run(client, lead, golden_id, trec, kind="log")
    same_figures(_clusters(client, lead, first["id"]), expected)
    for path, extra in (
        (gz, {}),
        (mixed, {}),
        (parquet, {"columns": "qid=query_id, doc_id=docid, score=bm25"}),
    ):
        run = import_run(client, lead, golden_id, path, kind="log", **extra)
        for key in ("queries", "lines"):
            assert run[key] == first[key], (path.name, key)
        assert run["report"]["duplicates_dropped"] == first["report"]["duplicates_dropped"]
        same_figures(_clusters(client, lead, run["id"]), expected)
    assert run["format"] == "parquet"


def test_bad_columns_are_a_clear_error(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead = accounts[Role.LEAD]
    golden_id = demo_golden_set(client, lead)
    parquet = tmp_path / "lake.parquet"
    pl.DataFrame({"query_id": ["q1"], "docid": ["d1"], "bm25": [1.0]}).write_parquet(parquet)
    for columns, code, words in (
        (
            "",
            "bad_input",
            "no column 'qid', 'doc_id', 'score' (the file has: query_id, docid, bm25)",
        ),
        ("qid=query_id, doc=docid", "invalid_columns", "expected field=column pairs"),
        ("qid=a, qid=b", "invalid_columns", "qid is named twice"),
    ):
        answer = client.post(
            f"/api/v1/golden-sets/{golden_id}/runs",
            headers=lead.headers,
            data={"name": "lake", "kind": "log", "columns": columns},
            files={"run": (parquet.name, parquet.read_bytes())},
        )
        assert answer.status_code in (400, 422), answer.text
        error = answer.json()["error"]
        assert error["code"] == code, error
        assert words in error["message"], error
    # columns named for a file that has none (a TREC run): said, not ignored
    trec = client.post(
        f"/api/v1/golden-sets/{golden_id}/runs",
        headers=lead.headers,
        data={"name": "lake", "kind": "log", "columns": "qid=query_id"},
        files={"run": ("run.trec", b"q1 Q0 d1 1 1.0 t\n")},
    )
    assert trec.status_code == 422, trec.text
    assert trec.json()["error"]["code"] == "invalid_columns"
    assert "not a Parquet file" in trec.json()["error"]["message"]
    listed = client.get(f"/api/v1/golden-sets/{golden_id}/runs", headers=lead.headers)
    assert listed.json()["total"] == 0  # nothing half-imported
