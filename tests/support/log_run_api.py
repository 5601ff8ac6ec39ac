"""What the log-run API tests share: the demo golden set uploaded, a run imported, and two
clusters answers compared figure by figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.log_runs import DEMO
from tests.support.service import Account


def demo_golden_set(client: TestClient, lead: Account) -> int:
    """The demo golden set (qrels, queries, corpus with cluster ids) through the API: its id."""
    answer = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": "helpcentre"},
        files={
            name: (f"{name}.{ext}", (DEMO / f"{name}.{ext}").read_bytes())
            for name, ext in (("qrels", "tsv"), ("queries", "jsonl"), ("corpus", "jsonl"))
        },
    )
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])


def import_run(client: TestClient, lead: Account, golden_id: int, path: Path, **data: str) -> Any:
    """The run file at ``path`` imported (named after it), its 201 answer."""
    answer = client.post(
        f"/api/v1/golden-sets/{golden_id}/runs",
        headers=lead.headers,
        data={"name": path.stem, **data},
        files={"run": (path.name, path.read_bytes())},
    )
    assert answer.status_code == 201, answer.text
    return answer.json()


def same_figures(answer: dict[str, Any], expected: dict[str, Any]) -> None:
    """Every figure equal; floats to 1e-12 (the service sums in another order)."""
    for key in ("queries", "depth", "threshold", "unclustered_results", "unknown_results"):
        assert answer[key] == expected[key], key
    assert [d["k"] for d in answer["depths"]] == [d["k"] for d in expected["depths"]]
    for got, want in zip(answer["depths"], expected["depths"], strict=True):
        for key, value in want.items():
            if isinstance(value, float):
                assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), (want["k"], key)
            else:
                assert got[key] == value, (want["k"], key)
