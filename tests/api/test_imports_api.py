"""Golden sets and runs through the JSON API: imports are all or nothing, bad files name
their line, metrics equal `misstriage evaluate`."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.models import Role
from app.services.imports import runs as run_service
from tests.support.samples import QRELS, RUN, import_golden
from tests.support.service import Account, row_counts


def test_golden_set_import_list_get_delete(
    client: TestClient, accounts: dict[Role, Account], engine: Engine
) -> None:
    lead, reviewer = accounts[Role.LEAD], accounts[Role.REVIEWER]
    golden = import_golden(client, lead)
    assert {
        k: golden[k] for k in ("name", "min_grade", "queries", "judgments", "relevant", "documents")
    } == {
        "name": "help",
        "min_grade": 1,
        "queries": 3,
        "judgments": 4,
        "relevant": 3,
        "documents": 2,
    }
    assert golden["causes"] == ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]
    assert golden["report"]["corpus"]["relevant_documents_not_in_corpus"] == 1
    listed = client.get("/api/v1/golden-sets", headers=reviewer.headers).json()
    assert listed["total"] == 1
    assert listed["items"][0]["id"] == golden["id"]
    assert client.get(f"/api/v1/golden-sets/{golden['id']}", headers=reviewer.headers).json() == (
        golden
    )
    again = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": "help"},
        files={"qrels": ("q", QRELS)},
    )
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "name_taken"
    assert (
        client.delete(f"/api/v1/golden-sets/{golden['id']}", headers=lead.headers).status_code
        == 204
    )
    assert (
        client.get(f"/api/v1/golden-sets/{golden['id']}", headers=lead.headers).status_code == 404
    )
    assert sum(row_counts(engine).values()) == 0


@pytest.mark.parametrize(
    ("field", "content", "line", "problem"),
    [
        ("qrels", "q1 0 a 1\nq1 0 b x\n", 2, "grade 'x' is not an integer"),
        ("qrels", "q1 0 a 1\nq1 0 a 2\n", 2, "is judged again with a different grade"),
        (
            "queries",
            '{"_id": "q1", "text": "ok"}\n{"_id": "q2", "text": 5}\n',
            2,
            '"text" must be a string',
        ),
        ("corpus", '{"_id": "a"}\n{"_id": "a"}\n', 2, "appears twice"),
    ],
)
def test_bad_golden_file_names_line_and_writes_nothing(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    field: str,
    content: str,
    line: int,
    problem: str,
) -> None:
    files = {"qrels": ("qrels.txt", QRELS), field: (f"my-{field}.txt", content)}
    response = client.post(
        "/api/v1/golden-sets", headers=accounts[Role.LEAD].headers, data={"name": "g"}, files=files
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "bad_input"
    assert error["details"]["file"] == f"my-{field}.txt"
    assert error["details"]["line"] == line
    assert problem in error["details"]["problem"]
    assert error["message"].startswith(f"my-{field}.txt, line {line}: ")
    assert sum(row_counts(engine).values()) == 0


def test_run_import_metrics_and_report(
    client: TestClient, accounts: dict[Role, Account], engine: Engine
) -> None:
    lead = accounts[Role.LEAD]
    golden = import_golden(client, lead)
    response = client.post(
        f"/api/v1/golden-sets/{golden['id']}/runs",
        headers=lead.headers,
        data={"name": "bm25"},
        files={"run": ("bm25.trec.gz", gzip.compress(RUN.encode()))},
    )
    assert response.status_code == 201, response.text
    run = response.json()
    assert run["lines"] == 6
    assert run["queries"] == 3
    assert run["source_name"] == "bm25.trec.gz"
    assert run["report"]["duplicates_dropped"] == 1
    assert run["report"]["unknown_queries"] == 1
    assert run["report"]["golden_queries_absent"] == 0
    with Session(engine) as session:
        stored = run_service.get_run(session=session, run_id=run["id"])
        assert run_service.head_of(session=session, run=stored, qid="q1") == [
            (1, "a", 9.0),
            (2, "x", 8.0),
            (3, "b", 7.0),
        ]
    metrics = client.get(
        f"/api/v1/runs/{run['id']}/metrics?k=2&depth=10&gain=linear",
        headers=accounts[Role.REVIEWER].headers,
    ).json()
    assert metrics["conventions"]["gain"] == "linear"
    assert metrics["queries"] == 2
    # q1: a@1, b@3 -> R@2 = 1/2; q2: c absent -> 0.
    assert metrics["measures"]["R@2"] == 0.25
    assert metrics["measures"]["R@10"] == 0.5
    assert metrics["micro"]["R@10"] == pytest.approx(2 / 3)
    assert metrics["misses"] == 1
    assert metrics["cost"] is None
    # The depth advisor: 3.1 ms per candidate beside every depth of the curve.
    cost = client.get(
        f"/api/v1/runs/{run['id']}/metrics?k=2&depth=10&cost_ms=3.1&tolerance=0.05",
        headers=lead.headers,
    ).json()["cost"]
    assert [(r["depth"], r["recall"]) for r in cost["per_depth"]][:3] == [
        (2, 0.25),
        (10, 0.5),
        (20, 0.5),
    ]
    assert [r["cost_ms"] for r in cost["per_depth"]] == pytest.approx(
        [6.2, 31, 62, 155, 310, 620, 3100]
    )
    assert cost["per_depth"][1]["gain_per_ms"] == pytest.approx(0.25 / 24.8)
    assert cost["per_depth"][2]["gain_per_ms"] == 0.0
    assert (cost["advised_depth"], cost["tolerance"]) == (10, 0.05)
    assert cost["steps"][:2] == [
        "depth 10 buys +0.250 R for +24.8 ms per query",
        "depth 20 buys nothing for +31 ms per query",
    ]
    assert cost["advice"].startswith("depth stops paying at 10: R@10 = 0.500")
    for bad in ("cost_ms=-1", "cost_ms=3.1&tolerance=2"):
        answer = client.get(f"/api/v1/runs/{run['id']}/metrics?{bad}", headers=lead.headers)
        assert answer.status_code == 422
    rows = client.get(f"/api/v1/runs/{run['id']}/queries?k=2&depth=10", headers=lead.headers).json()
    assert rows["total"] == 2
    assert [(r["qid"], r["R@10"], r["misses"], r["diagnosis"]) for r in rows["items"]] == [
        ("q1", 1.0, 0, "fine"),
        ("q2", 0.0, 1, "ingestion"),
    ]


def test_bad_run_names_line_and_writes_nothing(
    client: TestClient, accounts: dict[Role, Account], engine: Engine
) -> None:
    lead = accounts[Role.LEAD]
    golden = import_golden(client, lead)
    before = row_counts(engine)
    bad = RUN + "q1 Q0 d 9 nan t\n"
    response = client.post(
        f"/api/v1/golden-sets/{golden['id']}/runs",
        headers=lead.headers,
        data={"name": "bad"},
        files={"run": ("bad.trec", bad)},
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "bad.trec, line 7: score 'nan' is not a finite number"
    )
    assert row_counts(engine) == before


def test_jsonl_run_and_rank_order(client: TestClient, accounts: dict[Role, Account]) -> None:
    lead = accounts[Role.LEAD]
    golden = import_golden(client, lead)
    jsonl = '{"qid": "q1", "docs": ["x", "b", "a"]}\n{"qid": "q2", "docs": ["c"]}\n'
    run = client.post(
        f"/api/v1/golden-sets/{golden['id']}/runs",
        headers=lead.headers,
        data={"name": "dense", "order": "trec_eval"},
        files={"run": ("dense.jsonl", jsonl)},
    ).json()
    assert run["format"] == "jsonl-lists"
    assert run["order"] == "file"
    metrics = client.get(f"/api/v1/runs/{run['id']}/metrics?k=2&depth=3", headers=lead.headers)
    assert metrics.json()["measures"]["R@2"] == 0.75


def test_upload_over_the_limit_is_413(
    client: TestClient, accounts: dict[Role, Account], engine: Engine
) -> None:
    client.app.state.settings.upload_max_bytes = 1000  # type: ignore[attr-defined]
    # The middleware reads the limit at app creation: build a fresh app.
    from app.main import create_app

    app = create_app(client.app.state.settings, engine)  # type: ignore[attr-defined]
    with TestClient(app) as small:
        response = small.post(
            "/api/v1/golden-sets",
            headers=accounts[Role.LEAD].headers,
            data={"name": "big"},
            files={"qrels": ("qrels.txt", "q1 0 a 1\n" * 500)},
        )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert sum(row_counts(engine).values()) == 0


def test_triage_misses_and_summary(client: TestClient, accounts: dict[Role, Account]) -> None:
    lead, reviewer = accounts[Role.LEAD], accounts[Role.REVIEWER]
    golden = import_golden(client, lead)
    run = client.post(
        f"/api/v1/golden-sets/{golden['id']}/runs",
        headers=lead.headers,
        data={"name": "bm25"},
        files={"run": ("bm25.trec", RUN)},
    ).json()
    created = client.post(
        f"/api/v1/runs/{run['id']}/triages", headers=lead.headers, json={"depth": 2, "k": 1}
    )
    assert created.status_code == 201
    triage = created.json()
    assert triage["misses"] == 2
    again = client.post(
        f"/api/v1/runs/{run['id']}/triages", headers=lead.headers, json={"depth": 2, "k": 1}
    )
    assert again.status_code == 409
    assert again.json()["error"]["details"] == {"triage_id": triage["id"]}
    summary = client.get(f"/api/v1/triages/{triage['id']}", headers=reviewer.headers).json()
    assert summary["counts"] == {"not-indexed": 0, "vocabulary-mismatch": 0, "chunk-boundary": 0}
    assert summary["unlabelled"] == 2
    assert summary["closes"] is False
    assert (
        summary["closure"]
        == "0 + 0 + 0 = 0 of 2 misses in named causes: does not close: 2 unlabelled"
    )
    misses = client.get(f"/api/v1/triages/{triage['id']}/misses", headers=reviewer.headers).json()
    assert [
        (m["qid"], m["doc_id"], m["grade"], m["rank"], m["state"], m["version"])
        for m in misses["items"]
    ] == [("q1", "b", 1, 3, "open", 1), ("q2", "c", 1, None, "open", 1)]
    page = client.get(
        f"/api/v1/triages/{triage['id']}/misses?qid=q2&per_page=1", headers=reviewer.headers
    ).json()
    assert page["total"] == 1
    assert page["items"][0]["doc_id"] == "c"
    assert (
        client.post(
            f"/api/v1/runs/{run['id']}/triages", headers=reviewer.headers, json={"depth": 5}
        ).status_code
        == 403
    )


def test_validation_errors_use_the_error_body(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    response = client.get("/api/v1/runs/abc/metrics", headers=accounts[Role.LEAD].headers)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"
    missing = client.get("/api/v1/runs/999/metrics", headers=accounts[Role.LEAD].headers)
    assert missing.status_code == 404
    assert missing.json()["error"] == {
        "code": "run_not_found",
        "message": "no run 999",
        "details": None,
    }


def test_scifact_through_the_api(
    client: TestClient, accounts: dict[Role, Account], scifact: Path
) -> None:
    lead = accounts[Role.LEAD]
    golden = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": "scifact"},
        files={
            "qrels": ("qrels.tsv", (scifact / "qrels.tsv").read_bytes()),
            "queries": ("queries.jsonl", (scifact / "queries.jsonl").read_bytes()),
            "corpus": ("corpus.jsonl", (scifact / "corpus.jsonl").read_bytes()),
        },
    ).json()
    assert (golden["queries"], golden["relevant"], golden["documents"]) == (300, 339, 5183)
    expected = {
        "bm25": (0.8180, 0.8852, 0.6860, 39),
        "dense": (0.7833, 0.8920, 0.6451, 36),
        "hybrid": (0.8509, 0.9377, 0.7182, 20),
    }
    for name, (r10, r50, ndcg, misses) in expected.items():
        run = client.post(
            f"/api/v1/golden-sets/{golden['id']}/runs",
            headers=lead.headers,
            data={"name": name},
            files={"run": (f"{name}.trec", (scifact / "runs" / f"{name}.trec").read_bytes())},
        ).json()
        metrics = client.get(f"/api/v1/runs/{run['id']}/metrics", headers=lead.headers).json()
        got = metrics["measures"]
        assert (
            round(got["R@10"], 4),
            round(got["R@50"], 4),
            round(got["nDCG@10"], 4),
            metrics["misses"],
        ) == (r10, r50, ndcg, misses)
        triage = client.post(
            f"/api/v1/runs/{run['id']}/triages", headers=lead.headers, json={"depth": 50, "k": 10}
        ).json()
        assert triage["misses"] == misses
