"""A series whose first triage is labelled in full, for the carried-label tests: a golden set
(tests/support/lead_runs.py), three runs of series "main" and one outside it.

At depth 2: commit-1 (FIRST) misses (q1, b), (q2, c) and (q3, d); commit-2 (RERANKED) misses
only (q3, d); commit-3 (RERANKED again) the same; "alone" (RERANKED, no series) the same.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.support.lead_runs import FIRST, RERANKED
from tests.support.series import post_golden_set, post_run
from tests.support.service import Account

NOTE = "PDF only: the manifest leaves it out"

LABELS = {("q1", "b"): "vocabulary-mismatch", ("q2", "c"): "chunk-boundary"}


def make_triage(client: TestClient, lead: Account, run: int, **extra: Any) -> dict[str, Any]:
    answer = client.post(
        f"/api/v1/runs/{run}/triages", headers=lead.headers, json={"depth": 2, "k": 1, **extra}
    )
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def misses_by_pair(client: TestClient, who: Account, triage: int) -> dict[tuple[str, str], Any]:
    answer = client.get(f"/api/v1/triages/{triage}/misses?per_page=100", headers=who.headers)
    assert answer.status_code == 200, answer.text
    return {(m["qid"], m["doc_id"]): m for m in answer.json()["items"]}


def label_every_miss(
    client: TestClient, lead: Account, triage: int, labels: dict[Any, Any]
) -> None:
    for pair, miss in misses_by_pair(client, lead, triage).items():
        category, note = labels[pair] if isinstance(labels[pair], tuple) else (labels[pair], "")
        answer = client.post(
            f"/api/v1/misses/{miss['id']}/label",
            headers=lead.headers,
            json={"category": category, "note": note, "version": miss["version"]},
        )
        assert answer.status_code == 200, answer.text


def triage_detail(client: TestClient, who: Account, triage: int) -> dict[str, Any]:
    answer = client.get(f"/api/v1/triages/{triage}", headers=who.headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def carried_series(client: TestClient, lead: Account) -> dict[str, int]:
    """The golden set, the runs and commit-1's triage ``t1``, labelled in full by ``lead``
    ((q3, d) "not indexed" with ``NOTE``): the ids by name."""
    golden = post_golden_set(client, lead, "carried")
    ids = {"golden": golden}
    for name, body in (("commit-1", FIRST), ("commit-2", RERANKED), ("commit-3", RERANKED)):
        ids[name] = post_run(client, lead, golden, name, body, series="main")
    ids["alone"] = post_run(client, lead, golden, "alone", RERANKED)
    first = make_triage(client, lead, ids["commit-1"])
    assert first["carried_from"] is None
    ids["t1"] = first["id"]
    label_every_miss(
        client,
        lead,
        first["id"],
        {**LABELS, ("q3", "d"): ("not-indexed", NOTE)},
    )
    return ids
