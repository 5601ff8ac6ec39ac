"""The query page and the document page: where every query id and document id links; as a
page and as a fragment, 404 for unknown ids, hostile and slashed document ids."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.models import Role
from tests.support.payloads import assert_inert
from tests.support.service import ORIGIN, Account, get, login

HOSTILE = "<script>alert(1)</script>"
SLASHED = "guides/rate-limits"
QRELS = f"q1 0 {SLASHED} 2\nq1 0 {HOSTILE} 1\nq1 0 c 0\nq2 0 c 1\n"
QUERIES = "q1\thow do rate limits work\nq2\tplain\n"
CORPUS = "".join(
    json.dumps(doc) + "\n"
    for doc in (
        {
            "_id": SLASHED,
            "title": "Rate limits",
            "text": "Requests are throttled.",
            "parent_id": "guides",
            "chunk_index": 0,
            "cluster_id": "k1",
        },
        {"_id": HOSTILE, "title": "A copy", "text": "Requests are throttled.", "cluster_id": "k1"},
        {"_id": "c", "title": "Other", "text": "Something else."},
        {"_id": "guides", "title": "Guides", "text": "All guides."},
    )
)
RUN = f"q1 Q0 c 1 9 t\nq1 Q0 {SLASHED} 2 8 t\nq2 Q0 c 1 9 t\n"


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def ids(client: TestClient, accounts: dict[Role, Account]) -> dict[str, int]:
    login(client, accounts[Role.LEAD].email)
    created = client.post(
        "/golden-sets",
        data={"name": "lookup"},
        headers=ORIGIN,
        files={
            "qrels": ("q.txt", QRELS),
            "queries": ("q.tsv", QUERIES),
            "corpus": ("corpus.jsonl", CORPUS),
        },
        follow_redirects=False,
    )
    assert created.status_code == 303, created.text
    golden_url = created.headers["location"]
    run = client.post(
        f"{golden_url}/runs",
        data={"name": "first"},
        headers=ORIGIN,
        files={"run": ("first.trec", RUN)},
        follow_redirects=False,
    )
    assert run.status_code == 303, run.text
    lead = accounts[Role.LEAD].headers
    runs = client.get(f"/api/v1{urlsplit(golden_url).path}/runs", headers=lead).json()
    items = runs["items"] if isinstance(runs, dict) else runs
    return {"golden": int(golden_url.rsplit("/", 1)[1]), "run": items[0]["id"]}


def test_query_page(client: TestClient, ids: dict[str, int], mode: str) -> None:
    soup = get(client, f"/runs/{ids['run']}/queries/q1?k=1&depth=1", mode)
    assert soup.select_one("#query")["data-qid"] == "q1"
    assert "how do rate limits work" in soup.select_one("#query").get_text()
    assert (
        soup.select_one("#verdict")
        .get_text(" ", strip=True)
        .endswith("2 relevant documents outside the top 1, of 2.")
    )
    measures = [li.select_one(".name").get_text() for li in soup.select("#measures .stat")]
    assert measures == ["R@1", "R@1", "nDCG@1", "nDCG_cand@1", "misses@1"]
    rows = [
        [td.get_text(" ", strip=True) for td in tr.select("td")]
        for tr in soup.select("#judged tbody tr")
    ]
    assert rows == [
        [SLASHED, "Rate limits", "2", "2", "missed"],
        [HOSTILE, "A copy", "1", "not retrieved", "missed"],
        ["c", "Other", "0", "1", "not relevant"],
    ]
    assert [tr["data-doc"] for tr in soup.select("#head tbody tr")] == ["c", SLASHED]
    # every document id links to its page as one path segment (a slash as %2F), the markup
    # escaped
    links = [a["href"] for a in soup.select("#judged a.doc-link")]
    golden = ids["golden"]
    assert links == [
        f"/golden-sets/{golden}/documents/guides%2Frate-limits",
        f"/golden-sets/{golden}/documents/%3Cscript%3Ealert%281%29%3C%2Fscript%3E",
        f"/golden-sets/{golden}/documents/c",
    ]
    for href in links:
        followed = client.get(href)
        assert followed.status_code == 200, href
        assert_inert(followed.text, href)


def test_document_page(client: TestClient, ids: dict[str, int], mode: str) -> None:
    golden, run = ids["golden"], ids["run"]
    soup = get(client, f"/golden-sets/{golden}/documents/{SLASHED}", mode)
    assert soup.select_one("#document")["data-doc"] == SLASHED
    assert soup.select_one("#document").get_text() == f"{SLASHED}: Rate limits"
    assert soup.select_one("#summary").get_text() == "Judged for 1 query (1 relevant)."
    corpus = {
        dt.get_text(): dd.get_text(" ", strip=True)
        for dt, dd in zip(soup.select("#corpus dt"), soup.select("#corpus dd"), strict=True)
    }
    assert corpus == {
        "Parent": "guides",
        "Chunk": "0",
        "Duplicate cluster": f"k1 : {HOSTILE}",
        "In the index": "yes",
    }
    assert soup.select_one("#text").get_text() == "Requests are throttled."
    judgment = soup.select_one("#judgments tbody tr")
    assert judgment["data-qid"] == "q1"
    assert judgment.select_one("a.query-link")["href"] == f"/runs/{run}/queries/q1"
    ranked = [
        [td.get_text(" ", strip=True) for td in tr.select("td")]
        for tr in soup.select("#ranked-in tbody tr")
    ]
    assert ranked == [["first", "q1", "2"]]


def test_hostile_document_id_is_text(client: TestClient, ids: dict[str, int], mode: str) -> None:
    headers = {"HX-Request": "true"} if mode == "fragment" else {}
    url = f"/golden-sets/{ids['golden']}/documents/%3Cscript%3Ealert%281%29%3C/script%3E"
    response = client.get(url, headers=headers)
    assert response.status_code == 200
    soup = assert_inert(response.text, url)
    assert soup.select_one("#document")["data-doc"] == HOSTILE
    assert soup.select_one("#document").get_text() == f"{HOSTILE}: A copy"
    # judged, and no run retrieved it: each run says so, as text
    ranked = [
        [td.get_text(" ", strip=True) for td in tr.select("td")]
        for tr in soup.select("#ranked-in tbody tr")
    ]
    assert ranked
    assert all(row[-1] == "not retrieved" for row in ranked), ranked


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/runs/{run}/queries/nope", "query_not_found"),
        ("/runs/999999/queries/q1", "run_not_found"),
        ("/golden-sets/{golden}/documents/nope", "document_not_found"),
        ("/golden-sets/{golden}/documents/a/b/c", "document_not_found"),
        ("/golden-sets/999999/documents/c", "golden_set_not_found"),
    ],
)
def test_unknown_ids_answer_404(
    client: TestClient, ids: dict[str, int], path: str, code: str
) -> None:
    response = client.get(path.format(run=ids["run"], golden=ids["golden"]))
    assert response.status_code == 404
    assert response.headers["x-error-code"] == code
    soup = BeautifulSoup(response.text, "html.parser")
    assert soup.select_one("#error")["data-status"] == "404"


@pytest.mark.parametrize("kind", ["queries", "documents"])
def test_a_huge_unknown_id_is_not_echoed_whole(
    client: TestClient, ids: dict[str, int], kind: str
) -> None:
    base = f"/runs/{ids['run']}" if kind == "queries" else f"/golden-sets/{ids['golden']}"
    response = client.get(f"{base}/{kind}/" + "z" * 20_000)
    assert response.status_code == 404
    assert "z" * 1_000 not in response.text
    assert "20,000 characters" in response.text


def test_a_reviewer_may_view_both(
    client: TestClient, ids: dict[str, int], accounts: dict[Role, Account]
) -> None:
    login(client, accounts[Role.REVIEWER].email)
    assert client.get(f"/runs/{ids['run']}/queries/q2").status_code == 200
    assert client.get(f"/golden-sets/{ids['golden']}/documents/c").status_code == 200
