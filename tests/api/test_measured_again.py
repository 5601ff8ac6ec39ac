"""What a stored run's cluster figures say after its golden set's detector run is applied
at another threshold, through the API on both databases.

A judged run whose rankings are kept is measured again with the new clusters: it has the
figures a run imported with them has, cluster-recall included (a relevant document the run
did not return, whose copy it did, counts from the copy, as at import). A run that keeps no
ranking of some query it answers (a log run; a judged run's queries outside the golden set)
cannot be: it stays, whole, on the clusters it was measured with, and names their threshold,
saying the detector run was applied again since.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from app.models import Role
from tests.support.dupe_corpus import make_corpus
from tests.support.service import Account

LOW, HIGH = 0.5, 0.95


def _files(tmp: Path) -> None:
    """A golden set whose corpus holds copies, and runs that return a relevant document's
    copies but never the document itself: ``run.trec`` over the golden set's queries alone,
    ``outside.trec`` also over queries the golden set does not hold."""
    corpus = make_corpus(80, copy_share=0.4, seed=5)
    groups: dict[str, list[str]] = {}
    for doc, group in corpus.truth.items():
        groups.setdefault(group, []).append(doc)
    copied = sorted((sorted(m) for m in groups.values() if len(m) > 1), key=lambda m: m[0])
    every = sorted(corpus.truth)
    qrels, queries, lines = [], [], []
    for i, members in enumerate(copied):
        qrels.append(f"q{i}\t0\t{members[0]}\t1\n")
        queries.append(json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n")
        ranked = [*members[1:], *[d for d in every if d not in members][i % 5 :: 5][:8]]
        lines.extend(f"q{i} Q0 {d} {r} {100 - r} t\n" for r, d in enumerate(ranked, 1))
    outside = [
        f"z{j} Q0 {d} {r} {100 - r} t\n"
        for j in range(20)
        for r, d in enumerate(every[j % 3 :: 3][:10], 1)
    ]
    (tmp / "qrels.tsv").write_text("".join(qrels))
    (tmp / "queries.jsonl").write_text("".join(queries))
    (tmp / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus.docs))
    (tmp / "run.trec").write_text("".join(lines))
    (tmp / "outside.trec").write_text("".join(lines + outside))


def _golden_set(client: TestClient, lead: Account, tmp: Path) -> int:
    with (
        (tmp / "corpus.jsonl").open("rb") as c,
        (tmp / "qrels.tsv").open("rb") as q,
        (tmp / "queries.jsonl").open("rb") as qs,
    ):
        made = client.post(
            "/api/v1/golden-sets",
            data={"name": "copies"},
            files={"qrels": q, "queries": qs, "corpus": c},
            headers=lead.headers,
        )
    assert made.status_code == 201, made.text
    return int(made.json()["id"])


def _import(
    client: TestClient, lead: Account, golden: int, tmp: Path, name: str, file: str, kind: str
) -> int:
    with (tmp / file).open("rb") as handle:
        made = client.post(
            f"/api/v1/golden-sets/{golden}/runs",
            data={"name": name, "kind": kind},
            files={"run": (file, handle, "text/plain")},
            headers=lead.headers,
        )
    assert made.status_code == 201, made.text
    return int(made.json()["id"])


def _figures(client: TestClient, lead: Account, run: int, judged: bool) -> dict[str, Any]:
    said = client.get(f"/api/v1/runs/{run}/clusters", headers=lead.headers)
    assert said.status_code == 200, said.text
    figures = {"clusters": {k: v for k, v in said.json().items() if k != "run_id"}}
    if judged:
        metrics = client.get(
            f"/api/v1/runs/{run}/metrics", params={"k": 5, "depth": 5}, headers=lead.headers
        )
        assert metrics.status_code == 200, metrics.text
        figures["metrics"] = metrics.json()["clusters"]
    return figures


def _named(figures: dict[str, Any]) -> list[tuple[float, str]]:
    return [
        (part["detector_run"]["threshold"], part["detector_run"]["sentence"])
        for part in figures.values()
    ]


def _unnamed(figures: dict[str, Any]) -> dict[str, Any]:
    return {what: {**part, "detector_run": None} for what, part in figures.items()}


def test_runs_after_an_apply_are_measured_again_or_name_their_clusters(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead = accounts[Role.LEAD]
    _files(tmp_path)
    golden = _golden_set(client, lead, tmp_path)
    made = client.post(
        f"/api/v1/golden-sets/{golden}/detector-runs",
        json={"threshold": 0.8, "near": LOW},
        headers=lead.headers,
    )
    assert made.status_code == 201, made.text
    detector = made.json()["id"]

    def apply(threshold: float) -> None:
        applied = client.post(
            f"/api/v1/detector-runs/{detector}/apply",
            json={"threshold": threshold},
            headers=lead.headers,
        )
        assert applied.status_code == 200, applied.text

    kinds = {"run": ("run.trec", "judged"), "outside": ("outside.trec", "judged")}
    kinds["log"] = ("outside.trec", "log")
    alone: dict[tuple[float, str], dict[str, Any]] = {}
    for threshold in (LOW, HIGH):
        apply(threshold)
        for what, (file, kind) in kinds.items():
            run = _import(client, lead, golden, tmp_path, f"{what} {threshold}", file, kind)
            alone[threshold, what] = _figures(client, lead, run, kind == "judged")
    for what in kinds:
        assert alone[LOW, what] != alone[HIGH, what], what
    # the copies count for the relevant document the run never returned
    assert alone[LOW, "run"]["metrics"]["cluster-R@5"] == 1.0

    # measured at J 0.95, then J 0.5 applied
    at_high = {
        what: _import(client, lead, golden, tmp_path, f"{what} then", file, kind)
        for what, (file, kind) in kinds.items()
    }
    apply(LOW)
    again = _figures(client, lead, at_high["run"], True)
    assert _unnamed(again) == _unnamed(alone[LOW, "run"])
    assert [t for t, _ in _named(again)] == [LOW, LOW]
    for what in ("outside", "log"):
        kept = _figures(client, lead, at_high[what], what == "outside")
        assert _unnamed(kept) == _unnamed(alone[HIGH, what]), what
        for threshold, sentence in _named(kept):
            assert threshold == HIGH, what
            assert f"applied again since, at J >= {LOW:.2f}" in sentence, sentence
    # applied at J 0.95 again: the runs kept on those clusters name them as the current ones
    apply(HIGH)
    for what in ("outside", "log"):
        kept = _figures(client, lead, at_high[what], what == "outside")
        assert _named(kept) == _named(alone[HIGH, what]), what
