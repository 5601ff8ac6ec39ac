"""``misstriage import-run --log`` of a per-query cluster profile (the output of
docs/sql/unique_clusters.sql): detected by its columns, stored exact at its ks; a bad file is
refused with its line, nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.models import Run
from app.services.imports.clusters import run_clusters
from tests.support.cli import service_cli as cli
from tests.support.log_runs import DEMO

PROFILE = (
    "qid,k,distinct_clusters,results,clustered\nq1,5,3,5,4\nq1,10,6,10,8\nq2,5,2,2,1\nq2,10,2,2,1\n"
)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_profile_from_the_command_line(database_url: str, engine: Engine, tmp_path: Path) -> None:
    golden = cli(database_url, "import-golden-set", "--name", "help", "--qrels", DEMO)
    assert golden.returncode == 0, golden.stderr
    path = tmp_path / "profile.csv"
    path.write_text(PROFILE)
    args = ("import-run", "--golden-set", "help", "--run", path, "--log", "--format", "json")
    imported = cli(database_url, *args, "--name", "lake")
    assert imported.returncode == 0, imported.stderr
    run = json.loads(imported.stdout)
    assert (run["kind"], run["format"], run["queries"], run["lines"]) == (
        "log",
        "cluster_profile",
        2,
        4,
    )
    with Session(engine) as session:
        stored = session.get(Run, run["id"])
        assert stored is not None
        served = run_clusters(session=session, run=stored, ks=(), threshold=4)
    assert served.exact_ks == [5, 10]
    assert [d.mean_distinct for d in served.depths] == [2.5, 4.0]

    path.write_text(PROFILE.replace("q2,10,2,2,1", "q2,10,1,2,1"))
    refused = cli(database_url, *args, "--name", "bad")
    assert refused.returncode == 2, refused.stderr
    assert "profile.csv, line 5: " in refused.stderr
    with Session(engine) as session:
        assert session.exec(select(Run).where(Run.name == "bad")).first() is None
