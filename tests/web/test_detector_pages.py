"""Duplicates on the pages (issue 27), on both databases: the golden set's "Duplicates"
section lists its detector runs and gives a lead the two forms (a reviewer neither sees them
nor may post them); finding duplicates leads to the detector run page and its calibration
table; a reviewer judges every sampled pair through the review form (a stale version refused
and shown again, a skip passed on) until none is left; applying a threshold from the run page
changes the sentence the golden set page shows; a bad side file is named with its line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.models import Role
from app.web.pair_diff import word_diff
from tests.support.dupe_corpus import make_corpus
from tests.support.service import HTMX, ORIGIN, Account, get, login

PER_BAND = 3


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _golden_set(client: TestClient, lead: Account, tmp_path: Path) -> tuple[int, dict[str, str]]:
    """A golden set whose corpus holds generated copies with known truth (doc id -> group)."""
    corpus = make_corpus(80, copy_share=0.25, seed=11)
    docs = "".join(json.dumps(d) + "\n" for d in corpus.docs)
    groups: dict[str, list[str]] = {}
    for doc, group in corpus.truth.items():
        groups.setdefault(group, []).append(doc)
    copied = sorted((sorted(m) for m in groups.values() if len(m) > 1), key=lambda m: m[0])
    qrels = "".join(f"q{i}\t0\t{m[0]}\t1\n" for i, m in enumerate(copied[:5]))
    queries = "".join(json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n" for i in range(5))
    made = client.post(
        "/api/v1/golden-sets",
        data={"name": "copies"},
        files={
            "qrels": ("qrels.tsv", qrels),
            "queries": ("queries.jsonl", queries),
            "corpus": ("corpus.jsonl", docs),
        },
        headers=lead.headers,
    )
    assert made.status_code == 201, made.text
    return int(made.json()["id"]), corpus.truth


def _detect(client: TestClient, golden: int) -> int:
    """The lead's "Find duplicates" form: 303 to the new run's page."""
    response = client.post(
        f"/golden-sets/{golden}/detector-runs",
        data={"threshold": "0.8", "per_band": str(PER_BAND)},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    found = re.fullmatch(r"/detector-runs/(\d+)", response.headers["location"])
    assert found is not None, response.headers["location"]
    return int(found.group(1))


def _cells(row: BeautifulSoup) -> dict[str, str]:
    return {td["data-measure"]: td.get_text(strip=True) for td in row.select("td[data-measure]")}


def test_section_lists_runs_and_run_page_shows_bands(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path, mode: str
) -> None:
    lead = accounts[Role.LEAD]
    golden, truth = _golden_set(client, lead, tmp_path)
    login(client, lead.email)
    soup = get(client, f"/golden-sets/{golden}", mode)
    assert soup.select_one("#applied-detector").get_text(strip=True) == "No cluster ids yet."
    assert soup.select_one("#no-detector-runs") is not None
    assert soup.select_one("#find-duplicates form") is not None
    assert soup.select_one("#dup-threshold")["value"] == "0.80"
    assert soup.select_one("#dup-per-band")["value"] == "20"
    assert soup.select_one("#import-cluster-ids input[type=file][name=ids]") is not None

    run_id = _detect(client, golden)
    page = get(client, f"/detector-runs/{run_id}", mode)
    public = client.get(f"/api/v1/detector-runs/{run_id}", headers=lead.headers).json()
    rows = page.select("#bands-table tbody tr")
    assert [r["data-band"] for r in rows] == [b["label"] for b in reversed(public["bands"])]
    assert sum(int(_cells(r)["pairs"].replace(",", "")) for r in rows) == public["pairs"] > 0
    assert all(
        int(_cells(r)["sampled"]) == min(int(_cells(r)["pairs"].replace(",", "")), PER_BAND)
        for r in rows
    )
    # nothing reviewed: every share is unknown with the whole interval, and the note says so
    assert {_cells(r)["share"] for r in rows} == {"\u2013 [0.00, 1.00]"}
    assert page.select_one("#unreviewed-bands") is not None
    assert f"exactly: every pair of the {len(truth)} documents compared" in page.select_one(
        "#candidate-recall"
    ).get_text(" ", strip=True)
    params = {div.dt.get_text(): div.dd.get_text() for div in page.select("#parameters > div")}
    assert params["low"] == "0.60"
    assert (
        params["bands x rows"]
        == f"{public['parameters']['bands']} x {public['parameters']['rows']}"
    )
    thresholds = page.select("#thresholds-table tbody tr")
    assert [t["data-threshold"] for t in thresholds] == [
        f"{t['threshold']:.2f}" for t in reversed(public["thresholds"])
    ]
    assert len(page.select("#thresholds-table form button")) == len(thresholds)
    review = page.select_one("#review-pairs a")
    assert review.get_text(strip=True) == f"Review pairs ({public['sampled']} left)"
    assert (
        page.select_one("#detector-sentence")
        .get_text(strip=True)
        .startswith(f"Clusters from detector run {run_id}")
    )

    soup = get(client, f"/golden-sets/{golden}", mode)
    (row,) = soup.select("#detector-runs-table tbody tr")
    assert row["data-detector-run"] == str(run_id)
    assert row["data-state"] == "reviewing"
    assert row.select_one("a")["href"] == f"/detector-runs/{run_id}"
    assert _cells(row)["reviewed"] == f"0 / {public['sampled']}"
    assert lead.email in row.get_text()


def test_a_reviewer_sees_no_lead_forms_and_may_not_post_them(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead, reviewer = accounts[Role.LEAD], accounts[Role.REVIEWER]
    golden, _ = _golden_set(client, lead, tmp_path)
    login(client, lead.email)
    run_id = _detect(client, golden)
    login(client, reviewer.email)
    soup = get(client, f"/golden-sets/{golden}", "page")
    assert soup.select_one("#detector-runs-table") is not None
    assert soup.select_one("#find-duplicates") is None
    assert soup.select_one("#import-cluster-ids") is None
    page = get(client, f"/detector-runs/{run_id}", "page")
    assert page.select("#thresholds-table form") == []
    assert page.select_one("#review-pairs a") is not None
    for url, data, files in (
        (f"/golden-sets/{golden}/detector-runs", {"threshold": "0.8"}, None),
        (
            f"/golden-sets/{golden}/detector-runs/import",
            {},
            {"ids": ("ids.csv", "doc_id,cluster_id\n")},
        ),
        (f"/detector-runs/{run_id}/apply", {"threshold": "0.8"}, None),
    ):
        refused = client.post(url, data=data, files=files, headers=ORIGIN, follow_redirects=False)
        assert refused.status_code == 403, url
        assert refused.headers["content-type"].startswith("text/html")
        assert BeautifulSoup(refused.text, "html.parser").select_one("h1") is not None
    runs = client.get(f"/api/v1/golden-sets/{golden}/detector-runs", headers=lead.headers)
    assert runs.json()["total"] == 1
    assert runs.json()["items"][0]["state"] == "reviewing"


def _card(response_text: str) -> BeautifulSoup:
    return BeautifulSoup(response_text, "html.parser")


def test_review_through_the_form_then_apply(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path, mode: str
) -> None:
    lead, reviewer = accounts[Role.LEAD], accounts[Role.REVIEWER]
    golden, truth = _golden_set(client, lead, tmp_path)
    login(client, lead.email)
    run_id = _detect(client, golden)
    sampled = client.get(f"/api/v1/detector-runs/{run_id}", headers=lead.headers).json()["sampled"]
    headers = HTMX if mode == "fragment" else ORIGIN

    login(client, reviewer.email)
    start = get(client, f"/detector-runs/{run_id}/review", mode)
    assert start.select_one("#start form button") is not None
    got = client.post(f"/detector-runs/{run_id}/review/claim", headers=headers)
    assert got.status_code == 200, got.text
    card = _card(got.text)
    # the page shows the held pair on a reload, and claims nothing more
    again = get(client, f"/detector-runs/{run_id}/review", mode)
    assert (
        again.select_one("[data-pair]")["data-pair"] == card.select_one("[data-pair]")["data-pair"]
    )

    # a stale version: refused, said, and the same pair shown again as it stands
    held = card.select_one("[data-pair]")
    stale = client.post(
        f"/detector-runs/{run_id}/review/label",
        data={
            "pair_id": held["data-pair"],
            "version": str(int(held["data-version"]) + 1),
            "same": "true",
        },
        headers=headers,
    )
    assert stale.status_code == 409
    assert stale.headers["x-error-code"] == "stale_version"
    shown = _card(stale.text)
    assert "NOT saved" in shown.select_one("#message").get_text()
    assert shown.select_one("[data-pair]")["data-pair"] == held["data-pair"]

    # one skip (it goes to the others), every other pair judged by the truth
    skipped = client.post(
        f"/detector-runs/{run_id}/review/skip", data={"pair_id": held["data-pair"]}, headers=headers
    )
    assert skipped.status_code == 200
    card = _card(skipped.text)
    assert card.select_one("#message").get_text().startswith("Skipped:")
    judged = 0
    while card.select_one("#empty") is None:
        assert judged <= sampled, "the queue never emptied"
        pair = card.select_one("[data-pair]")
        a, b = (card.select_one(f"#doc-{s} a.doc-link").get_text() for s in "ab")
        form = card.select_one("form[aria-label='Judge this pair']")
        data = {i["name"]: i["value"] for i in form.select("input[type=hidden]")}
        assert data["pair_id"] == pair["data-pair"]
        same = truth[a] == truth[b]
        button = form.select_one(f"button[data-key='{'1' if same else '2'}']")
        data[button["name"]] = button["value"]
        answered = client.post(form["action"], data=data, headers=headers)
        assert answered.status_code == 200, answered.text
        card = _card(answered.text)
        assert card.select_one("#message").get_text().startswith(f"Saved: {a} / {b} judged")
        judged += 1
    assert judged == sampled - 1
    assert card.select_one("#empty h1").get_text() == f"No pair left for you: {judged} reviewed"
    assert card.select_one("#empty a")["href"] == f"/detector-runs/{run_id}"

    # the lead takes the skipped pair; the table counts every review
    login(client, lead.email)
    card = _card(client.post(f"/detector-runs/{run_id}/review/claim", headers=headers).text)
    form = card.select_one("form[aria-label='Judge this pair']")
    a, b = (card.select_one(f"#doc-{s} a.doc-link").get_text() for s in "ab")
    data = {i["name"]: i["value"] for i in form.select("input[type=hidden]")}
    data["same"] = "true" if truth[a] == truth[b] else "false"
    assert client.post(form["action"], data=data, headers=headers).status_code == 200
    page = get(client, f"/detector-runs/{run_id}", mode)
    rows = page.select("#bands-table tbody tr")
    assert sum(int(_cells(r)["reviewed"]) for r in rows) == sampled
    assert page.select_one("#unreviewed-bands") is None

    applied = client.post(
        f"/detector-runs/{run_id}/apply",
        data={"threshold": "0.80"},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert applied.status_code == 303
    assert applied.headers["location"] == f"/detector-runs/{run_id}"
    after = client.get(f"/detector-runs/{run_id}")
    flash = BeautifulSoup(after.text, "html.parser").select_one("[data-flash=ok]").get_text()
    assert re.fullmatch(
        rf"Applied J >= 0\.80: \d+ clusters?; every run's cluster measures now rest on detector "
        rf"run {run_id}\.",
        flash,
    ), flash
    soup = get(client, f"/golden-sets/{golden}", mode)
    assert (
        soup.select_one("#applied-detector")
        .get_text(strip=True)
        .startswith(f"Clusters from detector run {run_id} (J >= 0.80): precision 1.00")
    )
    assert soup.select_one("#detector-runs-table tbody tr")["data-state"] == "applied"


def test_a_bad_side_file_is_named_with_its_line(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead = accounts[Role.LEAD]
    golden, truth = _golden_set(client, lead, tmp_path)
    login(client, lead.email)
    doc = sorted(truth)[0]
    refused = client.post(
        f"/golden-sets/{golden}/detector-runs/import",
        files={"ids": ("bad.csv", f"doc_id,cluster_id\n{doc},c1\n{doc},c2\n")},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert refused.status_code == 303
    assert refused.headers["x-error-code"]
    page = BeautifulSoup(client.get(refused.headers["location"]).text, "html.parser")
    error = page.select_one("[data-flash=error]").get_text()
    assert error.startswith("Cluster ids not imported: bad.csv")
    assert re.search(r"line[s]? 3", error), error
    assert page.select_one("#no-detector-runs") is not None

    lines = "".join(f"{d},g{g}\n" for d, g in sorted(truth.items()))
    imported = client.post(
        f"/golden-sets/{golden}/detector-runs/import",
        files={"ids": ("ids.csv", "doc_id,cluster_id\n" + lines)},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert imported.status_code == 303, imported.text
    soup = get(client, f"/golden-sets/{golden}", "page")
    assert (
        soup.select_one("#applied-detector")
        .get_text(strip=True)
        .endswith("(imported with ids.csv): not calibrated.")
    )


def test_word_diff_marks_the_words_only_on_one_side() -> None:
    diff = word_diff("a b c d e", "a x c d e f", max_words=3_000)
    assert [(s.text, s.kind) for s in diff.a] == [("a", "same"), ("b", "only"), ("c d e", "same")]
    assert [(s.text, s.kind) for s in diff.b] == [
        ("a", "same"),
        ("x", "only"),
        ("c d e", "same"),
        ("f", "only"),
    ]
    assert (diff.only_a, diff.only_b, diff.capped) == (1, 2, False)
    capped = word_diff("a b c d", "a b c e", max_words=2)
    assert capped.capped
    assert [(s.text, s.kind) for s in capped.b] == [("a b c e", "same")]


def test_the_pair_card_escapes_both_documents(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    lead = accounts[Role.LEAD]
    words = " ".join(f"word{i}" for i in range(120))
    docs = [
        {"_id": "a", "title": "<i>A</i>", "text": words + " <script>alert(1)</script>"},
        {"_id": "b", "title": "B", "text": words + " <img src=x onerror=alert(2)> & more"},
    ]
    made = client.post(
        "/api/v1/golden-sets",
        data={"name": "hostile"},
        files={
            "qrels": ("qrels.tsv", "q0\t0\ta\t1\n"),
            "queries": ("queries.jsonl", json.dumps({"_id": "q0", "text": "q"}) + "\n"),
            "corpus": ("corpus.jsonl", "".join(json.dumps(d) + "\n" for d in docs)),
        },
        headers=lead.headers,
    )
    assert made.status_code == 201, made.text
    login(client, lead.email)
    run_id = _detect(client, int(made.json()["id"]))
    card = _card(client.post(f"/detector-runs/{run_id}/review/claim", headers=HTMX).text)
    assert card.select("script, img, i") == []
    assert "<script>alert(1)</script>" in card.select_one("#doc-a del").get_text(" ")
    assert "& more" in " ".join(t.get_text() for t in card.select("#doc-b ins"))
    assert card.select_one("#doc-a h2").get_text(" ", strip=True) == "A <i>A</i>"
