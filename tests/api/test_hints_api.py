"""Cause hints, duplicate covers and hint accuracy through the API, on both databases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from pydantic import SecretStr

from app.models import Role
from tests.support.hints import EXPECTED_HINTS, import_hint_fixture
from tests.support.service import Account


def _misses(
    client: TestClient, account: Account, triage: int
) -> dict[tuple[str, str], dict[str, Any]]:
    listed = client.get(f"/api/v1/triages/{triage}/misses", headers=account.headers)
    assert listed.status_code == 200
    return {(m["qid"], m["doc_id"]): m for m in listed.json()["items"]}


def test_hints_covers_and_manifest(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead, reviewer = accounts[Role.LEAD], accounts[Role.REVIEWER]
    ids = import_hint_fixture(client, lead.headers, tmp_path)
    golden = client.get(f"/api/v1/golden-sets/{ids['golden']}", headers=lead.headers).json()
    assert golden["report"]["manifest"] == {
        "indexed": 7,
        "not_indexed": 1,
        "relevant_not_indexed": 1,
        "unknown_to_corpus": 0,
    }
    misses = _misses(client, lead, ids["triage"])
    assert {key: m["hint"] for key, m in misses.items() if key in EXPECTED_HINTS} == EXPECTED_HINTS
    covered = misses[("q4", "audit#0")]
    # covered, and still hinted, for the lead who puts it on the queue after all
    assert (covered["state"], covered["covered_by"], covered["hint"]) == (
        "covered",
        "wiki/audit#0",
        "vocabulary-mismatch",
    )
    summary = client.get(f"/api/v1/triages/{ids['triage']}", headers=lead.headers).json()
    assert (summary["misses"], summary["unlabelled"], summary["covered"]) == (4, 3, 1)
    assert summary["closure"].endswith("(1 more covered by a duplicate, not queued)")

    # the queue never hands out the covered miss
    claimed = []
    while True:
        got = client.post(f"/api/v1/triages/{ids['triage']}/claim", headers=reviewer.headers)
        if got.status_code == 204:
            break
        claimed.append(got.json())
        label = client.post(
            f"/api/v1/misses/{got.json()['id']}/label",
            headers=reviewer.headers,
            json={"category": got.json()["hint"], "version": got.json()["version"]},
        )
        assert label.status_code == 200, label.text
    assert {(m["qid"], m["doc_id"]) for m in claimed} == set(EXPECTED_HINTS)
    summary = client.get(f"/api/v1/triages/{ids['triage']}", headers=lead.headers).json()
    assert summary["closes"] is True
    assert summary["closure"] == (
        "1 + 1 + 1 = 3 of 3 misses accounted for: the categories close "
        "(1 more covered by a duplicate, not queued)"
    )

    # a reviewer may not change what is queued; a lead may, both ways
    url = f"/api/v1/triages/{ids['triage']}/covered"
    assert client.post(url, headers=reviewer.headers, json={"include": True}).status_code == 403
    put_on = client.post(url, headers=lead.headers, json={"include": True})
    assert put_on.status_code == 200
    assert put_on.json()["moved"] == 1
    assert put_on.json()["triage"]["closes"] is False
    assert put_on.json()["triage"]["unlabelled"] == 1
    took_off = client.post(url, headers=lead.headers, json={"include": False})
    assert took_off.json()["moved"] == 1
    assert took_off.json()["triage"]["closes"] is True


def test_hint_accuracy_counts_agreement(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead = accounts[Role.LEAD]
    ids = import_hint_fixture(client, lead.headers, tmp_path)
    misses = _misses(client, lead, ids["triage"])
    # a lead labels without a lease: agree on q1 (vocabulary) and q3 (not indexed), and put
    # q2 (hinted chunk boundary, also vocabulary evidence) in vocabulary-mismatch
    for key, category in (
        (("q1", "rate#0"), "vocabulary-mismatch"),
        (("q3", "pdf/sla#0"), "not-indexed"),
        (("q2", "trash#1"), "vocabulary-mismatch"),
    ):
        miss = misses[key]
        done = client.post(
            f"/api/v1/misses/{miss['id']}/label",
            headers=lead.headers,
            json={"category": category, "version": miss["version"]},
        )
        assert done.status_code == 200, done.text
    report = client.get(f"/api/v1/triages/{ids['triage']}/hints", headers=lead.headers).json()
    by_cause = {h["cause"]: h for h in report["hints"]}
    # vocabulary evidence fired on q1 and q2 (the SLA text has sla, uptime and credits),
    # and reviewers chose vocabulary on both
    vocabulary = by_cause["vocabulary-mismatch"]
    assert (vocabulary["hinted"], vocabulary["agreed"], vocabulary["labelled_as_cause"]) == (
        2,
        2,
        2,
    )
    assert vocabulary["precision"] == 1.0
    assert vocabulary["recall"] == 1.0
    chunk = by_cause["chunk-boundary"]
    assert (chunk["hinted"], chunk["agreed"], chunk["precision"], chunk["recall"]) == (
        1,
        0,
        0.0,
        None,
    )
    assert by_cause["not-indexed"]["precision"] == 1.0
    # suggestions: q1 vocabulary (taken), q2 chunk (not taken), q3 not-indexed (taken)
    assert (report["suggested"], report["accepted"]) == (3, 2)


def test_cluster_measures_in_the_metrics(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead = accounts[Role.LEAD]
    ids = import_hint_fixture(client, lead.headers, tmp_path)
    metrics = client.get(f"/api/v1/runs/{ids['run']}/metrics?k=2", headers=lead.headers).json()
    clusters = metrics["clusters"]
    # relevant clusters: q1 rate#0, q2 trash#1, q3 pdf/sla#0, q4 cluster audit-0, found only
    # for q4 (through its wiki copy): 1/4 per query on average; R@2 counts no hit at all
    assert clusters["cluster-R@2"] == 0.25
    assert metrics["measures"]["R@2"] == 0.0
    assert clusters["unique-clusters@2"] == {"median": 2.0, "share_at_most_4": 1.0}
    deep = client.get(f"/api/v1/runs/{ids['run']}/metrics?k=500&depth=500", headers=lead.headers)
    # Deeper than the kept heads: from the cluster ranks stored at import. Every ranking is
    # shorter than 500, so the figures are those of the whole rankings.
    deep_clusters = deep.json()["clusters"]
    assert deep_clusters["cluster-R@500"] == 0.25
    assert deep_clusters["micro"] == {"cluster-R@500": 0.25}
    assert deep_clusters["unique-clusters@500"] == {"median": 2.0, "share_at_most_4": 1.0}


def test_export_leaves_covered_misses_out(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead = accounts[Role.LEAD]
    ids = import_hint_fixture(client, lead.headers, tmp_path)
    for miss in _misses(client, lead, ids["triage"]).values():
        if miss["state"] == "open":
            client.post(
                f"/api/v1/misses/{miss['id']}/label",
                headers=lead.headers,
                json={"category": miss["hint"], "version": miss["version"]},
            ).raise_for_status()
    settings = client.app.state.settings  # type: ignore[attr-defined]
    client.app.state.settings = settings.model_copy(  # type: ignore[attr-defined]
        update={"github_api_url": "http://127.0.0.1:9", "github_token": SecretStr("t0ken")}
    )
    dry = client.post(
        f"/api/v1/triages/{ids['triage']}/exports",
        headers=lead.headers,
        json={"tracker": "github", "target": "acme/search", "dry_run": True},
    )
    assert dry.status_code == 200, dry.text
    # one issue per named cause; the miss covered by a duplicate is no cause of its own
    assert [r["category"] for r in dry.json()["results"]] == [
        "not-indexed",
        "vocabulary-mismatch",
        "chunk-boundary",
    ]
    bodies = " ".join(str(r["body"]) for r in dry.json()["requests"])
    assert "rate#0" in bodies
    assert "audit#0" not in bodies
