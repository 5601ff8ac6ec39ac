"""Detector runs through the API (issue 27), on both databases: a lead runs detection over a
golden set's corpus of generated copies with known truth, reviewers judge the calibration
sample on the pair-review queue (lease, stale label, skip, audit), the lead applies a
threshold and the run's cluster measures change and name the detector run; a side file of
ids imports as an uncalibrated run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.models import Role
from tests.support.detector_data import copies_files, review_all
from tests.support.service import Account


def _setup(client: TestClient, lead: Account, tmp_path: Path) -> tuple[int, int, dict[str, str]]:
    corpus, qrels, queries, run, truth = copies_files(tmp_path)
    with corpus.open("rb") as c, qrels.open("rb") as q, queries.open("rb") as qs:
        made = client.post(
            "/api/v1/golden-sets",
            data={"name": "copies"},
            files={"qrels": q, "queries": qs, "corpus": c},
            headers=lead.headers,
        )
    assert made.status_code == 201, made.text
    golden = made.json()["id"]
    with run.open("rb") as r:
        imported = client.post(
            f"/api/v1/golden-sets/{golden}/runs",
            data={"name": "bm25"},
            files={"run": r},
            headers=lead.headers,
        )
    assert imported.status_code == 201, imported.text
    return golden, imported.json()["id"], truth


def test_detect_review_apply(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead, reviewer = accounts[Role.LEAD], accounts[Role.REVIEWER]
    golden, run_id, truth = _setup(client, lead, tmp_path)
    before = client.get(f"/api/v1/runs/{run_id}/metrics?depth=10&k=5", headers=lead.headers).json()
    assert before["clusters"] is not None
    assert "detector_run" not in before["clusters"]  # no cluster ids: nothing to name

    assert (
        client.post(
            f"/api/v1/golden-sets/{golden}/detector-runs", json={}, headers=reviewer.headers
        ).status_code
        == 403
    )
    made = client.post(
        f"/api/v1/golden-sets/{golden}/detector-runs",
        json={"threshold": 0.8, "per_band": 5},
        headers=lead.headers,
    )
    assert made.status_code == 201, made.text
    detection: dict[str, Any] = made.json()
    assert detection["state"] == "reviewing"
    assert detection["source"] == "detector"
    assert detection["pairs"] > 0
    assert detection["candidate_recall"]["how"] == "exact"
    assert detection["candidate_recall"]["value"] == 1.0
    assert sum(b["pairs"] for b in detection["bands"]) == detection["pairs"]
    assert all(b["sampled"] == min(b["pairs"], 5) for b in detection["bands"])
    detector = detection["id"]

    # the queue: a lease each, a stale label refused and kept, a skip goes to the others
    first = client.post(f"/api/v1/detector-runs/{detector}/claim", headers=reviewer.headers).json()
    again = client.post(f"/api/v1/detector-runs/{detector}/claim", headers=reviewer.headers).json()
    assert again["id"] == first["id"]
    other = client.post(f"/api/v1/detector-runs/{detector}/claim", headers=lead.headers).json()
    assert other["id"] != first["id"]
    stale = client.post(
        f"/api/v1/pairs/{first['id']}/label",
        json={"same": True, "version": first["version"] + 1},
        headers=reviewer.headers,
    )
    assert stale.status_code == 409
    assert stale.json()["error"]["code"] == "stale_version"
    skipped = client.post(f"/api/v1/pairs/{first['id']}/skip", json={}, headers=reviewer.headers)
    assert skipped.status_code == 200
    client.post(f"/api/v1/pairs/{other['id']}/release", headers=lead.headers)
    events = client.get(f"/api/v1/pairs/{first['id']}/events", headers=lead.headers).json()
    assert [e["action"] for e in events["items"]] == ["conflict", "skip"]
    assert events["items"][0]["after"]["same"] is True
    assert events["items"][0]["after"]["version"] == first["version"] + 1
    assert events["items"][0]["before"]["version"] == first["version"]

    reviewed = review_all(client, reviewer, detector, truth)
    reviewed += review_all(client, lead, detector, truth)  # the skipped pair
    table = client.get(f"/api/v1/detector-runs/{detector}", headers=lead.headers).json()
    assert table["reviewed"] == table["sampled"] == reviewed
    at_08 = next(t for t in table["thresholds"] if abs(t["threshold"] - 0.8) < 1e-9)
    assert at_08["precision"]["value"] == 1.0
    assert at_08["recall"]["value"] is not None

    applied = client.post(
        f"/api/v1/detector-runs/{detector}/apply", json={"threshold": 0.8}, headers=lead.headers
    )
    assert applied.status_code == 200, applied.text
    assert applied.json()["state"] == "applied"
    after = client.get(f"/api/v1/runs/{run_id}/metrics?depth=10&k=5", headers=lead.headers).json()
    ref = after["clusters"]["detector_run"]
    assert ref["id"] == detector
    assert ref["threshold"] == 0.8
    assert ref["sentence"].startswith(
        f"clusters from detector run {detector} (J >= 0.80): precision 1.00"
    )
    # every copy was returned first: fewer distinct clusters in the top 5 than before
    k5 = "unique-clusters@5"
    assert after["clusters"][k5]["median"] < before["clusters"][k5]["median"]
    profile = client.get(f"/api/v1/runs/{run_id}/clusters?k=5", headers=lead.headers).json()
    assert profile["detector_run"]["id"] == detector


def test_side_file_imports_as_a_run(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead = accounts[Role.LEAD]
    golden, run_id, truth = _setup(client, lead, tmp_path)
    lines = ["doc_id,cluster_id"] + [f"{d},g{g}" for d, g in sorted(truth.items())]
    ids = tmp_path / "ids.csv"
    ids.write_text("\n".join(lines) + "\n")
    with ids.open("rb") as f:
        made = client.post(
            f"/api/v1/golden-sets/{golden}/detector-runs/import",
            files={"ids": ("ids\x1b.csv", f)},  # a name as a run's source is kept
            headers=lead.headers,
        )
    assert made.status_code == 201, made.text
    assert made.json()["parameters"]["file"] == "ids?.csv"
    assert made.json()["source"] == "imported"
    assert made.json()["state"] == "applied"
    metrics = client.get(f"/api/v1/runs/{run_id}/metrics?depth=10&k=5", headers=lead.headers).json()
    assert metrics["clusters"]["detector_run"]["sentence"].endswith(
        "(imported with ids?.csv): not calibrated"
    )
    bad = tmp_path / "bad.csv"
    bad.write_text("doc_id,cluster_id\nnot-a-doc,c1\n")
    with bad.open("rb") as f:
        refused = client.post(
            f"/api/v1/golden-sets/{golden}/detector-runs/import",
            files={"ids": ("bad.csv", f)},
            headers=lead.headers,
        )
    assert refused.status_code == 422
    assert "not-a-doc" in refused.json()["error"]["message"]
    runs = client.get(f"/api/v1/golden-sets/{golden}/detector-runs", headers=lead.headers).json()
    assert runs["total"] == 1


def test_a_corpus_past_the_limit_is_refused_with_what_to_do(
    client: TestClient,
    accounts: dict[Role, Account],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.services.dedup import detector_runs

    lead = accounts[Role.LEAD]
    golden, _, _ = _setup(client, lead, tmp_path)
    monkeypatch.setattr(detector_runs, "MAX_DOCUMENTS", 10)
    refused = client.post(
        f"/api/v1/golden-sets/{golden}/detector-runs", json={}, headers=lead.headers
    )
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "corpus_too_large"
    assert "misstriage dedup" in refused.json()["error"]["message"]
    empty = client.post(
        "/api/v1/golden-sets", data={"name": "no corpus"},
        files={"qrels": ("q.tsv", "q1\t0\td1\t1\n")}, headers=lead.headers,
    )  # fmt: skip
    assert empty.status_code == 201, empty.text
    none = client.post(
        f"/api/v1/golden-sets/{empty.json()['id']}/detector-runs", json={}, headers=lead.headers
    )
    assert none.status_code == 409
    assert none.json()["error"]["code"] == "no_corpus"


def test_thresholds_that_would_make_every_pair_a_candidate_are_refused(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    """Below J 0.5 (or pairs kept below 0.3) the LSH bands make nearly every pair of a
    corpus a candidate, so memory would grow as its square: refused, saying the range."""
    lead = accounts[Role.LEAD]
    golden, _, _ = _setup(client, lead, tmp_path)
    for body in ({"threshold": 0.3}, {"threshold": 0.6, "near": 0.45}, {"near": 0.6}):
        refused = client.post(
            f"/api/v1/golden-sets/{golden}/detector-runs", json=body, headers=lead.headers
        )
        assert refused.status_code == 422, body
        assert refused.json()["error"]["code"] in {"invalid_near", "validation_error"}, body
