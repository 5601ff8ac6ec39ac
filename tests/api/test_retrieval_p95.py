"""The depth advisor with the first stage's p95 (issue 15, item 2: "optionally the retrieval
p95 at each depth"): measured at a few depths, filled in between, added to the reranking cost
on the API, the golden-set page and ``misstriage evaluate``; a bad value is refused on each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.models import Role
from tests.support.cli import evaluate_cli
from tests.support.service import Account, login

QRELS = "q1 0 a 1\nq1 0 b 1\nq2 0 c 1\n"
RUN = "q1 Q0 a 1 9 r\nq1 Q0 x 2 8 r\nq2 Q0 y 1 5 r\nq2 Q0 c 2 4 r\n"
P95 = "10:12,100:30,1000:90"
#: the curve's depths (the defaults and k=2, depth=10) and the p95 filled at each
FILLED = {2: 12.0, 10: 12.0, 20: 14.0, 50: 20.0, 100: 30.0, 200: 30 + 60 / 9, 1000: 90.0}


def expected_costs(cost: float) -> list[float]:
    return [d * cost + p95 for d, p95 in sorted(FILLED.items())]


@pytest.fixture
def ids(client: TestClient, accounts: dict[Role, Account]) -> tuple[int, int]:
    lead = accounts[Role.LEAD].headers
    golden = client.post(
        "/api/v1/golden-sets", headers=lead, data={"name": "p"}, files={"qrels": ("q", QRELS)}
    ).json()
    run = client.post(
        f"/api/v1/golden-sets/{golden['id']}/runs",
        headers=lead,
        data={"name": "r"},
        files={"run": ("r.trec", RUN)},
    ).json()
    return int(golden["id"]), int(run["id"])


def test_the_api_adds_the_retrieval_p95(
    client: TestClient, accounts: dict[Role, Account], ids: tuple[int, int]
) -> None:
    reviewer = accounts[Role.REVIEWER].headers
    url = f"/api/v1/runs/{ids[1]}/metrics?k=2&depth=10&cost_ms=3.1"
    cost = client.get(f"{url}&retrieval_p95={P95}", headers=reviewer).json()["cost"]
    assert [r["depth"] for r in cost["per_depth"]] == sorted(FILLED)
    assert [r["cost_ms"] for r in cost["per_depth"]] == pytest.approx(expected_costs(3.1))
    without = client.get(url, headers=reviewer).json()["cost"]
    assert [r["cost_ms"] for r in without["per_depth"]] == pytest.approx(
        [d * 3.1 for d in sorted(FILLED)]
    )
    for bad in ("10", "0:1", "10:-2", "10:1,10:2", "x" * 1500):
        refused = client.get(f"{url}&retrieval_p95={bad}", headers=reviewer)
        assert refused.status_code == 422, bad
        assert refused.json()["error"]["code"] == "invalid_retrieval_p95"
        assert len(refused.text) < 1000


def test_the_golden_set_page_adds_the_retrieval_p95(
    client: TestClient, accounts: dict[Role, Account], ids: tuple[int, int]
) -> None:
    login(client, accounts[Role.LEAD].email)
    page = BeautifulSoup(
        client.get(f"/golden-sets/{ids[0]}?cost_ms=1&retrieval_p95={P95}").text, "html.parser"
    )
    field = page.select_one("input[name=retrieval_p95]")
    assert field is not None
    assert field["value"] == P95
    row = page.find("th", string="reranking cost (ms/query)")
    assert row is not None
    shown = [td.get_text(strip=True) for td in row.find_parent("tr").find_all("td")]
    assert shown == ["22", "34", "70", "130", "236.667", "1090"]  # depth x 1 ms + the p95
    bad = client.get(f"/golden-sets/{ids[0]}?cost_ms=1&retrieval_p95=10:x")
    assert bad.status_code == 422
    error = BeautifulSoup(bad.text, "html.parser").select_one("#retrieval_p95-error")
    assert error is not None
    assert "depth:ms" in error.get_text()


def test_evaluate_adds_the_retrieval_p95(tmp_path: Path) -> None:
    (tmp_path / "q.qrels").write_text(QRELS)
    (tmp_path / "r.trec").write_text(RUN)
    base = ["evaluate", "--qrels", tmp_path / "q.qrels", "--run", f"r={tmp_path / 'r.trec'}"]
    done = evaluate_cli(
        *base, "--k", "2", "--depth", "10", "--cost-ms", "3.1", "--retrieval-p95", P95,
        "--format", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    costs = [r["cost_ms"] for r in run["cost"]["per_depth"]]
    assert costs == pytest.approx(expected_costs(3.1))
    refused = evaluate_cli(*base, "--cost-ms", "3.1", "--retrieval-p95", "10:nan")
    assert refused.returncode == 2
    assert "--retrieval-p95" in refused.stderr
