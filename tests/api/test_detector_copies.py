"""A detector run over a corpus holding many copies of one text, through the API on both
databases: the copies are one cluster, stored as one pair per copy (to the group's smallest
id), the calibration table says how many documents and groups each band holds, and the
candidate search's recall counts the copies' pairs as found."""

from __future__ import annotations

import json
import random
from pathlib import Path

from fastapi.testclient import TestClient

from app.models import Role
from tests.support.dupe_corpus import Writer, relayout, vocabulary
from tests.support.service import Account

COPIES = 60


def _golden_set(client: TestClient, lead: Account, tmp_path: Path) -> int:
    rng = random.Random(3)
    writer = Writer(rng, vocabulary(rng, 3000))
    notice = writer.text(80)
    docs = [{"_id": f"n{i:03d}", "text": relayout(rng, notice)} for i in range(COPIES)]
    docs.append({"_id": "near", "text": notice + " " + writer.text(5)})  # about 0.9
    docs += [{"_id": f"d{i:03d}", "text": writer.text(120)} for i in range(30)]
    rng.shuffle(docs)
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (tmp_path / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "cookies"}) + "\n")
    (tmp_path / "qrels.tsv").write_text("q1\t0\td000\t1\n")
    with (
        (tmp_path / "corpus.jsonl").open("rb") as c,
        (tmp_path / "qrels.tsv").open("rb") as q,
        (tmp_path / "queries.jsonl").open("rb") as qs,
    ):
        made = client.post(
            "/api/v1/golden-sets",
            data={"name": "copies"},
            files={"qrels": q, "queries": qs, "corpus": c},
            headers=lead.headers,
        )
    assert made.status_code == 201, made.text
    return int(made.json()["id"])


def test_copies_are_one_group_in_the_run_and_its_table(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead = accounts[Role.LEAD]
    golden = _golden_set(client, lead, tmp_path)
    made = client.post(
        f"/api/v1/golden-sets/{golden}/detector-runs",
        json={"threshold": 0.8, "per_band": 5},
        headers=lead.headers,
    )
    assert made.status_code == 201, made.text
    run = made.json()
    # n - 1 links of the copies, one pair of the near-copy with the copies' group
    assert run["pairs"] == COPIES - 1 + 1
    exact = next(b for b in run["bands"] if b["label"] == "1.00")
    assert exact["pairs"] == COPIES - 1
    assert (exact["documents"], exact["groups"]) == (COPIES, 1)
    near = [b for b in run["bands"] if b["pairs"] and b["label"] != "1.00"]
    assert len(near) == 1
    assert (near[0]["pairs"], near[0]["documents"], near[0]["groups"]) == (1, COPIES + 1, 2)
    c = run["candidate_recall"]
    assert c["how"] == "exact"
    assert c["value"] == 1.0
    # every pair of documents at 0.6 or more: the copies' among themselves and with the near one
    assert c["copy_pairs"] == COPIES * (COPIES - 1) // 2
    assert c["pairs"] == COPIES * (COPIES - 1) // 2 + COPIES
    # a reviewer may be shown a copy's link
    claimed = client.post(
        f"/api/v1/detector-runs/{run['id']}/claim", headers=accounts[Role.REVIEWER].headers
    )
    assert claimed.status_code == 200
    # applied: one cluster of the copies and the near one
    applied = client.post(
        f"/api/v1/detector-runs/{run['id']}/apply", json={"threshold": 0.8}, headers=lead.headers
    )
    assert applied.status_code == 200, applied.text
    assert (applied.json()["clusters"], applied.json()["clustered_documents"]) == (1, COPIES + 1)
    at_1 = next(t for t in applied.json()["thresholds"] if t["threshold"] == 1.0)
    assert (at_1["pairs"], at_1["clusters"], at_1["clustered_documents"]) == (
        COPIES - 1,
        1,
        COPIES,
    )
    shown = client.get(f"/api/v1/detector-runs/{run['id']}", headers=lead.headers).json()
    assert [b["documents"] for b in shown["bands"]] == [b["documents"] for b in run["bands"]]
