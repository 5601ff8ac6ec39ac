"""The series page (issue 28, part 1): runs imported through the golden-set page's form with a
series and provenance lines; the page's table and chart show each run's measures (equal to the
API's), each point and row a link to its run, as a full page and as a fragment, on both
databases; a bad provenance line answers the golden-set page with the form kept."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.models import Role
from tests.support.lead_runs import FIRST, HYBRID, QRELS, QUERIES, RERANKED
from tests.support.service import ORIGIN, Account, get, login


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _golden_set(client: TestClient, lead: Account) -> int:
    answer = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": "lead-runs"},
        files={"qrels": ("qrels.txt", QRELS), "queries": ("queries.tsv", QUERIES)},
    )
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])


def _import_by_form(client: TestClient, golden_id: int, name: str, body: str, meta: str) -> int:
    posted = client.post(
        f"/golden-sets/{golden_id}/runs",
        data={"name": name, "series": "bm25-main", "meta": meta},
        files={"run": (f"{name}.trec", body)},
        headers=ORIGIN,
        follow_redirects=False,
    )
    return posted.status_code


def test_the_series_page_shows_each_run_linked_with_its_measures(
    client: TestClient, accounts: dict[Role, Account], mode: str
) -> None:
    lead = accounts[Role.LEAD]
    golden_id = _golden_set(client, lead)
    login(client, lead.email)
    for number, body in enumerate((FIRST, RERANKED, HYBRID), start=1):
        meta = f"commit=c{number}abcdef99\nbranch=main\n\ntime=2026-12-0{number}T10:00"
        assert _import_by_form(client, golden_id, f"commit-{number}", body, meta) == 303
    api = client.get(
        f"/api/v1/golden-sets/{golden_id}/series/bm25-main?k=1&depth=3", headers=lead.headers
    ).json()
    assert [p["run"]["meta"]["branch"] for p in api["runs"]] == ["main"] * 3

    golden_page = get(client, f"/golden-sets/{golden_id}", mode)
    item = golden_page.select_one("#series-list li[data-series='bm25-main']")
    assert item is not None
    assert "3 runs" in item.get_text()

    soup = get(client, f"/golden-sets/{golden_id}/series/bm25-main?k=1&depth=3", mode)
    rows = soup.select("#series-table tbody tr")
    assert [r["data-run"] for r in rows] == ["commit-1", "commit-2", "commit-3"]
    for row, point in zip(rows, api["runs"], strict=True):
        link = row.select_one("td a")
        assert link is not None
        assert link["href"] == f"/runs/{point['run']['id']}"
        shown = {
            td["data-measure"]: td.get_text(strip=True) for td in row.select("td[data-measure]")
        }
        for measure in ("R@1", "R@3", "nDCG@1"):
            assert float(shown[measure]) == pytest.approx(point["measures"][measure], abs=5e-5)
        assert int(shown["misses"]) == point["misses"]
        assert row.select_one("code").get_text() == point["run"]["meta"]["commit"][:12]
    chart = soup.select_one("#series-chart")
    assert chart is not None
    lines = chart.select("g.series")
    assert [g["data-measure"] for g in lines] == ["R@1", "R@3", "nDCG@1"]
    for line in lines:
        hrefs = [a["href"] for a in line.select("a")]
        assert hrefs == [f"/runs/{p['run']['id']}" for p in api["runs"]]
    ticks = [t.get_text() for t in chart.select("text.tick") if t.get_text().startswith("c")]
    assert ticks == ["c1abcdef", "c2abcdef", "c3abcdef"]


def test_a_bad_provenance_line_keeps_the_form_and_imports_nothing(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    lead = accounts[Role.LEAD]
    golden_id = _golden_set(client, lead)
    login(client, lead.email)
    status = _import_by_form(client, golden_id, "r", FIRST, "commit=abc\nno equals sign here")
    assert status == 303  # back to the golden-set page, with the message
    page = client.get(f"/golden-sets/{golden_id}")
    assert "meta line 2" in page.text
    assert 'value="bm25-main"' in page.text  # the form kept what was entered
    runs = client.get(f"/api/v1/golden-sets/{golden_id}/runs", headers=lead.headers).json()
    assert runs["total"] == 0


def test_an_unknown_series_is_a_page(client: TestClient, accounts: dict[Role, Account]) -> None:
    lead = accounts[Role.LEAD]
    golden_id = _golden_set(client, lead)
    login(client, lead.email)
    page = client.get(f"/golden-sets/{golden_id}/series/nope")
    assert page.status_code == 404
    assert "<html" in page.text
    assert "no series" in page.text
