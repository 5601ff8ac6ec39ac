"""Hints on the review page, hint accuracy and duplicate covers on the dashboard, cluster
measures on the run page: full pages and fragments, parsed, not grepped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.models import Role
from tests.support.hints import EXPECTED_HINTS, import_hint_fixture
from tests.support.service import ORIGIN, Account, claim, get, login

HTMX = {"HX-Request": "true", **ORIGIN}


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_review_page_shows_evidence_and_a_key_accepts_the_hint(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path, mode: str
) -> None:
    ids = import_hint_fixture(client, accounts[Role.LEAD].headers, tmp_path)
    login(client, accounts[Role.REVIEWER].email)
    claim(client, ids["triage"])
    soup = get(client, f"/triages/{ids['triage']}/review", mode)
    # queue order: q1 first, the vocabulary mismatch
    assert soup.select_one("#query-text").get_text() == "How do I stop API throttling?"
    # the suggested cause by its name, the identifier kept, the meaning on hover and focus
    hint = soup.select_one("#hint")
    assert (hint.get_text(), hint["data-term"]) == ("Vocabulary mismatch", "vocabulary-mismatch")
    assert hint["title"].startswith("The query and the document use different words")
    assert hint["tabindex"] == "0"
    evidence = {li["data-hint"]: li for li in soup.select("#hints li")}
    assert evidence["vocabulary-mismatch"]["class"] == ["fired"]
    assert [c.get_text() for c in evidence["vocabulary-mismatch"].select("code.lacks")] == [
        "stop",
        "api",
        "throttling",
    ]
    assert evidence["not-indexed"]["class"] == ["quiet"]
    accept = soup.select_one("#accept-hint")
    assert (accept["data-key"], accept["value"]) == ("a", "vocabulary-mismatch")
    miss_id = soup.select_one(".card")["data-miss"]
    saved = client.post(
        f"/triages/{ids['triage']}/review/label",
        headers=HTMX,
        data={"miss_id": miss_id, "version": "1", "category": accept["value"]},
    )
    card = BeautifulSoup(saved.text, "html.parser")
    assert card.select_one("#message").get_text().startswith("Saved: q1 / rate#0")
    # next: q2, the answer split across chunks; its adjacent chunk is in the candidates
    assert card.select_one("#hint")["data-term"] == "chunk-boundary"
    assert card.select_one("#hint").get_text() == "Chunk boundary"
    chunk = card.select_one('#hints li[data-hint="chunk-boundary"]')
    assert "trash#0" in chunk.get_text()
    assert "rank 1" in chunk.get_text()


def test_dashboard_hint_accuracy_and_covered(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path, mode: str
) -> None:
    lead = accounts[Role.LEAD]
    ids = import_hint_fixture(client, lead.headers, tmp_path)
    for miss in client.get(
        f"/api/v1/triages/{ids['triage']}/misses?state=open", headers=lead.headers
    ).json()["items"]:
        client.post(
            f"/api/v1/misses/{miss['id']}/label",
            headers=lead.headers,
            json={"category": miss["hint"], "version": miss["version"]},
        )
    login(client, lead.email)
    soup = get(client, f"/triages/{ids['triage']}", mode)
    assert "the categories close" in soup.select_one("#closure").get_text()
    assert soup.select_one("#labelled").get_text() == "3 of 3 labelled"
    rows = {
        tr["data-hint"]: [td.get_text(" ", strip=True) for td in tr.select("td")]
        for tr in soup.select("#hint-accuracy tbody tr")
    }
    assert rows["not-indexed"] == ["1", "100% (1/1)", "100% (1/1)"]
    # vocabulary evidence also fired on q2, which reviewers put in chunk-boundary
    assert rows["vocabulary-mismatch"] == ["2", "50% (1/2)", "100% (1/1)"]
    assert rows["chunk-boundary"] == ["1", "100% (1/1)", "100% (1/1)"]
    assert soup.select_one("#acceptance").get_text(" ", strip=True) == "100% (3/3)"
    covered = soup.select_one("#covered")
    assert covered.select_one("b").get_text() == "1"
    assert covered.select_one("form button").get_text() == "Put them on the queue"
    backlog = get(client, f"/triages/{ids['triage']}/backlog?cause=covered", mode)
    listed = [tr.select("td") for tr in backlog.select("tbody tr")]
    assert len(listed) == 1
    assert "audit#0" in listed[0][1].get_text()
    # the backlog page, the miss page and the download say the same word for where it stands
    assert listed[0][4]["data-cause"] == "covered"
    assert listed[0][4].get_text(strip=True) == "Covered by a duplicate"
    miss_page = get(client, listed[0][1].select_one("a.miss-link")["href"], mode)
    assert miss_page.select_one("#state")["data-term"] == "covered"
    assert miss_page.select_one("#state").get_text() == "Covered by a duplicate"
    download = client.get(
        f"/api/v1/triages/{ids['triage']}/backlog?format=jsonl&category=covered",
        headers=lead.headers,
    )
    assert [json.loads(line)["cause"] for line in download.text.splitlines()] == ["covered"]
    assert set(EXPECTED_HINTS) | {("q4", "audit#0")} == {
        (m["qid"], m["doc_id"])
        for m in client.get(f"/api/v1/triages/{ids['triage']}/misses", headers=lead.headers).json()[
            "items"
        ]
    }


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_run_page_shows_cluster_measures(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path, mode: str
) -> None:
    ids = import_hint_fixture(client, accounts[Role.LEAD].headers, tmp_path)
    login(client, accounts[Role.REVIEWER].email)
    soup = get(client, f"/runs/{ids['run']}?k=2", mode)
    text = soup.select_one("#clusters").get_text(" ", strip=True)
    assert "unique-clusters@2 median 2" in text
    assert "cluster-R@2 0.250" in text


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_comparison_keeps_covered_misses_apart_from_unlabelled(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path, mode: str
) -> None:
    lead = accounts[Role.LEAD]
    ids = import_hint_fixture(client, lead.headers, tmp_path)
    # a second run that puts the covered document (q4, audit#0) first
    run_text = "q4 Q0 audit#0 1 9 second\nq4 Q0 noise#0 2 8 second\n"
    second = client.post(
        f"/api/v1/golden-sets/{ids['golden']}/runs",
        headers=lead.headers,
        data={"name": "second"},
        files={"run": ("second.trec", run_text.encode())},
    )
    assert second.status_code == 201, second.text
    login(client, lead.email)
    url = f"/golden-sets/{ids['golden']}/compare?a={ids['run']}&b={second.json()['id']}&depth=3"
    soup = get(client, url, mode)
    fixed = soup.select_one('#fixed tr[data-cause="covered"]')
    assert fixed is not None
    assert fixed.select_one(".badge").get_text(strip=True) == "Covered by a duplicate"
    assert fixed.select_one(".badge")["data-cause-color"] == "covered"
    rows = [tr["data-cause"] for tr in soup.select("#by-cause tbody tr")]
    assert rows[-2:] == ["covered", "unlabelled"]
    assert "unlabelled" not in {tr["data-cause"] for tr in soup.select("#fixed tbody tr")}
    assert soup.select_one("#summary").get_text() == (
        "second fixes 1 of 1 covered miss, 0 of 3 unlabelled misses of fixture; introduces none"
    )
