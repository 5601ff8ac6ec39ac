"""k above depth is refused by the CLI as by the web pages and the API (one rule:
app.eval.conventions.check_cutoffs): exit 2, one clear line, no traceback, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import evaluate_cli, service_cli
from tests.support.samples import QRELS, RUN
from tests.support.service import WriteFile

SQLITE = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
MESSAGE = "k (20) is larger than depth (10)"


def test_evaluate_refuses_k_above_depth(write_file: WriteFile) -> None:
    qrels, run = write_file("qrels.txt", QRELS), write_file("run.trec", RUN)
    args = ["evaluate", "--qrels", qrels, "--run", f"r={run}"]
    refused = evaluate_cli(*args, "--k", "20", "--depth", "10")
    assert refused.returncode == 2
    assert MESSAGE in refused.stderr
    assert "Traceback" not in refused.stderr
    equal = evaluate_cli(*args, "--k", "10", "--depth", "10")
    assert equal.returncode == 0, equal.stderr


@SQLITE
def test_triage_refuses_k_above_depth(database_url: str, write_file: WriteFile) -> None:
    def cli(*args: str | Path) -> str:
        result = service_cli(database_url, *args)
        assert result.returncode == 0, result.stderr
        return result.stdout

    cli("import-golden-set", "--name", "g", "--qrels", write_file("q.txt", QRELS))
    cli("import-run", "--golden-set", "g", "--name", "r", "--run", write_file("r.trec", RUN))
    refused = service_cli(database_url, "triage", "--run", "1", "--k", "20", "--depth", "10")
    assert refused.returncode == 2
    assert MESSAGE in refused.stderr
    assert "Traceback" not in refused.stderr
    listed = service_cli(database_url, "triage", "--run", "1", "--depth", "10", "--k", "10")
    assert listed.returncode == 0, listed.stderr
    assert "depth 10" in listed.stdout
