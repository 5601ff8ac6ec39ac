"""The metrics shape, written once (app.services.imports.metrics): the API's answer and
``misstriage evaluate --format json`` carry the same figures under the same names, measure
names are canonical keys, and the rows sort and filter as the run page asks."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from app.eval import Diagnosis, RunEvaluation, Thresholds, golden_from_frame
from app.eval.clusters import FEW, clusters_frame, evaluate_clusters
from app.eval.depth_cost import advise_depth
from app.models import ApiToken, GoldenSet
from app.models.golden import GoldenSetPublic
from app.models.users import TokenPublic
from app.services.imports.metrics import (
    ClusterMetrics,
    EvaluatedRun,
    Metrics,
    QueryRow,
    RunMetrics,
    query_rows,
)
from tests.support.evaluation import evaluate, golden, ranked

QRELS = "q1 0 a 1\nq1 0 b 2\nq2 0 c 1\nq3 0 d 1\n"
# q1: a at 1, b at 4; q2: c at 2; q3: not answered
RUN = "q1 Q0 a 1 9 t\nq1 Q0 x 2 8 t\nq1 Q0 y 3 7 t\nq1 Q0 b 4 6 t\nq2 Q0 z 1 9 t\nq2 Q0 c 2 8 t\n"


@pytest.fixture
def evaluation(tmp_path: Path) -> RunEvaluation:
    gold = golden(tmp_path, QRELS)
    return evaluate(gold, ranked(tmp_path, gold, RUN), k=2, depth=3, depths=(1, 5))


def test_the_api_and_the_cli_share_every_metric(evaluation: RunEvaluation) -> None:
    api = RunMetrics.of_run(evaluation, run_id=7, clusters=None).model_dump(mode="json")
    cli = EvaluatedRun.of_evaluation(evaluation).document()
    core = set(Metrics.model_fields)
    assert {name: api[name] for name in core} == {name: cli[name] for name in core}
    assert set(api) - core == {"run_id", "clusters", "cost"}
    assert api["run_id"] == 7
    assert api["clusters"] is None
    assert api["cost"] is None
    # the CLI leaves out what was not asked for (absent, not null)
    assert set(cli) - core == {"name", "thresholds", "report"}
    assert next(iter(cli)) == "name"
    assert cli["thresholds"] == {"recall": 0.8, "ndcg": 0.5}


def test_the_depth_advisor_block_is_one_shape(evaluation: RunEvaluation) -> None:
    advice = advise_depth(evaluation.depth_curve, cost_per_candidate_ms=3.1)
    api = RunMetrics.of_run(evaluation, run_id=7, clusters=None, cost=advice)
    cli = EvaluatedRun.of_evaluation(evaluation, cost=advice).document()
    assert api.cost is not None
    assert api.model_dump(mode="json")["cost"] == cli["cost"]
    # the curve: R@1 = 1/6, R@2 = R@3 = 1/2, R@5 = 2/3; 3.1 ms per candidate.
    assert [(r.depth, r.cost_ms) for r in api.cost.per_depth] == [
        (1, pytest.approx(3.1)),
        (2, pytest.approx(6.2)),
        (3, pytest.approx(9.3)),
        (5, pytest.approx(15.5)),
    ]
    assert api.cost.per_depth[2].gain_per_ms == 0.0
    assert api.cost.per_depth[3].gain_per_ms == pytest.approx((2 / 3 - 1 / 2) / 6.2)
    assert api.cost.advised_depth == 5
    assert api.cost.steps[1] == "depth 3 buys nothing for +3.1 ms per query"
    assert advise_depth(evaluation.depth_curve, cost_per_candidate_ms=0) is None


def test_the_metrics_document(evaluation: RunEvaluation) -> None:
    document = json.loads(RunMetrics.of_run(evaluation, run_id=1, clusters=None).model_dump_json())
    assert document["k"] == 2
    assert document["depth"] == 3
    assert document["queries"] == 3
    assert document["relevant"] == 4
    assert document["measures"]["R@2"] == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert document["measures"]["R@3"] == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert set(document["measures"]) == {"R@2", "R@3", "nDCG@2", "nDCG_cand@2"}
    assert document["micro"] == {"R@2": 0.5, "R@3": 0.5}
    # depths as strings, every depth asked for plus k and depth
    assert list(document["depth_curve"]) == ["1", "2", "3", "5"]
    assert document["micro_depth_curve"]["5"] == 0.75
    assert document["misses"] == 2
    assert list(document["diagnosis"]) == [d.value for d in Diagnosis]
    assert sum(document["diagnosis"].values()) == 3
    assert document["diagnosis_evidence"] is False  # no corpus: "ingestion" is a guess
    assert document["no_relevant_candidate"] == 1  # q3
    assert document["conventions"] == {
        "order": "trec_eval",
        "gain": "exp",
        "ideal": "strict",
        "min_grade": 1,
        "relevant": "grade >= 1",
        "averaging": document["conventions"]["averaging"],
        "averaged_queries": document["conventions"]["averaged_queries"],
        # trec_eval -c is a switch, off by default; nDCG's gains follow trec_eval -l
        "all_judged_queries": False,
        "ndcg_grades": document["conventions"]["ndcg_grades"],
        "duplicates": document["conventions"]["duplicates"],
    }


def test_query_rows_have_canonical_measure_names(evaluation: RunEvaluation) -> None:
    rows = query_rows(evaluation)
    assert [r.qid for r in rows] == ["q1", "q2", "q3"]
    q1 = rows[0].model_dump(mode="json")
    assert q1 == {
        "qid": "q1",
        "text": None,
        "relevant": 2,
        "retrieved": 4,
        "misses": 1,
        # one of two relevant documents in the top 3, ranked first among the candidates
        "diagnosis": "candidate_generation",
        "reason": "R@3 0.50 < 0.8 and nDCG_cand@2 1.00 ≥ 0.5",
        "R@2": 0.5,
        "R@3": 0.5,
        "nDCG@2": pytest.approx(q1["nDCG@2"]),
        "nDCG_cand@2": 1.0,
    }
    assert rows[2].measure("nDCG_cand@2") is None  # q3: the run returned nothing relevant
    # a table reads the query, its measures, then misses and diagnosis (the CSV columns)
    assert list(rows[0].in_reading_order()) == [
        "qid",
        "text",
        "relevant",
        "retrieved",
        "R@2",
        "R@3",
        "nDCG@2",
        "nDCG_cand@2",
        "misses",
        "diagnosis",
        "reason",
    ]
    # a row read back from JSON is the same row
    assert QueryRow.model_validate_json(rows[0].model_dump_json()) == rows[0]


def test_query_rows_filter_and_sort(evaluation: RunEvaluation) -> None:
    assert [r.qid for r in query_rows(evaluation, sort="recall_k", desc=True)] == [
        "q2",
        "q1",
        "q3",
    ]
    assert [r.qid for r in query_rows(evaluation, search="Q3")] == ["q3"]
    assert [r.qid for r in query_rows(evaluation, sort="no such column")] == ["q1", "q2", "q3"]
    q3 = query_rows(evaluation, search="q3")[0]
    assert [r.qid for r in query_rows(evaluation, diagnosis=q3.diagnosis)] == [
        r.qid for r in query_rows(evaluation) if r.diagnosis is q3.diagnosis
    ]
    assert evaluation.thresholds == Thresholds()


def test_cluster_metrics_document() -> None:
    gold = golden_from_frame(
        pl.DataFrame(
            [(q, f"{q}-rel", 1) for q in ("q1", "q2", "q3")],
            schema={"qid": pl.String, "doc_id": pl.String, "grade": pl.Int64},
            orient="row",
        )
    )
    ranking = {"q1": [f"copy{i}" for i in range(10)], "q2": [f"d{i}" for i in range(10)]}
    top = pl.DataFrame(
        [(q, d, r) for q, docs in ranking.items() for r, d in enumerate(docs, 1)],
        schema={"qid": pl.String, "doc_id": pl.String, "rank": pl.Int64},
        orient="row",
    )
    result = evaluate_clusters(gold, top, clusters_frame({f"copy{i}": "X" for i in range(10)}), 10)
    metrics = ClusterMetrics.of(result)
    document = json.loads(metrics.model_dump_json())
    assert document == {
        "k": 10,
        "unique-clusters@10": {"median": 1.0, f"share_at_most_{FEW}": pytest.approx(2 / 3)},
        "cluster-R@10": 0.0,
        "micro": {"cluster-R@10": 0.0},
    }
    assert metrics.unique.median == 1.0
    assert metrics.cluster_recall == metrics.cluster_recall_micro == 0.0
    assert ClusterMetrics.model_validate(document) == metrics


def test_timestamps_are_written_as_before() -> None:
    """``datetime.isoformat()``: ``+00:00``, microseconds kept; null when never set."""
    when = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    golden_set = GoldenSet(id=1, name="g", created_at=when, webhook_url="https://h.test/x")
    document = json.loads(GoldenSetPublic.of(golden_set).model_dump_json())
    assert document["created_at"] == "2026-01-02T03:04:05.678901+00:00"
    assert document["webhook"] == {"url": "https://h.test/\N{HORIZONTAL ELLIPSIS}", "events": []}
    token = ApiToken(id=2, user_id=1, name="t", prefix="abc", token_hash="h", created_at=when)
    assert json.loads(TokenPublic.of(token).model_dump_json()) == {
        "id": 2,
        "name": "t",
        "prefix": "abc",
        "created_at": "2026-01-02T03:04:05.678901+00:00",
        "last_used_at": None,
        "revoked_at": None,
    }
