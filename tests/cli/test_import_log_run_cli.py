"""``misstriage import-run --log``: a log run from the command line, measured by the service
with the same figures as the offline ``misstriage clusters`` over the same files."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.models import Run
from app.services.imports.clusters import run_clusters
from tests.support.cli import service_cli as cli
from tests.support.log_runs import DEMO, write_log_run


def test_a_log_run_from_the_command_line(database_url: str, engine: Engine, tmp_path: Path) -> None:
    golden = cli(database_url, "import-golden-set", "--name", "help", "--qrels", DEMO)
    assert golden.returncode == 0, golden.stderr
    path = write_log_run(tmp_path / "query-log.trec")
    imported = cli(
        database_url,
        "import-run",
        "--golden-set",
        "help",
        "--name",
        "log",
        "--run",
        path,
        "--log",
        "--format",
        "json",
    )
    assert imported.returncode == 0, imported.stderr
    run = json.loads(imported.stdout)
    assert run["kind"] == "log"
    assert run["queries"] == 267
    refused = cli(database_url, "triage", "--run", str(run["id"]))
    assert refused.returncode != 0
    assert "log run" in refused.stderr

    offline = cli(
        database_url,
        "clusters",
        "--run",
        path,
        "--corpus",
        DEMO / "corpus.jsonl",
        "--price-per-million",
        "2",
        "--queries-per-day",
        "500",
        "--format",
        "json",
    )
    assert offline.returncode == 0, offline.stderr
    document = json.loads(offline.stdout)
    with Session(engine) as session:
        stored = session.get(Run, run["id"])
        assert stored is not None
        served = run_clusters(
            session=session,
            run=stored,
            ks=(10, 20, 30, 40, 50),
            threshold=4,
            price_per_mtok=2,
            queries_per_day=500,
        ).model_dump(mode="json")
    for key in ("queries", "threshold", "unclustered_results", "unknown_results"):
        assert served[key] == document[key], key
    assert served["depths"] == document["depths"]
