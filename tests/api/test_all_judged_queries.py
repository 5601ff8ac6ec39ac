"""trec_eval ``-c`` in the service: ``all_judged_queries`` on the metrics and queries API, the
golden-set page's checkbox and the run page's link; off by default, and the conventions say
which queries were averaged. Compared with pytrec_eval (trec_eval's C code), whose per-query
values are averaged by hand over every judged query (a query absent from the run counts 0)."""

from __future__ import annotations

from statistics import fmean

import pytest
import pytrec_eval
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.eval.conventions import ALL_JUDGED_QUERIES, AVERAGED_QUERIES
from app.models import Role
from tests.support.service import ORIGIN, Account, login

# q3's judgments are all non-positive: left out by default, averaged in as 0 with -c.
# q2 has a grade-2 document only; q4 is judged and absent from the run.
QRELS = "q1 0 a 1\nq1 0 b 2\nq1 0 c 0\nq2 0 d 2\nq3 0 e 0\nq3 0 f -1\nq4 0 g 1\n"
RUN = (
    "q1 Q0 c 1 9 r\nq1 Q0 a 2 8 r\nq1 Q0 x 3 7 r\nq1 Q0 b 4 6 r\n"
    "q2 Q0 y 1 5 r\nq2 Q0 d 2 4 r\nq3 Q0 e 1 3 r\n"
)
K, DEPTH = 2, 10


def oracle() -> dict[str, dict[str, float]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in QRELS.splitlines():
        qid, _, doc, grade = line.split()
        qrels.setdefault(qid, {})[doc] = int(grade)
    run: dict[str, dict[str, float]] = {}
    for line in RUN.splitlines():
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
    measures = {f"recall.{K}", f"recall.{DEPTH}", f"ndcg_cut.{K}"}
    found = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    return {qid: found.get(qid, {}) for qid in qrels}


@pytest.fixture
def run_id(client: TestClient, accounts: dict[Role, Account]) -> int:
    lead = accounts[Role.LEAD].headers
    golden = client.post(
        "/api/v1/golden-sets", headers=lead, data={"name": "c"}, files={"qrels": ("q", QRELS)}
    )
    assert golden.status_code == 201, golden.text
    run = client.post(
        f"/api/v1/golden-sets/{golden.json()['id']}/runs",
        headers=lead,
        data={"name": "r"},
        files={"run": ("r.trec", RUN)},
    )
    assert run.status_code == 201, run.text
    return int(run.json()["id"])


def test_the_api_averages_every_judged_query_only_when_asked(
    client: TestClient, accounts: dict[Role, Account], run_id: int
) -> None:
    reviewer = accounts[Role.REVIEWER].headers
    expected = oracle()
    url = f"/api/v1/runs/{run_id}/metrics?k={K}&depth={DEPTH}&gain=linear"
    default = client.get(url, headers=reviewer).json()
    switched = client.get(url + "&all_judged_queries=true", headers=reviewer).json()
    assert default["conventions"]["all_judged_queries"] is False
    assert default["conventions"]["averaged_queries"] == AVERAGED_QUERIES
    assert switched["conventions"]["all_judged_queries"] is True
    assert switched["conventions"]["averaged_queries"] == ALL_JUDGED_QUERIES
    assert (default["queries"], switched["queries"]) == (3, 4)
    for ours, measure in ((f"R@{K}", f"recall_{K}"), (f"R@{DEPTH}", f"recall_{DEPTH}"),
                          (f"nDCG@{K}", f"ndcg_cut_{K}")):  # fmt: skip
        every = fmean(expected[q].get(measure, 0.0) for q in expected)
        relevant = fmean(expected[q].get(measure, 0.0) for q in ("q1", "q2", "q4"))
        assert switched["measures"][ours] == pytest.approx(every, abs=1e-9)
        assert default["measures"][ours] == pytest.approx(relevant, abs=1e-9)
    rows = client.get(
        f"/api/v1/runs/{run_id}/queries?k={K}&depth={DEPTH}&all_judged_queries=true",
        headers=reviewer,
    ).json()
    assert [r["qid"] for r in rows["items"]] == ["q1", "q2", "q3", "q4"]
    assert rows["items"][2]["R@2"] == 0.0
    refused = client.get(url + "&all_judged_queries=maybe", headers=reviewer)
    assert refused.status_code == 422
    assert refused.json()["error"]["code"]


def test_the_pages_offer_the_switch(
    client: TestClient, accounts: dict[Role, Account], run_id: int
) -> None:
    login(client, accounts[Role.LEAD].email)
    golden_id = client.get(f"/api/v1/runs/{run_id}", headers=accounts[Role.LEAD].headers).json()[
        "golden_set_id"
    ]
    for switched in (False, True):
        query = "?all_judged_queries=true" if switched else ""
        page = BeautifulSoup(client.get(f"/golden-sets/{golden_id}{query}").text, "html.parser")
        box = page.select_one("input[name=all_judged_queries]")
        assert box is not None
        assert box.has_attr("checked") is switched
        sentence = page.select_one("#averaged-queries")
        assert sentence is not None
        text = sentence.get_text(" ", strip=True)
        assert (ALL_JUDGED_QUERIES if switched else AVERAGED_QUERIES) in text
        assert f"over {4 if switched else 3} queries" in text

        run_page = BeautifulSoup(client.get(f"/runs/{run_id}{query}").text, "html.parser")
        qids = [row["data-qid"] for row in run_page.select("#queries tbody tr[data-qid]")]
        assert qids == (["q1", "q2", "q3", "q4"] if switched else ["q1", "q2", "q4"])
        toggle = run_page.select_one("#averaged-queries a")
        assert toggle is not None
        assert ("all_judged_queries=true" in str(toggle["href"])) is not switched
        # every sort link keeps the switch
        sort_links = [str(a["href"]) for a in run_page.select("#queries thead a")]
        assert sort_links
        assert all(("all_judged_queries=true" in h) is switched for h in sort_links)
    bad = client.get(f"/golden-sets/{golden_id}?all_judged_queries=maybe", headers=ORIGIN)
    assert bad.status_code == 422
    page = BeautifulSoup(bad.text, "html.parser")
    assert page.select_one("#all_judged_queries-error") is not None
