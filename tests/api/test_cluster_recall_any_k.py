"""cluster-recall@k and unique-clusters@k in the metrics answer at any k up to the run's depth
(issue 15, item 3), from the judged documents' cluster ranks stored at import, on both
databases. Runs are imported with a kept head of 5 results per query: up to it, the figures
equal those computed from the head (the path of runs imported before cluster ranks were
stored); beyond it, they equal a plain-Python oracle written here from the definitions
(app/eval/clusters.py); a run without cluster ranks still answers null beyond its head."""

from __future__ import annotations

from pathlib import Path
from statistics import median
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.eval.clusters import ClusterEvaluation
from app.models import Role, Run, RunClusterTotals, RunJudgedCluster
from app.services.imports import golden_sets, runs
from app.services.imports.clusters import cluster_evaluation
from tests.support.cluster_runs import ClusterRunFiles, write_cluster_run
from tests.support.log_runs import rankings
from tests.support.service import Account

KEEP = 5
SEEDS = (1, 2, 3)


def _import(engine: Engine, files: ClusterRunFiles, name: str) -> int:
    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(
            session=session,
            name=name,
            qrels=files.qrels,
            queries=files.queries,
            corpus=files.corpus,
        )
        run = runs.import_run(
            session=session,
            golden=golden,
            name="generated",
            path=files.run,
            source_name="run.trec",
            keep_depth=KEEP,
        )
    assert run.id is not None
    return run.id


def _oracle(files: ClusterRunFiles, ranked: dict[str, list[str]], k: int) -> dict[str, Any]:
    """The clusters block at k, from the definitions: a document's cluster is its cluster_id,
    or the document itself when it has none or is not in the corpus; the evaluated queries are
    those with a relevant (grade >= 1) document; a query the run does not answer counts 0."""

    def cluster(doc_id: str) -> tuple[str, str]:
        cid = files.clusters.get(doc_id)
        return ("cluster", cid) if cid else ("document", doc_id)

    relevant: dict[str, set[str]] = {}
    for qid, doc_id, grade in files.judgments:
        if grade >= 1:
            relevant.setdefault(qid, set()).add(doc_id)
    unique, recall = [], []
    pooled_relevant = pooled_found = 0
    for qid, docs in relevant.items():
        shown = {cluster(d) for d in ranked.get(qid, [])[:k]}
        wanted = {cluster(d) for d in docs}
        found = wanted & shown
        unique.append(len(shown))
        recall.append(len(found) / len(wanted))
        pooled_relevant += len(wanted)
        pooled_found += len(found)
    return {
        "k": k,
        f"unique-clusters@{k}": {
            "median": float(median(unique)),
            "share_at_most_4": sum(1 for u in unique if u <= 4) / len(unique),
        },
        f"cluster-R@{k}": sum(recall) / len(recall),
        "micro": {f"cluster-R@{k}": pooled_found / pooled_relevant},
    }


def _deep_finds(files: ClusterRunFiles, ranked: dict[str, list[str]]) -> tuple[int, int]:
    """Relevant clusters first met deeper than the head, and those of them met through a
    document that is not the relevant one (the data must exercise what is tested)."""
    deeper = through_mate = 0
    for qid, doc_id, grade in files.judgments:
        cid = files.clusters.get(doc_id)
        if grade < 1 or not cid:
            continue
        ranking = ranked.get(qid, [])
        first = next((r for r, d in enumerate(ranking, 1) if files.clusters.get(d) == cid), None)
        if first is not None and first > KEEP:
            deeper += 1
            through_mate += ranking[first - 1] != doc_id
    return deeper, through_mate


def _clusters(client: TestClient, account: Account, run_id: int, k: int) -> Any:
    answer = client.get(
        f"/api/v1/runs/{run_id}/metrics",
        headers=account.headers,
        params={"k": k, "depth": max(k, 10)},
    )
    assert answer.status_code == 200, answer.text
    clusters = answer.json()["clusters"]
    if clusters is not None:
        # the ids came with the corpus: the figures name that, uncalibrated, detector run
        ref = clusters.pop("detector_run")
        assert ref["source"] == "imported"
        assert ref["sentence"].endswith("(imported with the corpus): not calibrated")
    return clusters


def _flat(block: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in block.items():
        if isinstance(value, dict):
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out[prefix + key] = value
    return out


def _same(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Every figure equal; floats to 1e-12 (the service sums in another order)."""
    assert _flat(got) == pytest.approx(_flat(want), rel=1e-12, abs=1e-12)


def _evaluation(engine: Engine, run_id: int, k: int) -> ClusterEvaluation | None:
    with Session(engine) as session:
        run = session.get(Run, run_id)
        assert run is not None
        golden = runs.run_context(session=session, run_id=run_id).golden
        return cluster_evaluation(session=session, run=run, golden=golden, k=k)


def _forget_cluster_ranks(engine: Engine, run_id: int) -> None:
    """What a run imported before cluster ranks were stored looks like."""
    with Session(engine) as session, session.begin():
        session.execute(delete(RunJudgedCluster).where(RunJudgedCluster.run_id == run_id))  # type: ignore[arg-type]
        session.execute(
            update(RunClusterTotals)
            .where(RunClusterTotals.run_id == run_id)  # type: ignore[arg-type]
            .values(cluster_ranks=False)
        )


@pytest.mark.parametrize("seed", SEEDS)
def test_cluster_measures_at_any_k_equal_the_head_and_the_oracle(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    tmp_path: Path,
    seed: int,
) -> None:
    reviewer = accounts[Role.REVIEWER]
    files = write_cluster_run(tmp_path / "files", seed)
    run_id = _import(engine, files, f"generated-{seed}")
    ranked = rankings(files.run.read_text())
    deepest = max(len(r) for r in ranked.values())
    deeper, through_mate = _deep_finds(files, ranked)
    assert deeper > 0
    assert through_mate > 0
    # judged documents outside the corpus, relevant ones among them
    assert any(g >= 1 and d not in files.documents for _, d, g in files.judgments)
    with Session(engine) as session:
        stored = session.exec(
            select(RunJudgedCluster).where(RunJudgedCluster.run_id == run_id)
        ).all()
    assert stored  # some judged documents are met first through a copy

    # Up to the head: the new path equals the figures computed from the head.
    new = {k: _evaluation(engine, run_id, k) for k in range(1, KEEP + 1)}
    ks = sorted({*range(1, KEEP + 1), KEEP + 1, 8, 13, 21, deepest - 1, deepest, deepest + 5})
    answers = {k: _clusters(client, reviewer, run_id, k) for k in ks}
    for k in ks:
        _same(answers[k], _oracle(files, ranked, k))
    _forget_cluster_ranks(engine, run_id)
    for k in range(1, KEEP + 1):
        assert new[k] is not None
        assert new[k] == _evaluation(engine, run_id, k), k
        _same(_clusters(client, reviewer, run_id, k), answers[k])
    # An old-style run answers null beyond its head, as before.
    assert _evaluation(engine, run_id, KEEP + 1) is None
    assert _clusters(client, reviewer, run_id, KEEP + 1) is None
    assert _clusters(client, reviewer, run_id, deepest) is None
