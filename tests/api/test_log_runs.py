"""Log runs (issue 15, item 3): a run of production query-log results imported without
judgments, measured by unique-clusters@k over every query; and a judged run's cluster measures
over every query it answers, at a k deeper than the kept head. Every figure is compared with
the plain-Python oracle of tests/support/log_runs.py, on both databases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.main import create_app
from app.models import Role, RunClusterTotals
from app.settings import Settings
from tests.support.log_run_api import demo_golden_set, import_run, same_figures
from tests.support.log_runs import (
    demo_corpus,
    oracle,
    rankings,
    unjudged_lines,
    write_log_run,
)
from tests.support.service import Account, make_settings

KS = (10, 20, 30, 40, 50)
PRICE, PER_DAY = 3.0, 20_000.0
KEEP_DEPTH = 20  # so that k = 30..60 lies deeper than the kept head of a judged run


@pytest.fixture
def shallow_client(database_url: str, engine: Engine) -> Iterator[TestClient]:
    """The service keeping only the first 20 results per query (the review head)."""
    settings: Settings = make_settings(database_url, keep_depth=KEEP_DEPTH)
    with TestClient(create_app(settings, engine), base_url="http://testserver") as test_client:
        yield test_client


def test_a_log_run_imports_every_query_and_its_clusters_equal_the_oracle(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead, reviewer = accounts[Role.LEAD], accounts[Role.REVIEWER]
    golden_id = demo_golden_set(client, lead)
    path = write_log_run(tmp_path / "query-log.trec")
    run = import_run(client, lead, golden_id, path, kind="log")
    ranked = rankings(path.read_text())
    assert len(ranked) == 67 + 200
    assert run["kind"] == "log"
    assert run["queries"] == 267  # judged or not: none dropped
    assert run["report"]["unknown_queries"] == 0
    lines = len(path.read_text().splitlines())
    assert run["report"]["duplicates_dropped"] == lines - sum(len(r) for r in ranked.values())
    assert run["report"]["duplicates_dropped"] > 0  # the generator repeats documents

    corpus = demo_corpus()
    answer = client.get(
        f"/api/v1/runs/{run['id']}/clusters",
        headers=reviewer.headers,
        params={"price_per_mtok": PRICE, "queries_per_day": PER_DAY},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    expected = oracle(ranked, corpus, ks=KS, threshold=4, price=PRICE, per_day=PER_DAY)
    same_figures(body, expected)
    assert body["kind"] == "log"
    assert body["token_estimate"]
    # The data exercises what the measures are about: repeats, short lists, strangers.
    for d in body["depths"]:
        returned = sum(min(d["k"], len(r)) for r in ranked.values()) / len(ranked)
        assert d["mean_distinct"] < returned  # copies of one cluster in the top k
    assert body["depths"][-1]["short_queries"] > 0
    assert body["unknown_results"] > 0

    # Any k up to the run's depth (and past it: what was returned), another threshold.
    deep = client.get(
        f"/api/v1/runs/{run['id']}/clusters",
        headers=reviewer.headers,
        params={"k": "1,7,64,99,100,150", "threshold": 9},
    )
    assert deep.status_code == 200, deep.text
    same_figures(deep.json(), oracle(ranked, corpus, ks=(1, 7, 64, 99, 100, 150), threshold=9))
    assert all(d["daily_price"] is None for d in deep.json()["depths"])


def test_a_log_run_refuses_metrics_and_triage_cleanly(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead = accounts[Role.LEAD]
    golden_id = demo_golden_set(client, lead)
    path = tmp_path / "log.trec"
    path.write_text("\n".join(unjudged_lines(demo_corpus())[:300]) + "\n")
    run = import_run(client, lead, golden_id, path, kind="log")
    ranked = rankings(path.read_text())
    # Fewer documents than the corpus holds: the corpus is asked for those alone.
    assert len({d for r in ranked.values() for d in r}) < len(demo_corpus())
    measured = client.get(f"/api/v1/runs/{run['id']}/clusters", headers=lead.headers)
    same_figures(measured.json(), oracle(ranked, demo_corpus(), ks=KS, threshold=4))
    refusals = [
        client.get(f"/api/v1/runs/{run['id']}/metrics", headers=lead.headers),
        client.get(f"/api/v1/runs/{run['id']}/queries", headers=lead.headers),
        client.post(f"/api/v1/runs/{run['id']}/triages", headers=lead.headers, json={}),
    ]
    for answer in refusals:
        assert answer.status_code == 409, answer.text
        error = answer.json()["error"]
        assert error["code"] == "log_run"
        assert "without judgments" in error["message"]
    # The same file as a judged run is refused: none of its queries is a golden query.
    judged = client.post(
        f"/api/v1/golden-sets/{golden_id}/runs",
        headers=lead.headers,
        data={"name": "judged"},
        files={"run": (path.name, path.read_bytes())},
    )
    assert judged.status_code == 400, judged.text
    bad_kind = client.post(
        f"/api/v1/golden-sets/{golden_id}/runs",
        headers=lead.headers,
        data={"name": "x", "kind": "logs"},
        files={"run": (path.name, path.read_bytes())},
    )
    assert bad_kind.status_code == 422
    bad_k = client.get(f"/api/v1/runs/{run['id']}/clusters?k=0,10", headers=lead.headers)
    assert bad_k.status_code == 422
    assert bad_k.json()["error"]["code"] == "invalid_k"


def test_a_judged_runs_clusters_count_every_query_at_any_depth(
    shallow_client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    client, lead = shallow_client, accounts[Role.LEAD]
    golden_id = demo_golden_set(client, lead)
    path = write_log_run(tmp_path / "bm25-and-more.trec")  # 67 judged queries, 200 not
    run = import_run(client, lead, golden_id, path)
    assert run["kind"] == "judged"
    assert run["keep_depth"] == KEEP_DEPTH
    assert run["report"]["unknown_queries"] == 200  # not measured by recall ...
    metrics = client.get(f"/api/v1/runs/{run['id']}/metrics?k=10", headers=lead.headers)
    assert metrics.status_code == 200, metrics.text
    ks = (10, 30, 45, 60)  # deeper than the 20 results kept per query
    answer = client.get(
        f"/api/v1/runs/{run['id']}/clusters",
        headers=lead.headers,
        params={"k": ",".join(map(str, ks))},
    )
    assert answer.status_code == 200, answer.text
    # ... but counted by the cluster measures, judged or not.
    same_figures(
        answer.json(), oracle(rankings(path.read_text()), demo_corpus(), ks=ks, threshold=4)
    )
    assert answer.json()["queries"] == 267

    # A run imported before the traces were stored has none: a clear 409, not a guess.
    with Session(engine) as session, session.begin():
        session.execute(delete(RunClusterTotals).where(RunClusterTotals.run_id == run["id"]))
    older = client.get(f"/api/v1/runs/{run['id']}/clusters", headers=lead.headers)
    assert older.status_code == 409
    assert older.json()["error"]["code"] == "clusters_not_stored"
