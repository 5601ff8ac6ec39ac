"""Double review from the command line: a triage with overlap, an adjudicator account."""

from __future__ import annotations

import json

from sqlmodel import Session, select

from app.db import make_engine
from app.models import User
from tests.support.cli import service_cli as cli
from tests.support.samples import QRELS, QUERIES, RUN
from tests.support.service import WriteFile, make_settings


def test_triage_with_overlap_and_an_adjudicator(database_url: str, write_file: WriteFile) -> None:
    made = cli(
        database_url,
        *("create-user", "--email", "adj@example.com", "--password", "long enough"),
        *("--role", "reviewer", "--adjudicator"),
    )
    assert made.returncode == 0, made.stderr
    engine = make_engine(make_settings(database_url))
    with Session(engine) as session:
        user = session.exec(select(User).where(User.email == "adj@example.com")).one()
        assert (user.role, user.adjudicator) == ("reviewer", True)
    engine.dispose()
    qrels, queries = write_file("qrels.txt", QRELS), write_file("queries.jsonl", QUERIES)
    golden = cli(
        database_url, "import-golden-set", "--name", "h", "--qrels", qrels, "--queries", queries
    )
    assert golden.returncode == 0, golden.stderr
    run = cli(
        database_url,
        *("import-run", "--golden-set", "h", "--name", "bm25", "--run", write_file("r.trec", RUN)),
        *("--format", "json"),
    )
    run_id = str(json.loads(run.stdout)["id"])
    for bad in (("--reviewers", "4"), ("--fraction", "nan"), ("--fraction", "1.5")):
        refused = cli(database_url, "triage", "--run", run_id, "--depth", "2", "--k", "2", *bad)
        assert refused.returncode == 2, bad
    triage = cli(
        database_url,
        *("triage", "--run", run_id, "--depth", "2", "--k", "2"),
        *("--reviewers", "2", "--fraction", "0.5", "--seed", "3", "--format", "json"),
    )
    assert triage.returncode == 0, triage.stderr
    assert json.loads(triage.stdout)["overlap"] == {"reviewers": 2, "fraction": 0.5, "seed": 3}
