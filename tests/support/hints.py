"""A tiny help centre in which each cause hint and a duplicate cover happen, imported through
the API: a golden set with a corpus and an index manifest, one run, one triage at depth 3.

q1 "stop api throttling"      -> rate#0 (says "rate limiting", not "throttling"): vocabulary
q2 "restore deleted project"  -> trash#1 (the continuation of trash#0, which the run found):
                                 chunk boundary
q3 "sla uptime credits"       -> pdf/sla#0 (in the corpus, outside the manifest): not indexed
q4 "export audit log csv"     -> audit#0, missed, but its wiki copy wiki/audit#0 (same
                                 cluster) is in the candidates: covered by a duplicate
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

QUERIES = {
    "q1": "How do I stop API throttling?",
    "q2": "How do I restore a deleted project?",
    "q3": "What SLA uptime credits do we get?",
    "q4": "Export the audit log as CSV",
}
DOCS: list[dict[str, Any]] = [
    {
        "_id": "rate#0",
        "title": "Rate limiting",
        "text": "Each key may send 600 requests a minute.",
        "parent_id": "rate",
        "chunk_index": 0,
    },
    {
        "_id": "trash#0",
        "title": "Deleted projects",
        "text": "A deleted project goes to the Trash.",
        "parent_id": "trash",
        "chunk_index": 0,
    },
    {
        "_id": "trash#1",
        "title": "Trash",
        "text": "Open it within 30 days and choose Bring back.",
        "parent_id": "trash",
        "chunk_index": 1,
    },
    {
        "_id": "pdf/sla#0",
        "title": "Service level agreement",
        "text": "Uptime below 99.9% earns service credits under this SLA.",
    },
    {
        "_id": "audit#0",
        "title": "Audit trail",
        "text": "Download the trail from Settings.",
        "cluster_id": "audit-0",
    },
    {
        "_id": "wiki/audit#0",
        "title": "Audit trail (wiki)",
        "text": "Export the audit log as CSV from Settings.",
        "cluster_id": "audit-0",
    },
    {"_id": "noise#0", "title": "API keys", "text": "Create an API key under Settings."},
    {"_id": "noise#1", "title": "Projects", "text": "Projects group dashboards."},
]
QRELS = [("q1", "rate#0", 2), ("q2", "trash#1", 2), ("q3", "pdf/sla#0", 1), ("q4", "audit#0", 2)]
RUN = {
    "q1": ["noise#0", "noise#1"],
    "q2": ["trash#0", "noise#1"],
    "q3": ["noise#0"],
    "q4": ["wiki/audit#0", "noise#0"],
}
MANIFEST = [d["_id"] for d in DOCS if not d["_id"].startswith("pdf/")]
EXPECTED_HINTS = {
    ("q1", "rate#0"): "vocabulary-mismatch",
    ("q2", "trash#1"): "chunk-boundary",
    ("q3", "pdf/sla#0"): "not-indexed",
}


def import_hint_fixture(client: TestClient, headers: dict[str, str], tmp: Path) -> dict[str, int]:
    """Import the fixture through the API; returns the golden set, run and triage ids."""
    files = {
        "qrels": "".join(f"{q} 0 {d} {g}\n" for q, d, g in QRELS),
        "queries": "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()),
        "corpus": "".join(json.dumps(d) + "\n" for d in DOCS),
        "manifest": "# what the index holds\n" + "\n".join(MANIFEST) + "\n",
    }
    created = client.post(
        "/api/v1/golden-sets",
        headers=headers,
        data={"name": "hints"},
        files={name: (f"{name}.txt", body.encode()) for name, body in files.items()},
    )
    assert created.status_code == 201, created.text
    golden = created.json()
    run_text = "".join(
        f"{q} Q0 {d} {r} {10 - r} fixture\n"
        for q, docs in RUN.items()
        for r, d in enumerate(docs, start=1)
    )
    run = client.post(
        f"/api/v1/golden-sets/{golden['id']}/runs",
        headers=headers,
        data={"name": "fixture"},
        files={"run": ("fixture.trec", run_text.encode())},
    )
    assert run.status_code == 201, run.text
    triage = client.post(
        f"/api/v1/runs/{run.json()['id']}/triages", headers=headers, json={"depth": 3, "k": 2}
    )
    assert triage.status_code == 201, triage.text
    return {"golden": golden["id"], "run": run.json()["id"], "triage": triage.json()["id"]}
