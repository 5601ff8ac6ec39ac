"""Names people give (a series, a run, a golden set, a cause, a query or document id) round-trip
through the pages: shown as given (escaped), each link leading to the page of that very name
as a browser would follow it. A browser (the WHATWG URL parser) drops the path segments ``.``
and ``..`` and their encodings (``%2e``, ``.%2E``, ...) before it asks: ``browser_path`` does
what it does, so a link that only works for a client that keeps them fails here. Both
databases; pages and fragments."""

from __future__ import annotations

import json
from urllib.parse import unquote, urlencode, urlsplit

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.models import Role
from tests.support.lead_runs import FIRST, QRELS, QUERIES
from tests.support.service import Account, get, login

#: A branch name (the commonest series name in CI), a release, spaces, URL delimiters, a
#: percent sign, the dot segments, non-Latin letters, a traversal and markup.
NAMES = [
    "feature/login",
    "release/2026.12",
    "with  spaces",
    "a?b#c",
    "100% & more",
    "..",
    ".",
    "検索/シリーズ",
    "a/../b",
    "<i>x</i>",
]
#: Query and document ids of the same kinds (a qrels file splits on whitespace).
QIDS = ["..", ".", "q/../x", "q?#%", "質問/1"]
DOCS = ["..", ".", "a/../b", "d?#%", "文書/1", "/lead"]
DOT_SEGMENTS = {"..", ".%2e", "%2e.", "%2e%2e"}
SINGLE_DOT = {".", "%2e"}


def browser_path(href: str) -> str:
    """The path (and query) a browser asks for when it follows ``href``: the WHATWG URL
    parser's dot segments removed (``.``, ``..`` and their percent-encodings, any case)."""
    parts = urlsplit(href)
    assert parts.path.startswith("/"), href
    segments = parts.path.split("/")[1:]
    kept: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        lowered = segment.lower()
        if lowered in DOT_SEGMENTS:
            if kept:
                kept.pop()
            if last:
                kept.append("")
        elif lowered in SINGLE_DOT:
            if last:
                kept.append("")
        else:
            kept.append(segment)
    return "/" + "/".join(kept) + (f"?{parts.query}" if parts.query else "")


def follow(client: TestClient, href: str, mode: str = "page") -> BeautifulSoup:
    """The page a browser shows for ``href`` (200 or the test fails)."""
    return get(client, browser_path(href), mode)


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def named_series(client: TestClient, accounts: dict[Role, Account]) -> int:
    """A golden set with a hostile name, and one run per name of NAMES, named so and in the
    series so named (the API takes any of them)."""
    lead = accounts[Role.LEAD]
    created = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": "golden/set ?#% .."},
        files={"qrels": ("qrels.txt", QRELS), "queries": ("queries.tsv", QUERIES)},
    )
    assert created.status_code == 201, created.text
    golden_id = int(created.json()["id"])
    for name in NAMES:
        answer = client.post(
            f"/api/v1/golden-sets/{golden_id}/runs",
            headers=lead.headers,
            data={"name": name, "series": name, "meta": json.dumps({"branch": name})},
            files={"run": ("run.trec", FIRST)},
        )
        assert answer.status_code == 201, answer.text
        assert (answer.json()["name"], answer.json()["series"]) == (name, name)
    login(client, lead.email)
    return golden_id


def _series_page_shows(soup: BeautifulSoup, name: str) -> None:
    heading = soup.select_one("h1")
    assert heading is not None
    assert heading.get_text() == f"Series {name}"
    rows = soup.select("#series-table tbody tr")
    assert [r["data-run"] for r in rows] == [name]
    assert rows[0].select("td")[2].get_text() == name  # the branch, from the run's meta


def test_every_series_name_links_from_the_golden_set_page_to_its_own_page(
    client: TestClient, named_series: int, mode: str
) -> None:
    soup = get(client, f"/golden-sets/{named_series}?k=1&depth=3", mode)
    items = soup.select("#series-list li")
    assert sorted(li["data-series"] for li in items) == sorted(NAMES)
    for item in items:
        name = item["data-series"]
        link = item.select_one("a")
        assert link is not None
        assert link.get_text() == name
        page = follow(client, link["href"], mode)
        _series_page_shows(page, name)
        # the page's own controls keep the series when they are submitted
        form = page.select_one("form.controls")
        assert form is not None
        fields = [(i["name"], i.get("value", "")) for i in form.select("input[name]")]
        again = follow(client, f"{form['action']}?{urlencode(fields)}", mode)
        _series_page_shows(again, name)


def test_old_series_links_by_path_keep_working(client: TestClient, named_series: int) -> None:
    """The series page's path form, as earlier pages and bookmarks link it, with the name
    percent-encoded (a slash as %2F)."""
    for path, name in [
        ("feature%2Flogin", "feature/login"),
        ("feature/login", "feature/login"),
        ("release%2F2026.12", "release/2026.12"),
        ("a%3Fb%23c", "a?b#c"),
        ("100%25%20%26%20more", "100% & more"),
        ("%E6%A4%9C%E7%B4%A2%2F%E3%82%B7%E3%83%AA%E3%83%BC%E3%82%BA", "検索/シリーズ"),
    ]:
        soup = get(client, f"/golden-sets/{named_series}/series/{path}?k=1&depth=3", "page")
        _series_page_shows(soup, name)


def test_the_runs_and_golden_set_names_are_shown_as_given(
    client: TestClient, named_series: int
) -> None:
    soup = get(client, f"/golden-sets/{named_series}?k=1&depth=3", "page")
    assert soup.select_one("h1").get_text(" ", strip=True).startswith("golden/set ?#% ..")
    page = follow(client, soup.select_one("#series-list li[data-series='<i>x</i>'] a")["href"])
    assert page.find("i", string="x") is None  # escaped, never markup
    assert page.select_one("h1").get_text() == "Series <i>x</i>"
    crumbs = [a.get_text() for a in page.select("nav.crumbs a")]
    assert "golden/set ?#% .." in crumbs
    run_link = page.select_one("#series-table tbody tr td a")
    assert run_link.get_text() == "<i>x</i>"
    assert follow(client, run_link["href"]).select_one("h1") is not None


def _qrels() -> str:
    return "".join(f"{qid} 0 {doc} 1\n" for qid in QIDS for doc in DOCS)


def _corpus() -> str:
    return "".join(
        json.dumps({"_id": doc, "title": f"title of {doc}", "text": "text"}) + "\n"
        for doc in [*DOCS, "elsewhere"]
    )


def _run() -> str:
    # each query retrieves "/lead" at 1 (a hit) and the others not: the rest are misses
    return "".join(f"{qid} Q0 /lead 1 9 t\n{qid} Q0 elsewhere 2 8 t\n" for qid in QIDS)


@pytest.fixture
def hostile_ids(client: TestClient, accounts: dict[Role, Account]) -> dict[str, int]:
    lead = accounts[Role.LEAD]
    created = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": "ids"},
        files={"qrels": ("qrels.txt", _qrels()), "corpus": ("corpus.jsonl", _corpus())},
    )
    assert created.status_code == 201, created.text
    golden_id = int(created.json()["id"])
    run = client.post(
        f"/api/v1/golden-sets/{golden_id}/runs",
        headers=lead.headers,
        data={"name": "r"},
        files={"run": ("run.trec", _run())},
    )
    assert run.status_code == 201, run.text
    triage = client.post(
        f"/api/v1/runs/{run.json()['id']}/triages", headers=lead.headers, json={"depth": 2, "k": 1}
    )
    assert triage.status_code == 201, triage.text
    login(client, lead.email)
    return {"golden": golden_id, "run": int(run.json()["id"]), "triage": triage.json()["id"]}


def _query_links_lead_to_their_query(client: TestClient, soup: BeautifulSoup) -> set[str]:
    seen = set()
    for link in soup.select("a.query-link"):
        qid = link.get_text()
        page = follow(client, link["href"])
        assert page.select_one("#query")["data-qid"] == qid, link["href"]
        seen.add(qid)
    return seen


def _doc_links_lead_to_their_document(client: TestClient, soup: BeautifulSoup) -> set[str]:
    seen = set()
    for link in soup.select("a.doc-link"):
        doc = link.get_text()
        response = client.get(browser_path(link["href"]))
        assert response.status_code == 200, (doc, link["href"])
        page = BeautifulSoup(response.text, "html.parser")
        assert page.select_one("#document")["data-doc"] == doc, link["href"]
        seen.add(doc)
    return seen


def test_query_and_document_ids_link_to_their_own_pages(
    client: TestClient, hostile_ids: dict[str, int]
) -> None:
    run_page = get(client, f"/runs/{hostile_ids['run']}?k=1&depth=2", "page")
    assert _query_links_lead_to_their_query(client, run_page) == set(QIDS)
    for qid_link in run_page.select("a.query-link"):
        query_page = follow(client, qid_link["href"])
        assert _doc_links_lead_to_their_document(client, query_page) >= set(DOCS)
        document_page = follow(client, query_page.select_one("a.doc-link")["href"])
        assert _query_links_lead_to_their_query(client, document_page) == set(QIDS)
    dashboard = get(client, f"/triages/{hostile_ids['triage']}", "page")
    assert _query_links_lead_to_their_query(client, dashboard) == set(QIDS)
    assert _doc_links_lead_to_their_document(client, dashboard) == set(DOCS) - {"/lead"}
    backlog = get(client, f"/triages/{hostile_ids['triage']}/backlog?per_page=100", "page")
    assert _query_links_lead_to_their_query(client, backlog) == set(QIDS)
    assert _doc_links_lead_to_their_document(client, backlog) == set(DOCS) - {"/lead"}


def test_a_cause_name_filters_the_backlog_it_links(
    client: TestClient, accounts: dict[Role, Account], hostile_ids: dict[str, int]
) -> None:
    lead = accounts[Role.LEAD]
    causes = ["a/../b", "x?y#z&w=1", "..", "100% sure", "原因"]
    answer = client.put(
        f"/api/v1/golden-sets/{hostile_ids['golden']}/causes",
        headers=lead.headers,
        json={"causes": causes},
    )
    assert answer.status_code == 200, answer.text
    triage = hostile_ids["triage"]
    misses = client.get(
        f"/api/v1/triages/{triage}/misses?per_page=100", headers=lead.headers
    ).json()["items"]
    for miss, cause in zip(misses, causes, strict=False):
        labelled = client.post(
            f"/api/v1/misses/{miss['id']}/label",
            headers=lead.headers,
            json={"category": cause, "version": miss["version"]},
        )
        assert labelled.status_code == 200, labelled.text
    dashboard = get(client, f"/triages/{triage}", "page")
    for cause in causes:
        link = dashboard.select_one(f"tr[data-cause='{cause}'] a")
        assert link is not None, cause
        backlog = follow(client, link["href"])
        shown = {td["data-cause"] for td in backlog.select("td[data-cause]")}
        assert shown == {cause}, (cause, link["href"])


@pytest.mark.parametrize(
    ("url", "status", "code"),
    [
        ("/golden-sets/{golden}/series?name=", 422, "validation_error"),
        ("/golden-sets/{golden}/series", 422, "validation_error"),
        ("/golden-sets/{golden}/series?name=nope", 404, "series_not_found"),
        ("/golden-sets/{golden}/series/nope%2Fnot", 404, "series_not_found"),
    ],
)
def test_a_series_that_is_not_there_is_a_product_page(
    client: TestClient, named_series: int, url: str, status: int, code: str
) -> None:
    answer = client.get(url.format(golden=named_series), headers={"Accept": "text/html"})
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    error = BeautifulSoup(answer.text, "html.parser").select_one("#error")
    assert error is not None
    assert error["data-status"] == str(status)
    assert answer.headers["x-error-code"] == error["data-code"]


def test_a_download_is_named_after_the_run_as_given(
    client: TestClient, accounts: dict[Role, Account], named_series: int
) -> None:
    """A run's name is in its backlog's file name: exact in ``filename*`` (RFC 5987), and an
    ASCII fallback without a path separator, a quote or a percent sign."""
    lead = accounts[Role.LEAD]
    runs = client.get(
        f"/api/v1/golden-sets/{named_series}/runs?per_page=100", headers=lead.headers
    ).json()["items"]
    for run in runs:
        made = client.post(
            f"/api/v1/runs/{run['id']}/triages", headers=lead.headers, json={"depth": 3, "k": 1}
        )
        assert made.status_code == 201, made.text
        triage_id = made.json()["id"]
        backlog = get(client, f"/triages/{triage_id}/backlog", "page")
        for fmt in ("csv", "json"):
            link = backlog.select_one(f"#download-{fmt}")
            assert link is not None
            answer = client.get(link["href"])
            assert answer.status_code == 200, answer.text
            disposition = answer.headers["content-disposition"]
            fallback = disposition.split('filename="', 1)[1].split('"', 1)[0]
            exact = unquote(disposition.split("filename*=UTF-8''", 1)[1])
            assert exact == f"misstriage-{run['name']}-triage-{triage_id}-backlog.{fmt}"
            assert not set(fallback) & set('/\\"%;'), fallback
            assert all(0x20 <= ord(c) < 0x7F for c in fallback)
