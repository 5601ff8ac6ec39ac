"""The clusters page of a log run, imported through the golden-set page's form: every figure
it shows (table, distribution, chart) equals the plain-Python oracle of tests/support/log_runs.py,
as a full page and as a fragment, on both databases; bad controls answer the page with the
entered values kept; the metrics pages of a log run say why they have nothing to show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.eval.formatting import share
from app.models import Role
from tests.support.log_runs import DEMO, demo_corpus, oracle, rankings, write_log_run
from tests.support.service import ORIGIN, Account, get, login

KS = (5, 10, 25, 50, 80)
PRICE, PER_DAY = 2.5, 1000.0


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _import_log_run(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> tuple[int, int, Path]:
    """The demo golden set (API), then the log run through the page's form as the lead."""
    lead = accounts[Role.LEAD]
    answer = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": "helpcentre"},
        files={
            name: (f"{name}.{ext}", (DEMO / f"{name}.{ext}").read_bytes())
            for name, ext in (("qrels", "tsv"), ("queries", "jsonl"), ("corpus", "jsonl"))
        },
    )
    assert answer.status_code == 201, answer.text
    golden_id = int(answer.json()["id"])
    path = write_log_run(tmp_path / "query-log.trec")
    login(client, lead.email)
    posted = client.post(
        f"/golden-sets/{golden_id}/runs",
        data={"name": "query log", "kind": "log"},
        files={"run": (path.name, path.read_bytes())},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert posted.status_code == 303, posted.text
    location = posted.headers["location"]
    assert location.startswith("/runs/")
    assert location.endswith("/clusters")
    return golden_id, int(location.split("/")[2]), path


def _cells(row: Any) -> dict[str, str]:
    return {td["data-measure"]: td.get_text(strip=True) for td in row.select("td[data-measure]")}


def test_the_clusters_page_shows_the_oracles_figures(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path, mode: str
) -> None:
    golden_id, run_id, path = _import_log_run(client, accounts, tmp_path)
    expected = oracle(
        rankings(path.read_text()),
        demo_corpus(),
        ks=KS,
        threshold=3,
        price=PRICE,
        per_day=PER_DAY,
    )
    query = (
        f"k={','.join(map(str, KS))}&threshold=3&price_per_mtok={PRICE}&queries_per_day={PER_DAY:g}"
    )
    page = get(client, f"/runs/{run_id}/clusters?{query}", mode)
    assert page.select_one("#cluster-facts")["data-kind"] == "log"
    assert f"{expected['queries']} queries" in page.select_one("#cluster-facts").get_text()

    rows = page.select("#cluster-table tbody tr")
    assert [int(r["data-k"]) for r in rows] == list(KS)
    for row, want in zip(rows, expected["depths"], strict=True):
        marginal = want["marginal_per_slot"]
        assert _cells(row) == {
            "k": str(want["k"]),
            "mean_distinct": f"{want['mean_distinct']:.4f}",
            "distinct_fraction": f"{want['distinct_fraction']:.4f}",
            "marginal_per_slot": "\u2013" if marginal is None else f"{marginal:.4f}",
            "median": f"{want['median']:g}",
            "p10": f"{want['p10']:g}",
            "p90": f"{want['p90']:g}",
            "share_at_or_below": share(want["share_at_or_below"]),
            "short_queries": str(want["short_queries"]),
            "prompt_tokens": f"{want['prompt_tokens']:.2f}",
            "daily_price": f"{want['daily_price']:.4f}",
        }
    histogram = {
        int(tr["data-k"]): {
            span["data-distinct"]: int(span["data-queries"]) for span in tr.select("span.bin")
        }
        for tr in page.select("#cluster-histogram tbody tr")
    }
    assert histogram == {d["k"]: d["histogram"] for d in expected["depths"]}

    chart = page.select_one("svg#clusters-chart")
    series = {g["data-series"]: g for g in chart.select("g.series")}
    assert sorted(series) == ["mean", "median", "p10", "p90"]
    for name, key in (("mean", "mean_distinct"), ("median", "median"), ("p90", "p90")):
        titles = [c.title.get_text() for c in series[name].select("circle")]
        assert titles == [f"{name} at k={d['k']}: {d[key]:.2f}" for d in expected["depths"]]
    notes = [t.get_text() for t in chart.select("text.cost")]
    assert notes == [f"{d['prompt_tokens']:,.0f} tok" for d in expected["depths"]]

    # The golden-set page lists the log run apart, linked to this page, not among the runs.
    golden = get(client, f"/golden-sets/{golden_id}", mode)
    links = [a["href"] for a in golden.select("#log-runs-table a")]
    assert links == [f"/runs/{run_id}/clusters"]
    assert golden.select("#runs-table tr[data-run]") == []


def test_bad_controls_keep_the_entered_values(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path, mode: str
) -> None:
    _, run_id, path = _import_log_run(client, accounts, tmp_path)
    headers = {"HX-Request": "true"} if mode == "fragment" else {}
    answer = client.get(
        f"/runs/{run_id}/clusters?k=10,x&threshold=-2&price_per_mtok=cheap&queries_per_day=5",
        headers=headers,
    )
    assert answer.status_code == 422
    assert answer.headers["x-error-code"] == "invalid_k"
    page = BeautifulSoup(answer.text, "html.parser")
    assert (page.find("html") is not None) == (mode == "page")
    values = {i["name"]: i.get("value") for i in page.select("form.controls input")}
    assert values == {
        "k": "10,x",
        "threshold": "-2",
        "price_per_mtok": "cheap",
        "queries_per_day": "5",
    }
    errors = {e["id"] for e in page.select(".field-error")}
    assert errors == {"k-error", "threshold-error", "price_per_mtok-error"}
    # The figures shown are the defaults' (said so), with the usable value kept.
    assert [int(r["data-k"]) for r in page.select("#cluster-table tbody tr")] == [
        10,
        20,
        30,
        40,
        50,
    ]
    expected = oracle(
        rankings(path.read_text()), demo_corpus(), ks=(10, 20, 30, 40, 50), threshold=4
    )
    first = _cells(page.select_one("#cluster-table tbody tr"))
    assert first["share_at_or_below"] == share(expected["depths"][0]["share_at_or_below"])
    assert "daily_price" not in first
    assert page.select_one("#shown-values") is not None


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_log_runs_metrics_pages_say_why(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    golden_id, run_id, _ = _import_log_run(client, accounts, tmp_path)
    for url in (f"/runs/{run_id}", f"/golden-sets/{golden_id}/compare?a={run_id}&b={run_id}"):
        answer = client.get(url)
        assert answer.status_code == 409, url
        assert answer.headers["x-error-code"] == "log_run"
        page = BeautifulSoup(answer.text, "html.parser")
        assert "without judgments" in page.select_one('[role="alert"]').get_text()
    triage = client.post(f"/runs/{run_id}/triages", headers=ORIGIN, follow_redirects=False)
    assert triage.status_code == 303
    assert triage.headers["x-error-code"] == "log_run"
