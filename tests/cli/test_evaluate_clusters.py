"""``misstriage evaluate --corpus``: cluster measures of the demo's runs against a plain-Python
oracle written from the definitions (rank by score then docno descending, as trec_eval; a
document without a cluster is its own)."""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support.cli import evaluate_cli as cli

DEMO = Path(__file__).resolve().parents[2] / "examples" / "helpcentre"
K = 10


def _oracle(run: Path) -> tuple[float, float, float]:
    """(median unique clusters, share of queries with <= 4, macro cluster recall) at K."""
    cluster = {}
    for line in (DEMO / "corpus.jsonl").read_text().splitlines():
        doc = json.loads(line)
        cluster[doc["_id"]] = (
            ("c", doc["cluster_id"]) if doc.get("cluster_id") else ("d", doc["_id"])
        )
    relevant: dict[str, set[str]] = defaultdict(set)
    with (DEMO / "qrels.tsv").open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if int(row["score"]) >= 1:
                relevant[row["query-id"]].add(row["corpus-id"])
    ranked: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for line in run.read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        ranked[qid].append((float(score), doc))
    unique, recall = [], []
    for qid, docs in relevant.items():
        top = [d for _, d in sorted(ranked[qid], key=lambda p: (p[0], p[1].encode()), reverse=True)]
        seen = {cluster.get(d, ("d", d)) for d in top[:K]}
        wanted = {cluster.get(d, ("d", d)) for d in docs}
        unique.append(len(seen))
        recall.append(len(wanted & seen) / len(wanted))
    return (
        statistics.median(unique),
        sum(n <= 4 for n in unique) / len(unique),
        sum(recall) / len(recall),
    )


@pytest.mark.parametrize("name", ["bm25", "bm25-expanded", "rrf"])
def test_cluster_measures_match_the_definitions(name: str) -> None:
    run = DEMO / "runs" / f"{name}.trec"
    done = cli(
        "evaluate",
        "--qrels",
        DEMO,
        "--corpus",
        DEMO / "corpus.jsonl",
        "--run",
        f"{name}={run}",
        "--k",
        str(K),
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    clusters = json.loads(done.stdout)["runs"][0]["clusters"]
    median, few, recall = _oracle(run)
    assert clusters["unique-clusters@10"]["median"] == median
    assert clusters["unique-clusters@10"]["share_at_most_4"] == pytest.approx(few, abs=1e-12)
    assert clusters["cluster-R@10"] == pytest.approx(recall, abs=1e-12)
    # what they rest on: the corpus file's ids, as given, not calibrated
    assert clusters["detector_run"]["source"] == "imported"
    assert clusters["detector_run"]["sentence"].startswith(
        "clusters from the cluster_id of corpus.jsonl (as given): not calibrated"
    )


def test_the_table_names_the_cluster_measures() -> None:
    done = cli(
        "evaluate",
        "--qrels",
        DEMO,
        "--corpus",
        DEMO / "corpus.jsonl",
        "--run",
        f"bm25={DEMO / 'runs' / 'bm25.trec'}",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if "unique-clusters@10 median" in line)
    assert lines[header].split()[:2] == ["run", "unique-clusters@10"]
    assert lines[header + 2].split()[0] == "bm25"
    assert any(line.startswith("clusters from the cluster_id of corpus.jsonl") for line in lines)
