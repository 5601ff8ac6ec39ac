"""Golden sets and runs pushed through the API, for the series, gate and carried-label tests
(the data of tests/support/lead_runs.py by default)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.support.lead_runs import QRELS, QUERIES
from tests.support.service import Account


def post_golden_set(
    client: TestClient, lead: Account, name: str, qrels: str = QRELS, queries: str = QUERIES
) -> int:
    """A golden set from ``qrels`` and ``queries`` (qid<TAB>text); its id."""
    answer = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": name},
        files={"qrels": ("qrels.txt", qrels), "queries": ("queries.tsv", queries)},
    )
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])


def post_run(
    client: TestClient, lead: Account, golden: int, name: str, body: str, **data: str
) -> int:
    """A TREC run ``body`` imported as ``name`` with the form fields ``data`` (``series``,
    ``meta``); its id."""
    answer = client.post(
        f"/api/v1/golden-sets/{golden}/runs",
        headers=lead.headers,
        data={"name": name, **data},
        files={"run": (f"{name}.trec", body)},
    )
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])
