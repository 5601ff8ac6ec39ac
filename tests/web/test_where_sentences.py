"""Every surface says where the run put a miss with the same sentence (app/eval/placement.py):
the miss page, the review card, the dashboard's residue, the backlog page and downloads, and
the issues exported to a (fake) tracker. Four misses cover the cases: returned deeper than the
depth, not returned by a run that returned 34 results, not returned by a run that returned one
result, and a query the run returned nothing for."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from markdown_it import MarkdownIt
from pydantic import SecretStr
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.models import Miss, Role, Triage
from app.services.imports import golden_sets, runs
from app.services.triage import triages
from app.settings import Settings
from tests.support.fake_tracker import JIRA_EMAIL, TOKEN, Tracker, serve
from tests.support.service import ORIGIN, Account, get, login

HTMX = {"HX-Request": "true", **ORIGIN}
DEPTH = 50
EXPECTED = {
    "d1": "rank 73 of 80",
    "d2": "not retrieved: not among the run's 34 results for this query",
    "d3": "not retrieved: the run returned nothing for this query",
    "d4": "not retrieved: the run's only result for this query is another document",
}


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make_cases(engine: Engine, tmp: Path) -> Triage:
    """q1: d1 at rank 73 of 80; q2: 34 results without d2; q3: absent from the run; q4: one
    result, not d4."""
    (tmp / "w.qrels").write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(1, 5)))
    q1 = [f"n1-{r}" for r in range(80)]
    q1[72] = "d1"
    lines = [f"q1 Q0 {doc} {r + 1} {1000 - r} t\n" for r, doc in enumerate(q1)]
    lines += [f"q2 Q0 n2-{r} {r + 1} {1000 - r} t\n" for r in range(34)]
    lines += ["q4 Q0 n4-0 1 5.0 t\n"]
    (tmp / "w.trec").write_text("".join(lines))
    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(session=session, name="w", qrels=tmp / "w.qrels")
        run = runs.import_run(
            session=session, golden=golden, name="r", path=tmp / "w.trec", source_name="w.trec"
        )
        return triages.create_triage(
            session=session, run=run, golden=golden, depth=DEPTH, k=10, user=None
        )


def miss_ids(engine: Engine, triage: Triage) -> dict[str, int]:
    with Session(engine) as session:
        rows = session.exec(select(Miss).where(Miss.triage_id == triage.id)).all()
        return {m.doc_id: m.id for m in rows if m.id is not None}


@pytest.fixture
def cases(engine: Engine, tmp_path: Path) -> Triage:
    return make_cases(engine, tmp_path)


def test_miss_page(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, cases: Triage, mode: str
) -> None:
    login(client, accounts[Role.REVIEWER].email)
    ids = miss_ids(engine, cases)
    assert set(ids) == set(EXPECTED)
    shown = {
        d: get(client, f"/misses/{i}", mode).select_one("#where").get_text() for d, i in ids.items()
    }
    assert shown == EXPECTED


def test_dashboard_residue_and_backlog_page(
    client: TestClient, accounts: dict[Role, Account], cases: Triage, mode: str
) -> None:
    login(client, accounts[Role.LEAD].email)
    for url, table in (
        (f"/triages/{cases.id}", "#residue"),
        (f"/triages/{cases.id}/backlog", "#backlog"),
    ):
        soup = get(client, url, mode)
        shown = {
            tr.select_one("a.doc-link").get_text(): tr.select_one("td.where").get_text()
            for tr in soup.select(f"{table} tbody tr")
        }
        assert shown == EXPECTED, url


def test_backlog_downloads(
    client: TestClient, accounts: dict[Role, Account], cases: Triage
) -> None:
    headers = accounts[Role.REVIEWER].headers
    url = f"/api/v1/triages/{cases.id}/backlog"
    as_csv = client.get(url, params={"format": "csv"}, headers=headers)
    rows = list(csv.DictReader(io.StringIO(as_csv.content.decode("utf-8-sig"))))
    assert {r["doc_id"]: r["where"] for r in rows} == EXPECTED
    assert {r["doc_id"]: r["retrieved"] for r in rows} == {
        "d1": "80",
        "d2": "34",
        "d3": "0",
        "d4": "1",
    }
    lines = client.get(url, params={"format": "jsonl"}, headers=headers).text.splitlines()
    assert {json.loads(line)["doc_id"]: json.loads(line)["where"] for line in lines} == EXPECTED
    document = client.get(url, params={"format": "json"}, headers=headers).json()
    items = [m for group in document["causes"] for m in group["misses"]]
    assert {m["doc_id"]: m["where"] for m in items} == EXPECTED


def test_review_card(client: TestClient, accounts: dict[Role, Account], cases: Triage) -> None:
    """The reviewer meets the four misses in queue order, each with its sentence."""
    login(client, accounts[Role.REVIEWER].email)
    seen = {}
    answer = client.post(f"/triages/{cases.id}/review/claim", headers=HTMX)
    for _ in range(4):
        card = BeautifulSoup(answer.text, "html.parser")
        assert answer.status_code == 200, answer.text
        doc = card.select_one("#doc-title").get_text().strip()
        seen[doc] = card.select_one("#where").get_text()
        form = {
            "miss_id": card.select_one(".card")["data-miss"],
            "version": card.select_one(".card")["data-version"],
            "category": "not-indexed",
        }
        answer = client.post(f"/triages/{cases.id}/review/label", headers=HTMX, data=form)
    assert seen == EXPECTED
    assert BeautifulSoup(answer.text, "html.parser").select_one("#empty") is not None


@pytest.fixture
def fake() -> Iterator[tuple[str, Tracker]]:
    yield from serve()


@pytest.mark.parametrize("tracker", ["github", "jira"])
def test_exported_issue_body(
    client: TestClient,
    accounts: dict[Role, Account],
    settings: Settings,
    cases: Triage,
    fake: tuple[str, Tracker],
    tracker: str,
) -> None:
    base, fake_tracker = fake
    client.app.state.settings = settings.model_copy(  # type: ignore[attr-defined]
        update={
            "github_api_url": base,
            "github_token": SecretStr(TOKEN),
            "jira_api_url": base,
            "jira_email": JIRA_EMAIL,
            "jira_token": SecretStr(TOKEN),
            "allow_local_network": True,  # the fake tracker listens on 127.0.0.1
        }
    )
    lead = accounts[Role.LEAD].headers
    for _ in range(4):
        miss = client.post(f"/api/v1/triages/{cases.id}/claim", headers=lead).json()
        labelled = client.post(
            f"/api/v1/misses/{miss['id']}/label",
            headers=lead,
            json={"category": "not-indexed", "note": "", "version": miss["version"]},
        )
        assert labelled.status_code == 200, labelled.text
    target = "acme/search" if tracker == "github" else "SEARCH"
    pushed = client.post(
        f"/api/v1/triages/{cases.id}/exports",
        headers=lead,
        json={"tracker": tracker, "target": target},
    )
    assert pushed.status_code == 200, pushed.text
    assert [r["action"] for r in pushed.json()["results"]] == ["create"]
    (issue,) = fake_tracker.issues.values()
    if tracker == "github":
        # What a reader of the issue sees: the Markdown rendered, the table's cells as text.
        html = MarkdownIt("commonmark", {"html": True}).enable("table").render(issue["body"])
        body_rows = BeautifulSoup(html, "html.parser").select("table tbody tr")
        texts = [[td.get_text() for td in tr.find_all("td")] for tr in body_rows]
        cells = {row[1]: row[3] for row in texts}
    else:
        table = next(c for c in issue["description"]["content"] if c["type"] == "table")
        texts = [
            [
                "".join(t["text"] for p in cell["content"] for t in p["content"])
                for cell in row["content"]
            ]
            for row in table["content"][1:]
        ]
        cells = {row[1]: row[3] for row in texts}
    assert cells == EXPECTED
