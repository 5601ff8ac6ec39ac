"""The query page says "covered" where the triage does: a judged document outside the top
depth whose duplicate-cluster mate the run put inside it is covered, not missed (it said
"missed" while the triage of the same run and depth counted it covered)."""

from __future__ import annotations

from pathlib import Path

from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.models import Miss, MissState, Role
from app.services.imports import golden_sets, runs
from app.services.triage import triages
from tests.support.service import Account, login

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "helpcentre"
DEPTH = 50


def test_the_query_page_counts_covered_as_the_triage_does(
    client: TestClient, accounts: dict[Role, Account], engine: Engine
) -> None:
    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(
            session=session,
            name="helpcentre",
            qrels=EXAMPLE / "qrels.tsv",
            queries=EXAMPLE / "queries.jsonl",
            corpus=EXAMPLE / "corpus.jsonl",
            manifest=EXAMPLE / "manifest.txt",
        )
        run = runs.import_run(
            session=session,
            golden=golden,
            name="bm25",
            path=EXAMPLE / "runs" / "bm25.trec",
            source_name="bm25.trec",
        )
        triage = triages.create_triage(
            session=session, run=run, golden=golden, depth=DEPTH, k=10, user=None
        )
        misses = session.exec(select(Miss).where(col(Miss.triage_id) == triage.id)).all()
    covered = [m for m in misses if m.state == MissState.COVERED.value]
    assert covered, "the example has misses covered by a duplicate"
    login(client, accounts[Role.REVIEWER].email)
    for qid in sorted({m.qid for m in misses}):
        page = client.get(f"/runs/{run.id}/queries/{qid}?depth={DEPTH}&k=10")
        assert page.status_code == 200
        soup = BeautifulSoup(page.text, "lxml")
        states = {
            row["data-doc"]: badge["data-state"]
            for row in soup.select("#judged tbody tr[data-doc]")
            if (badge := row.select_one("span.badge")) is not None
        }
        expected = {
            m.doc_id: "covered" if m.state == MissState.COVERED.value else "missed"
            for m in misses
            if m.qid == qid
        }
        assert states == expected, qid
