"""Lead views: the depth-curve chart, the reranker check, the run page, the comparison."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.models import Role
from tests.support.lead_runs import FIRST, HYBRID, QRELS, QUERIES, RERANKED
from tests.support.service import ORIGIN, Account, get, login


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def golden_url(client: TestClient, accounts: dict[Role, Account]) -> Iterator[str]:
    login(client, accounts[Role.LEAD].email)
    response = client.post(
        "/golden-sets",
        data={"name": "help"},
        headers=ORIGIN,
        files={"qrels": ("q.txt", QRELS), "queries": ("q.tsv", QUERIES)},
        follow_redirects=False,
    )
    url = response.headers["location"]
    for name, content in (("first", FIRST), ("reranked", RERANKED), ("hybrid", HYBRID)):
        created = client.post(
            f"{url}/runs",
            data={"name": name},
            headers=ORIGIN,
            files={"run": (f"{name}.trec", content)},
            follow_redirects=False,
        )
        assert created.status_code == 303
    return url


def test_chart_and_reranker_check(client: TestClient, golden_url: str, mode: str) -> None:
    soup = get(client, f"{golden_url}?k=1&depth=5&cost_ms=2.5", mode)
    svg = soup.select_one("svg#depth-curve")
    assert svg["role"] == "img"
    assert [g["data-run"] for g in svg.select("g.series")] == ["first", "reranked", "hybrid"]
    assert len(svg.select('g[data-run="first"] circle')) == 6  # depths 10 .. 1000
    titles = [t.get_text() for t in svg.select('g[data-run="hybrid"] circle title')]
    assert titles[0] == "hybrid: R@10 = 0.6667"
    checks = [p.get_text() for p in soup.select('[data-check="reranker"]')]
    assert checks == [
        "first and reranked return the same top 5 documents for every query: R@5 is identical "
        "(0.6667), and the R@1 change (0.1667 to 0.5000) is ordering alone."
    ]
    costs = [td.get_text() for td in soup.select('#runs-table td[data-measure="cost"]')]
    assert costs == ["12.5", "12.5", "12.5"]
    # The depth advisor: the cost at every depth of the curve (2.5 ms x depth) and, since
    # every run has found all it finds by depth 10, depth stops paying at 10 for each.
    curve_costs = [td.get_text() for td in soup.select('#curve-cost td[data-measure="cost"]')]
    assert curve_costs == ["25", "50", "125", "250", "500", "2500"]
    advised = {li["data-run"]: li["data-advised"] for li in soup.select("#depth-advice > ul > li")}
    assert advised == {"first": "10", "reranked": "10", "hybrid": "10"}
    hybrid = soup.select_one('#depth-advice li[data-run="hybrid"]')
    assert hybrid.select_one(".advice").get_text() == (
        "depth stops paying at 10: R@10 = 0.667 is within 0.01 R of the best on the curve "
        "(0.667) at 25 ms per query; going to depth 1000 adds 2475 ms and buys nothing"
    )
    steps = [li.get_text() for li in hybrid.select(".steps li")]
    assert steps[0] == "depth 20 buys nothing for +25 ms per query"
    every_step = [li.get_text() for li in soup.select("#depth-advice .steps li")]
    assert every_step
    assert not [s for s in every_step if "e-0" in s or "R per ms" in s]
    cells = soup.select('#curve-table tr[data-run="hybrid"] td[data-advised="true"]')
    assert [td["data-depth"] for td in cells] == ["10"]
    # The chart puts the cost under each depth's tick.
    notes = [t.get_text() for t in soup.select("svg#depth-curve text.cost")]
    assert notes == ["25 ms", "50 ms", "125 ms", "250 ms", "500 ms", "2500 ms"]


def test_no_cost_no_advisor(client: TestClient, golden_url: str, mode: str) -> None:
    for query in ("", "?cost_ms=0"):
        soup = get(client, f"{golden_url}{query}", mode)
        assert soup.select_one("#curve-table") is not None
        assert soup.select_one("#curve-cost") is None
        assert soup.select_one("#depth-advice") is None
        assert soup.select("svg#depth-curve text.cost") == []


def test_a_wide_tolerance_is_applied(client: TestClient, golden_url: str, mode: str) -> None:
    soup = get(client, f"{golden_url}?cost_ms=3.1&tolerance=0.5", mode)
    curve_costs = [td.get_text() for td in soup.select('#curve-cost td[data-measure="cost"]')]
    assert curve_costs == ["31", "62", "155", "310", "620", "3100"]
    assert "within 0.5 R" in soup.select_one("#depth-advice p").get_text()


def test_the_runs_table_costs_its_depth_as_the_curve_does(
    client: TestClient, golden_url: str, mode: str
) -> None:
    """With the first stage's p95, the runs table's cost at the depth includes it, as the
    curve's does (it once showed the reranking alone: 100 ms beside the curve's 120)."""
    soup = get(client, f"{golden_url}?depth=50&cost_ms=2&retrieval_p95=10:12,100:30", mode)
    curve = {
        td["data-depth"]: td.get_text() for td in soup.select('#curve-cost td[data-measure="cost"]')
    }
    # 50 x 2 ms + the p95 filled in at 50 (12 + 40/90 x 18 = 20 ms)
    assert curve["50"] == "120"
    costs = {td.get_text() for td in soup.select('#runs-table td[data-measure="cost"]')}
    assert costs == {"120"}


def test_run_page_diagnosis_search_sort(client: TestClient, golden_url: str, mode: str) -> None:
    listing = BeautifulSoup(client.get(golden_url).text, "html.parser")
    run_url = listing.select_one('#runs-table tr[data-run="first"] a')["href"].split("?")[0]
    soup = get(client, f"{run_url}?k=1&depth=5&sort=misses&desc=true", mode)
    assert [tr["data-qid"] for tr in soup.select("#queries tbody tr")] == ["q3", "q1", "q2"]
    counts = {li["data-diagnosis"]: li.b.get_text() for li in soup.select("#diagnoses li")}
    assert counts == {"ranking": "1", "candidate_generation": "0", "ingestion": "1", "fine": "1"}
    # each query says which rule fired, on its numbers; without a corpus ingestion is a guess
    reasons = {
        tr.select("td")[-2]["data-diagnosis"]: tr.select_one("td.reason").get_text()
        for tr in soup.select("#queries tbody tr")
    }
    # the diagnosis shows its human name, its meaning on hover and focus
    shown = {
        tr.select("td")[-2]["data-diagnosis"]: tr.select("td")[-2].get_text()
        for tr in soup.select("#queries tbody tr")
    }
    assert shown == {"ranking": "Ranking", "ingestion": "Ingestion", "fine": "Fine"}
    term = soup.select_one('#queries td[data-diagnosis="ingestion"] .term')
    assert term["tabindex"] == "0"
    assert term["title"].startswith("Both recall and nDCG are low")
    assert all(reason.startswith("R@5 ") for reason in reasons.values())
    assert "a guess" in reasons["ingestion"]
    assert "a guess" in soup.select_one("p.conventions").get_text()
    found = get(client, f"{run_url}?k=1&depth=5&q=SSO", mode)
    assert [tr["data-qid"] for tr in found.select("#queries tbody tr")] == ["q2"]


def test_comparison_by_cause(client: TestClient, golden_url: str, mode: str) -> None:
    listing = BeautifulSoup(client.get(golden_url).text, "html.parser")
    ids = {
        tr["data-run"]: tr.a["href"].split("/runs/")[1].split("?")[0]
        for tr in listing.select("#runs-table tbody tr")
    }
    soup = get(client, f"{golden_url}/compare?a={ids['first']}&b={ids['hybrid']}&depth=5", mode)
    assert soup.select_one("#summary").get_text() == (
        "hybrid fixes 1 of 1 unlabelled miss of first; introduces 1 unlabelled"
    )
    assert [td.get_text() for td in soup.select("#fixed td")] == [
        "q3: export data",
        "d",
        "Unlabelled",
    ]
    query_href = soup.select_one("#fixed td a.query-link")["href"]
    assert query_href.endswith(f"/runs/{ids['first']}/queries/q3")
    assert soup.select_one("#fixed td a.doc-link")["href"].endswith("/documents/d")
    # unlabelled is the neutral, not a cause's colour
    assert soup.select_one("#fixed .badge")["data-cause-color"] == "unlabelled"
    assert [td.get_text() for td in soup.select("#introduced td")][:2] == ["q2: sso login", "c"]


def test_comparison_uses_labels_from_any_triage(
    client: TestClient, golden_url: str, accounts: dict[Role, Account]
) -> None:
    lead = accounts[Role.LEAD].headers
    path = urlsplit(golden_url).path
    runs = client.get(f"/api/v1{path}/runs", headers=lead).json()["items"]
    ids = {r["name"]: r["id"] for r in runs}
    triage = client.post(
        f"/api/v1/runs/{ids['first']}/triages", headers=lead, json={"depth": 5, "k": 1}
    ).json()
    miss = client.post(f"/api/v1/triages/{triage['id']}/claim", headers=lead).json()
    assert (miss["qid"], miss["doc_id"]) == ("q3", "d")
    client.post(
        f"/api/v1/misses/{miss['id']}/label",
        headers=lead,
        json={"category": "vocabulary-mismatch", "version": 1},
    )
    soup = BeautifulSoup(
        client.get(f"{golden_url}/compare?a={ids['first']}&b={ids['hybrid']}&depth=5").text,
        "html.parser",
    )
    assert soup.select_one("#summary").get_text() == (
        "hybrid fixes 1 of 1 vocabulary mismatch miss of first; introduces 1 unlabelled"
    )
    row = soup.select_one('#by-cause tr[data-cause="vocabulary-mismatch"]')
    assert [td.get_text() for td in row.select("td")] == ["Vocabulary mismatch", "1", "1", "0"]
    # the cause's colour follows its place in the golden set's causes (the second by default)
    assert row.select_one(".badge")["data-cause-color"] == "2"


def session_golden_webhook(
    client: TestClient, path: str, accounts: dict[Role, Account]
) -> str | None:
    """The golden set's webhook URL as the API answers it."""
    golden = client.get(f"/api/v1{path}", headers=accounts[Role.LEAD].headers).json()
    url: str | None = golden["webhook"]["url"]
    return url


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_settings_panel_causes_and_webhook(
    client: TestClient, golden_url: str, accounts: dict[Role, Account]
) -> None:
    path = urlsplit(golden_url).path
    saved = client.post(
        f"{path}/settings",
        headers=ORIGIN,
        follow_redirects=False,
        data={
            "causes": "stale-index, synonyms, chunking",
            "webhook_url": "https://hooks.test/T0/B0/secret-token",
            "webhook_events": ["triage.closed"],
        },
    )
    assert saved.status_code == 303
    golden = client.get(f"/api/v1{path}", headers=accounts[Role.LEAD].headers).json()
    assert golden["causes"] == ["stale-index", "synonyms", "chunking"]
    # The URL's path may be the hook's secret: shown past its host elided, here and on pages.
    assert golden["webhook"] == {"url": "https://hooks.test/\u2026", "events": ["triage.closed"]}
    html = client.get(path).text
    assert "secret-token" not in html
    soup = BeautifulSoup(html, "html.parser")
    assert soup.select_one('#settings input[name="causes"]')["value"] == (
        "stale-index, synonyms, chunking"
    )
    assert soup.select_one('#settings input[name="webhook_url"]')["value"] == ""
    checked = [i["value"] for i in soup.select('#settings input[type="checkbox"][checked]')]
    assert checked == ["triage.closed"]
    # Saved again with the field left empty (as the page shows it), the webhook is kept ...
    kept = {"causes": "stale-index, synonyms, chunking", "webhook_url": ""}
    assert client.post(f"{path}/settings", headers=ORIGIN, data=kept).status_code == 200
    stored = session_golden_webhook(client, path, accounts)
    assert stored == "https://hooks.test/\u2026"
    # ... and "Remove the webhook" turns it off.
    removed = {**kept, "webhook_remove": "true"}
    assert client.post(f"{path}/settings", headers=ORIGIN, data=removed).status_code == 200
    assert session_golden_webhook(client, path, accounts) is None
    bad = client.post(
        f"{path}/settings",
        headers=ORIGIN,
        data={"causes": "a, other", "webhook_url": ""},
        follow_redirects=False,
    )
    # Post/redirect/get: back to the page, which says why nothing was saved.
    assert bad.status_code == 303
    assert bad.headers["location"].endswith(path)
    assert bad.headers["x-error-code"] == "bad_causes"
    page = BeautifulSoup(client.get(path).text, "html.parser")
    flash = page.select_one("#flash [data-flash]")
    assert flash is not None
    assert flash["data-flash"] == "error"
    assert flash.get_text().startswith("Settings not saved:")


def test_reranker_note_says_no_change_when_recall_at_k_did_not_move(
    client: TestClient, golden_url: str
) -> None:
    created = client.post(
        f"{golden_url}/runs",
        data={"name": "again"},
        headers=ORIGIN,
        files={"run": ("again.trec", FIRST)},
        follow_redirects=False,
    )
    assert created.status_code == 303
    soup = BeautifulSoup(client.get(f"{golden_url}?k=1&depth=5").text, "html.parser")
    notes = [p.get_text() for p in soup.select('[data-check="reranker"]')]
    assert (
        "first and again return the same top 5 documents for every query: R@5 is identical "
        "(0.6667), and R@1 shows no change (0.1667): the ordering differs at most inside the "
        "top 1."
    ) in notes
    assert not any("change (0.1667 to 0.1667)" in note for note in notes)


def test_comparison_rows_put_causes_first_then_other_covered_unlabelled() -> None:
    from app.services.views.comparisons import cause_order

    causes = ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]
    present = {"unlabelled", "covered", "other", "chunk-boundary", "not-indexed", "legacy"}
    assert cause_order(causes, present) == [
        "not-indexed",
        "chunk-boundary",
        "legacy",
        "other",
        "covered",
        "unlabelled",
    ]


def test_breadcrumbs_are_an_ordered_list_ending_on_the_page(
    client: TestClient, golden_url: str, mode: str
) -> None:
    listing = BeautifulSoup(client.get(golden_url).text, "html.parser")
    run_url = listing.select_one('#runs-table tr[data-run="first"] a')["href"].split("?")[0]
    for url, trail in (
        (golden_url, ["Golden sets", "help"]),
        (run_url, ["Golden sets", "help", "first"]),
        (f"{run_url}/queries/q1", ["Golden sets", "help", "first", "Query q1"]),
    ):
        soup = get(client, url, mode)
        crumbs = soup.select_one('nav[aria-label="Breadcrumb"] ol')
        assert [li.get_text(strip=True) for li in crumbs.select("li")] == trail, url
        assert crumbs.select("li")[-1].select_one('[aria-current="page"]') is not None
        assert crumbs.select("li")[-1].a is None  # the page itself is not a link
        assert "/" not in "".join(li.get_text() for li in crumbs.select("li"))
