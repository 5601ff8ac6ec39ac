"""A log run imported as its per-query cluster profile (issue 29, part 2): the output of
docs/sql/unique_clusters.sql, run here on DuckDB over Parquet copies of a log and of the demo
corpus, uploaded as CSV or Parquet, gives the clusters table and distribution of the same log
imported line by line, at the ks the SQL was run with; another k is refused, and a bad file is
refused as a whole naming its line, on both databases."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import duckdb  # a dev dependency: its absence is a broken install, not a skipped test
import polars as pl
import pytest
from fastapi.testclient import TestClient

from app.models import Role
from tests.support.log_run_api import demo_golden_set
from tests.support.log_runs import demo_corpus, unjudged_lines
from tests.support.service import Account

SQL = Path(__file__).resolve().parents[2] / "docs" / "sql" / "unique_clusters.sql"
KS = (5, 10, 20, 50)
#: What the SQL does not compute (no tokens) and what it cannot know (the longest ranking
#: beyond the largest k, the detector run its clusters came from): the rest must be equal.
NOT_COMPARED = {"run_id", "depth", "token_estimate", "unknown_results", "exact_ks", "detector_run"}
NOT_COMPARED_AT_K = {"prompt_tokens", "daily_price"}


def _log_lines() -> list[tuple[str, str, float]]:
    """The demo's log queries (tests/support/log_runs.py: repeats, ties, short queries,
    documents absent from the corpus), each ranking's scores made non-increasing down its
    lines, as a log writes a ranking best first (the SQL keeps a repeated document's
    best-ranked occurrence: then the same as misstriage's first line)."""
    rng = random.Random(29)
    per_query: dict[str, list[str]] = {}
    for line in unjudged_lines(demo_corpus()):
        qid, _, doc_id, *_ = line.split()
        per_query.setdefault(qid, []).append(doc_id)
    lines = []
    for qid, docs in per_query.items():
        scores = sorted(
            (rng.choice([9.0, 5.0, 2.5, rng.uniform(0, 10)]) for _ in docs), reverse=True
        )
        lines += [(qid, doc, score) for doc, score in zip(docs, scores, strict=True)]
    return lines


def _sql_profile(tmp: Path, lines: list[tuple[str, str, float]]) -> pl.DataFrame:
    results, documents = tmp / "results.parquet", tmp / "documents.parquet"
    pl.DataFrame(
        lines, schema={"qid": pl.String, "doc_id": pl.String, "score": pl.Float64}, orient="row"
    ).write_parquet(results)
    corpus = demo_corpus()
    pl.DataFrame(
        {"doc_id": list(corpus), "cluster_id": [d.get("cluster_id") for d in corpus.values()]},
        schema={"doc_id": pl.String, "cluster_id": pl.String},
    ).write_parquet(documents)
    connection = duckdb.connect()
    connection.execute(f"CREATE VIEW results AS SELECT * FROM read_parquet('{results}')")
    connection.execute(f"CREATE VIEW documents AS SELECT * FROM read_parquet('{documents}')")
    values = ", ".join(f"({k})" for k in KS)
    connection.execute(f"CREATE VIEW ks AS SELECT * FROM (VALUES {values}) AS t(k)")
    relation = connection.execute(SQL.read_text())
    frame = pl.DataFrame(
        relation.fetchall(), schema=[d[0] for d in relation.description], orient="row"
    )
    connection.close()
    return frame


def _upload(
    client: TestClient, lead: Account, golden_id: int, name: str, path: Path, **data: str
) -> Any:
    return client.post(
        f"/api/v1/golden-sets/{golden_id}/runs",
        headers=lead.headers,
        data={"name": name, **data},
        files={"run": (path.name, path.read_bytes())},
    )


def _clusters(client: TestClient, who: Account, run_id: int, **params: str) -> Any:
    answer = client.get(f"/api/v1/runs/{run_id}/clusters", headers=who.headers, params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _comparable(body: dict[str, Any]) -> dict[str, Any]:
    kept = {key: value for key, value in body.items() if key not in NOT_COMPARED}
    kept["depths"] = [
        {key: value for key, value in d.items() if key not in NOT_COMPARED_AT_K}
        for d in body["depths"]
    ]
    return kept


def test_the_sql_profile_imports_with_the_figures_of_the_raw_log(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead, reviewer = accounts[Role.LEAD], accounts[Role.REVIEWER]
    golden_id = demo_golden_set(client, lead)
    lines = _log_lines()
    raw = tmp_path / "log.trec"
    raw.write_text("".join(f"{q} Q0 {d} 0 {s!r} log\n" for q, d, s in lines))
    answer = _upload(client, lead, golden_id, "raw", raw, kind="log")
    assert answer.status_code == 201, answer.text
    raw_run = answer.json()

    sql = _sql_profile(tmp_path, lines)
    as_csv, as_parquet = tmp_path / "profile.csv", tmp_path / "profile.parquet"
    sql.write_csv(as_csv)
    sql.write_parquet(as_parquet)
    detected = _upload(client, lead, golden_id, "from-csv", as_csv, kind="log")
    assert detected.status_code == 201, detected.text
    named = _upload(
        client, lead, golden_id, "from-parquet", as_parquet, kind="log", format="cluster_profile"
    )
    assert named.status_code == 201, named.text
    for answer in (detected, named):
        run = answer.json()
        assert run["kind"] == "log"
        assert run["format"] == "cluster_profile"
        assert run["queries"] == raw_run["queries"] == 200
        assert run["lines"] == sql.height == 200 * len(KS)
        assert run["keep_depth"] == 0
        assert "per-query cluster profile" in run["report"]["warnings"][0]

    expected = _clusters(client, reviewer, raw_run["id"], k=",".join(map(str, KS)))
    assert expected["exact_ks"] is None
    assert expected["depths"][-1]["short_queries"] > 0  # the edges are exercised
    assert expected["unclustered_results"] > 0
    assert any(d["mean_distinct"] < d["k"] for d in expected["depths"])
    for answer in (detected, named):
        run_id = answer.json()["id"]
        got = _clusters(client, reviewer, run_id)  # no k: the imported ks
        assert got["exact_ks"] == list(KS)
        assert got["detector_run"] is None  # the clusters came from the lake's table
        assert got["token_estimate"] is None
        assert all(d["prompt_tokens"] is None for d in got["depths"])
        assert _comparable(got) == _comparable(expected)
        # Some of the ks, another threshold: the same as the raw log's.
        subset = _clusters(client, reviewer, run_id, k="10,50", threshold="7")
        assert _comparable(subset) == _comparable(
            _clusters(client, reviewer, raw_run["id"], k="10,50", threshold="7")
        )
        # A k the file does not hold is not known.
        refused = client.get(
            f"/api/v1/runs/{run_id}/clusters", headers=reviewer.headers, params={"k": "10,30"}
        )
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["code"] == "invalid_k"
        assert "k = 30" in error["message"]
        assert "exact at k = 5, 10, 20, 50 only" in error["message"]


HEADER = "qid,k,distinct_clusters,results,clustered\n"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("qid,k,distinct_clusters,results\nq1,10,3,3\n", 1, "missing column clustered"),
        (HEADER + "q1,10,3,3,2\nq1,x,3,3,2\n", 3, "k 'x' is not an integer"),
        (HEADER + "q1,10,4,3,2\n", 2, "distinct_clusters must be at most results"),
        (HEADER + "q1,10,3,3,2\nq1,20,2,3,2\n", 3, "disagrees with its row at k=10 (line 2)"),
        (HEADER + "q1,10,3,3,2\nq1,10,3,3,2\n", 3, "a second row for query 'q1' at k=10"),
    ],
)
def test_a_bad_profile_is_refused_whole_naming_file_and_line(
    client: TestClient,
    accounts: dict[Role, Account],
    tmp_path: Path,
    text: str,
    line: int,
    words: str,
) -> None:
    lead = accounts[Role.LEAD]
    golden_id = demo_golden_set(client, lead)
    path = tmp_path / "profile.csv"
    path.write_text(text)
    answer = _upload(client, lead, golden_id, "bad", path, kind="log", format="cluster_profile")
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "bad_input"
    assert error["details"]["file"] == "profile.csv"
    assert error["details"]["line"] == line
    assert words in error["message"]
    assert error["message"].startswith(f"profile.csv, line {line}: ")
    runs = client.get(f"/api/v1/golden-sets/{golden_id}/runs", headers=lead.headers)
    assert runs.json()["total"] == 0  # all or nothing


def test_a_profile_is_a_log_run_only(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead = accounts[Role.LEAD]
    golden_id = demo_golden_set(client, lead)
    path = tmp_path / "profile.csv"
    path.write_text(HEADER + "q1,10,3,3,2\n")
    answer = _upload(client, lead, golden_id, "judged", path)  # kind judged, the default
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "profile_is_log"
    parquet = tmp_path / "bad.parquet"
    pl.DataFrame({"qid": ["q1"], "k": [10], "distinct_clusters": [2]}).write_parquet(parquet)
    answer = _upload(client, lead, golden_id, "p", parquet, kind="log", format="cluster_profile")
    assert answer.status_code == 400, answer.text
    assert "missing columns results, clustered" in answer.json()["error"]["message"]
