"""The backlog export, streamed: CSV that opens in a spreadsheet, JSONL, grouped JSON."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app.models import Role
from app.services.triage import backlog
from app.settings import Settings
from tests.support.service import Account, label_some
from tests.support.triage import make_triage


def test_backlog_formats(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    tmp_path: Path,
    settings: Settings,
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=2, per_query=2, corpus=True)
    labelled = label_some(client, accounts, triage.id)
    headers = accounts[Role.REVIEWER].headers
    url = f"/api/v1/triages/{triage.id}/backlog"

    response = client.get(f"{url}?format=csv", headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    assert "attachment" in response.headers["content-disposition"]
    assert response.content.startswith(b"\xef\xbb\xbf")  # a BOM, for Excel
    table = list(csv.DictReader(io.StringIO(response.content.decode("utf-8-sig"))))
    assert len(table) == 4
    assert tuple(table[0]) == backlog.FIELDS
    first = table[0]
    assert (first["golden_set"], first["run"], first["depth"], first["qid"]) == (
        "g",
        "run",
        "10",
        "q0",
    )
    assert first["query"] == "how do I handle api throttling limits?"
    assert first["title"] == "Article 0: api throttling limits"
    assert first["cause"] == "vocabulary-mismatch"
    assert first["labelled_by"] == "reviewer@example.com"
    # Links that leave the product come from MISSTRIAGE_PUBLIC_URL, not the Host header.
    assert first["url"] == f"{settings.public_url}/misses/{labelled[0]}"
    assert table[1]["note"] == "judged wrongly"
    assert table[3]["cause"] == ""
    assert table[3]["rank"] == ""

    lines = client.get(f"{url}?format=jsonl&category=other", headers=headers).text.splitlines()
    assert [json.loads(line)["miss_id"] for line in lines] == [labelled[1]]

    document = client.get(url, headers=headers).json()
    assert document["closure"] == (
        "0 + 1 + 0 = 1 of 4 misses in named causes: does not close: 1 other, 2 unlabelled"
    )
    assert [(g["cause"], g["count"]) for g in document["causes"]] == [
        ("not-indexed", 0),
        ("vocabulary-mismatch", 1),
        ("chunk-boundary", 0),
        ("other", 1),
        ("unlabelled", 2),
    ]
    assert client.get(f"{url}?format=xml", headers=headers).status_code == 422


def test_backlog_streams_past_one_batch(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(backlog, "BATCH", 3)
    _, _, triage = make_triage(engine, tmp_path, queries=4, per_query=2)
    lines = client.get(
        f"/api/v1/triages/{triage.id}/backlog?format=jsonl", headers=accounts[Role.LEAD].headers
    ).text.splitlines()
    ids = [json.loads(line)["miss_id"] for line in lines]
    assert len(ids) == 8
    assert len(set(ids)) == 8
