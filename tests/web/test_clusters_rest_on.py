"""Every cluster figure on the pages names the detector run it rests on, with its error
rates (issue 27, item 3), on both databases: the run page, the run's clusters page, a
triage's covered misses on the dashboard and in the backlog. Applying another threshold
moves the run's figures to it; the triage keeps the clusters it was made with."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from app.models import Role
from tests.support.detector_data import review_all
from tests.support.dupe_corpus import make_corpus
from tests.support.service import Account, get, login


def _golden_and_run(client: TestClient, lead: Account) -> tuple[int, int, dict[str, str]]:
    """Copies with known truth; each query's relevant document is left out of the run while
    an exact copy of it is ranked first: a miss covered by a duplicate once clusters exist."""
    corpus = make_corpus(100, copy_share=0.25, seed=3, kinds=("exact",))
    groups: dict[str, list[str]] = {}
    for doc, group in corpus.truth.items():
        groups.setdefault(group, []).append(doc)
    copied = sorted((sorted(m) for m in groups.values() if len(m) > 1), key=lambda m: m[0])
    others = [d["_id"] for d in corpus.docs if len(groups[corpus.truth[d["_id"]]]) == 1]
    qrels, run, queries = [], [], []
    for i, members in enumerate(copied[:6]):
        qrels.append(f"q{i}\t0\t{members[0]}\t1\n")
        queries.append(json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n")
        for rank, doc in enumerate([members[1], *others[:5]], start=1):
            run.append(f"q{i} Q0 {doc} {rank} {10 - rank} t\n")
    made = client.post(
        "/api/v1/golden-sets",
        data={"name": "copies"},
        files={
            "qrels": ("qrels.tsv", "".join(qrels)),
            "queries": ("queries.jsonl", "".join(queries)),
            "corpus": ("corpus.jsonl", "".join(json.dumps(d) + "\n" for d in corpus.docs)),
        },
        headers=lead.headers,
    )
    assert made.status_code == 201, made.text
    golden = made.json()["id"]
    imported = client.post(
        f"/api/v1/golden-sets/{golden}/runs",
        data={"name": "bm25"},
        files={"run": ("run.trec", "".join(run))},
        headers=lead.headers,
    )
    assert imported.status_code == 201, imported.text
    return golden, imported.json()["id"], corpus.truth


def _text(client: TestClient, url: str, selector: str) -> str:
    found = get(client, url, "page").select_one(selector)
    assert found is not None, f"{selector} missing on {url}"
    return found.get_text(" ", strip=True)


def test_the_pages_name_the_detector_run(client: TestClient, accounts: dict[Role, Account]) -> None:
    lead = accounts[Role.LEAD]
    golden, run_id, truth = _golden_and_run(client, lead)
    login(client, lead.email)
    bare = _text(client, f"/runs/{run_id}/clusters", "#clusters-from")
    assert bare.startswith("No document of the corpus has a cluster id")

    detection = client.post(
        f"/api/v1/golden-sets/{golden}/detector-runs",
        json={"per_band": 4},
        headers=lead.headers,
    ).json()
    detector = detection["id"]
    assert review_all(client, lead, detector, truth) == detection["sampled"]
    applied = client.post(
        f"/api/v1/detector-runs/{detector}/apply", json={"threshold": 0.8}, headers=lead.headers
    )
    assert applied.status_code == 200, applied.text
    said = f"Clusters from detector run {detector} (J >= 0.80): precision 1.00"
    assert _text(client, f"/runs/{run_id}?k=5&depth=5", "#clusters-from").startswith(said)
    assert _text(client, f"/runs/{run_id}/clusters", "#clusters-from").startswith(said)

    made = client.post(
        f"/api/v1/runs/{run_id}/triages", json={"depth": 5, "k": 5}, headers=lead.headers
    )
    assert made.status_code == 201, made.text
    triage = made.json()["id"]
    detail = client.get(f"/api/v1/triages/{triage}", headers=lead.headers).json()
    assert detail["covered"] == 6
    assert detail["covered_from"]["id"] == detector
    assert _text(client, f"/triages/{triage}", "#covered-from").startswith(said)
    assert _text(client, f"/triages/{triage}/backlog?cause=covered", "#covered-from").startswith(
        said
    )
    download = client.get(f"/api/v1/triages/{triage}/backlog?format=json", headers=lead.headers)
    assert download.status_code == 200, download.text  # the download's head carries it too
    assert download.json()["covered_from"]["threshold"] == 0.8

    # another threshold: the run's figures follow it, the triage keeps what it was made with
    client.post(
        f"/api/v1/detector-runs/{detector}/apply", json={"threshold": 0.9}, headers=lead.headers
    )
    history = client.get(f"/api/v1/detector-runs/{detector}", headers=lead.headers).json()
    assert [a["threshold"] for a in history["applications"]] == [0.8, 0.9]
    shown = get(client, f"/detector-runs/{detector}", "page").select("#applications li")
    assert [li.get_text(" ", strip=True)[:8] for li in shown] == ["J ≥ 0.80", "J ≥ 0.90"]
    assert shown[-1].get_text().endswith("(in force)")
    moved = f"Clusters from detector run {detector} (J >= 0.90)"
    assert _text(client, f"/runs/{run_id}?k=5&depth=5", "#clusters-from").startswith(moved)
    assert _text(client, f"/triages/{triage}", "#covered-from").startswith(said)
