"""The service commands as a user runs them: real processes against a real database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.api.test_imports_api import QRELS, QUERIES, RUN
from tests.conftest import TEST_SECRET, WriteFile


def cli(database_url: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "MISSTRIAGE_ENVIRONMENT": "test",
        "MISSTRIAGE_SECRET_KEY": TEST_SECRET,
    }
    return subprocess.run(
        [sys.executable, "-m", "app", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


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
    env = {**os.environ, "DATABASE_URL": database_url, "MISSTRIAGE_ENVIRONMENT": "production"}
    env.pop("MISSTRIAGE_SECRET_KEY", None)
    result = subprocess.run(
        [sys.executable, "-m", "app", "db", "upgrade"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2
    assert "MISSTRIAGE_SECRET_KEY must be set" in result.stderr
    assert "Traceback" not in result.stderr
