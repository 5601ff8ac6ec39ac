"""Issue 15: with an index manifest the diagnosis is evidence, and each query says why."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from app.models import Role
from tests.support.service import Account

QRELS = b"q1 0 a 1\nq1 0 b 1\nq2 0 c 1\n"
CORPUS = "".join(
    json.dumps({"_id": d, "title": d, "text": f"text of {d}"}) + "\n" for d in ("a", "b", "c")
).encode()
# q1: a first, b never returned (and not in the index); q2: c never returned (in the index).
RUN = b"q1 Q0 a 1 9 t\nq1 Q0 x 2 8 t\nq2 Q0 y 1 9 t\n"


def _import(client: TestClient, lead: Account, manifest: bytes | None) -> int:
    files = {"qrels": ("qrels.txt", QRELS), "corpus": ("corpus.jsonl", CORPUS)}
    if manifest is not None:
        files["manifest"] = ("index-ids.txt", manifest)
    golden = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": f"manifest {manifest is not None}"},
        files=files,
    )
    assert golden.status_code == 201, golden.text
    run = client.post(
        f"/api/v1/golden-sets/{golden.json()['id']}/runs",
        headers=lead.headers,
        data={"name": "bm25"},
        files={"run": ("bm25.trec", RUN)},
    )
    assert run.status_code == 201, run.text
    run_id: int = run.json()["id"]
    return run_id


def test_ingestion_only_when_the_misses_are_outside_the_manifest(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    lead = accounts[Role.LEAD]
    run_id = _import(client, lead, b"a\nc\n")
    rows = client.get(f"/api/v1/runs/{run_id}/queries?k=1&depth=5", headers=lead.headers)
    assert rows.status_code == 200, rows.text
    by_qid = {row["qid"]: row for row in rows.json()["items"]}
    assert by_qid["q1"]["diagnosis"] == "ingestion"
    assert by_qid["q1"]["reason"] == (
        "R@5 0.50 < 0.8 and nDCG_cand@1 1.00 ≥ 0.5; 1 of 1 miss not in the index"
    )
    # c is in the index: the first stage did not find it, whatever nDCG says
    assert by_qid["q2"]["diagnosis"] == "candidate_generation"
    assert by_qid["q2"]["reason"] == (
        "R@5 0.00 < 0.8 and nDCG_cand@1 undefined (no relevant document in the top 5); "
        "1 of 1 miss in the index"
    )
    metrics = client.get(f"/api/v1/runs/{run_id}/metrics?k=1&depth=5", headers=lead.headers)
    body = metrics.json()
    assert body["diagnosis"] == {
        "ranking": 0,
        "candidate_generation": 1,
        "ingestion": 1,
        "fine": 0,
    }
    assert body["diagnosis_evidence"] is True
    assert body["no_relevant_candidate"] == 1


def test_the_corpus_is_the_index_without_a_manifest(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    lead = accounts[Role.LEAD]
    run_id = _import(client, lead, None)
    rows = client.get(f"/api/v1/runs/{run_id}/queries?k=1&depth=5", headers=lead.headers)
    diagnoses = {row["qid"]: row["diagnosis"] for row in rows.json()["items"]}
    assert diagnoses == {"q1": "candidate_generation", "q2": "candidate_generation"}
