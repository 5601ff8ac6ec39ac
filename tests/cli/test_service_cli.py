"""The service commands as a user runs them, against a real database: in the test's process
(tests/support/cli.py), and once as a real process through the console script."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import real_misstriage
from tests.support.cli import service_cli as cli
from tests.support.samples import QRELS, QUERIES, RUN
from tests.support.service import WriteFile


def test_users_tokens_imports_and_triage(database_url: str, write_file: WriteFile) -> None:
    created = cli(
        database_url,
        "create-user",
        "--email",
        "Lead@Example.com",
        "--password",
        "long enough",
        "--role",
        "lead",
    )
    assert created.returncode == 0, created.stderr
    again = cli(
        database_url,
        "create-user",
        "--email",
        "lead@example.com",
        "--password",
        "long enough",
        "--role",
        "lead",
    )
    assert again.returncode == 1
    assert (
        again.stderr.strip()
        == "misstriage: error: a user with email lead@example.com exists already"
    )
    token = cli(database_url, "create-token", "--email", "lead@example.com")
    assert token.returncode == 0
    assert token.stdout.startswith("mt_")
    assert len(token.stdout.strip().splitlines()) == 1

    qrels, queries = write_file("qrels.txt", QRELS), write_file("queries.jsonl", QUERIES)
    golden = cli(
        database_url,
        "import-golden-set",
        "--name",
        "help",
        "--qrels",
        qrels,
        "--queries",
        queries,
        "--format",
        "json",
    )
    assert golden.returncode == 0, golden.stderr
    assert json.loads(golden.stdout)["relevant"] == 3
    run = cli(
        database_url,
        "import-run",
        "--golden-set",
        "help",
        "--name",
        "bm25",
        "--run",
        write_file("bm25.trec", RUN),
        "--format",
        "json",
    )
    assert run.returncode == 0, run.stderr
    run_id = json.loads(run.stdout)["id"]
    triage = cli(
        database_url, "triage", "--run", str(run_id), "--depth", "2", "--k", "2", "--format", "json"
    )
    assert json.loads(triage.stdout)["misses"] == 2

    bad = cli(
        database_url,
        "import-run",
        "--golden-set",
        "help",
        "--name",
        "bad",
        "--run",
        write_file("bad.trec", "q1 Q0 a 1 x t\n"),
    )
    assert bad.returncode == 2  # bad input: exit 2, like evaluate
    assert bad.stderr.strip() == "misstriage: error: bad.trec, line 1: score 'x' is not a number"


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_production_refuses_the_default_secret(database_url: str) -> None:
    # A real process through the installed console script: the settings are read from the
    # environment the process starts with, and the refusal is its exit status and stderr.
    env = {"DATABASE_URL": database_url, "MISSTRIAGE_ENVIRONMENT": "production"}
    result = real_misstriage("db", "upgrade", env=env, unset=["MISSTRIAGE_SECRET_KEY"], timeout=60)
    assert result.returncode == 2
    assert "MISSTRIAGE_SECRET_KEY must be set" in result.stderr
    assert "Traceback" not in result.stderr
