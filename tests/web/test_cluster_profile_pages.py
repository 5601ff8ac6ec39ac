"""A log run uploaded through the golden-set page's form as its per-query cluster profile (the
output of docs/sql/unique_clusters.sql): its clusters page shows the figures at the imported
ks (worked out by hand below), as a full page and as a fragment; a k the file does not hold
answers the page with the field's message; a profile as a judged run, or a bad one, goes back
to the form with the error's code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.eval.formatting import share
from app.models import Role
from tests.support.log_runs import DEMO
from tests.support.service import ORIGIN, Account, get, login

#: Three queries at k = 5 and 10: q2 returned 2 results (short), q3 has no repeat at k=5.
PROFILE = (
    "qid,k,distinct_clusters,results,clustered\n"
    "q1,5,3,5,4\nq1,10,6,10,8\n"
    "q2,5,2,2,1\nq2,10,2,2,1\n"
    "q3,5,5,5,0\nq3,10,9,10,3\n"
)
#: k -> (mean, median, share at or below 4, short queries): u = (3, 2, 5) and (6, 2, 9).
EXPECTED = {5: (10 / 3, 3, 2 / 3, 1), 10: (17 / 3, 6, 1 / 3, 1)}


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _golden_set(client: TestClient, lead: Account) -> int:
    answer = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": "helpcentre"},
        files={
            name: (f"{name}.{ext}", (DEMO / f"{name}.{ext}").read_bytes())
            for name, ext in (("qrels", "tsv"), ("queries", "jsonl"))
        },
    )
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])


def _post(client: TestClient, golden_id: int, text: str, **data: str) -> Any:
    return client.post(
        f"/golden-sets/{golden_id}/runs",
        data={"name": "lake profile", **data},
        files={"run": ("profile.csv", text.encode())},
        headers=ORIGIN,
        follow_redirects=False,
    )


def test_the_profile_uploads_and_its_page_shows_the_imported_ks(
    client: TestClient, accounts: dict[Role, Account], mode: str
) -> None:
    lead = accounts[Role.LEAD]
    golden_id = _golden_set(client, lead)
    login(client, lead.email)
    posted = _post(client, golden_id, PROFILE, kind="log")  # the format detected
    assert posted.status_code == 303, posted.text
    location = posted.headers["location"]
    assert location.startswith("/runs/")
    assert location.endswith("/clusters")
    page = get(client, location, mode)
    assert page.select_one("#clusters-from")["data-exact-ks"] == "5,10"
    assert page.select_one("#clusters-k")["value"] == "5,10"
    rows = page.select("#cluster-table tbody tr")
    assert [int(r["data-k"]) for r in rows] == [5, 10]
    for row in rows:
        mean, median, at_or_below, short = EXPECTED[int(row["data-k"])]
        cells = {td["data-measure"]: td.get_text(strip=True) for td in row.select("td")}
        assert cells["mean_distinct"] == f"{mean:.4f}"
        assert cells["median"] == f"{median:g}"
        assert cells["share_at_or_below"] == share(at_or_below)
        assert cells["short_queries"] == str(short)
        assert "prompt_tokens" not in cells  # no cost side
    histogram = {
        int(tr["data-k"]): {s["data-distinct"]: int(s["data-queries"]) for s in tr.select("span")}
        for tr in page.select("#cluster-histogram tbody tr")
    }
    assert histogram == {5: {"2": 1, "3": 1, "5": 1}, 10: {"2": 1, "6": 1, "9": 1}}
    chart = page.select_one("svg#clusters-chart")
    mean_titles = [
        c.title.get_text() for c in chart.select_one("g.series[data-series=mean]").select("circle")
    ]
    assert mean_titles == [f"mean at k={k}: {EXPECTED[k][0]:.2f}" for k in (5, 10)]

    # A k the profile does not hold: the page with the field's message, at the known ks.
    headers = {"HX-Request": "true"} if mode == "fragment" else {}
    answer = client.get(f"{location}?k=5,20", headers=headers)
    assert answer.status_code == 422
    assert answer.headers["x-error-code"] == "invalid_k"
    refused = BeautifulSoup(answer.text, "html.parser")
    assert "exact at k = 5, 10 only" in refused.select_one("#k-error").get_text()
    assert refused.select_one("#clusters-k")["value"] == "5,20"
    assert [int(r["data-k"]) for r in refused.select("#cluster-table tbody tr")] == [5, 10]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_judged_or_bad_profile_goes_back_to_the_form(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead = accounts[Role.LEAD]
    golden_id = _golden_set(client, lead)
    login(client, lead.email)
    judged = _post(client, golden_id, PROFILE, kind="judged")
    assert judged.status_code == 303
    assert judged.headers["x-error-code"] == "profile_is_log"
    bad = _post(
        client,
        golden_id,
        PROFILE.replace("q3,10,9,", "q3,10,11,"),
        kind="log",
        format="cluster_profile",
    )
    assert bad.headers["x-error-code"] == "bad_input"
    runs = client.get(f"/api/v1/golden-sets/{golden_id}/runs", headers=lead.headers)
    assert runs.json()["total"] == 0
