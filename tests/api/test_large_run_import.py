"""A large run imported block by block of whole queries (app.eval.streaming) stores exactly
what the whole-file path stores: every row of every run table and the report, on both
databases; a bad line deep in the file is still named and writes nothing."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

import app.eval.streaming as streaming
from app.eval.ranking import RankedPart
from app.models import Role, Run, RunClusterQuery, RunClusterTotals, RunHead, RunJudged, RunQuery
from tests.support.service import Account, row_counts

QUERIES = 2000
RESULTS = 100  # about 220,000 lines a run
UNKNOWN = [q for q in range(QUERIES) if q % 50 == 7 and q % 97 != 3]
ANSWERED_GOLDEN = [q for q in range(QUERIES) if q % 50 != 7 and q % 97 != 3]
BLOCK_BYTES = 256 << 10  # about 7,000 lines: some 25 blocks, queries cut at their ends


def generated_files() -> tuple[str, str]:
    """A qrels and a run (fixed seed) with the traps of the conventions: tied scores (two
    decimals), repeated documents in a query, run queries not in the golden set, golden
    queries absent from the run, judged documents at every depth and beyond the head, and
    one query of 30,000 lines (longer than several blocks)."""
    rng = random.Random(17)
    qrels: list[str] = []
    run: list[str] = []
    for q in range(QUERIES):
        qid = f"q{q:05d}"
        golden = q % 50 != 7  # every fiftieth query is not in the golden set
        answered = q % 97 != 3  # and some golden queries get no results
        n = 30_000 if q == 1234 else RESULTS
        docs = [f"d{rng.randrange(5_000_000)}" for _ in range(n)]
        if q % 13 == 0:  # a repeated document, with another score
            docs[rng.randrange(n)] = docs[0]
        if golden:
            for doc in [*rng.sample(docs, 2), f"d-absent-{q}"]:
                qrels.append(f"{qid} 0 {doc} {rng.choice((0, 1, 2, 3))}\n")
        if not answered:
            continue
        scores = sorted((round(rng.random() * 5, 2) for _ in range(n)), reverse=True)
        run.extend(
            f"{qid} Q0 {doc} {rank} {score} tag\n"
            for rank, (doc, score) in enumerate(zip(docs, scores, strict=True), start=1)
        )
    return "".join(qrels), "".join(run)


def stored(engine: Engine, run_id: int) -> dict[str, Any]:
    """Every stored value of a run but its id, name and creation time."""
    with Session(engine) as session:
        run = session.get(Run, run_id)
        assert run is not None
        fields = run.model_dump(exclude={"id", "name", "created_at"})
        tables: dict[str, Any] = {"run": fields}
        for model in (RunQuery, RunJudged, RunHead, RunClusterQuery, RunClusterTotals):
            rows = session.exec(select(model).where(model.run_id == run_id)).all()  # type: ignore[attr-defined]
            tables[model.__name__] = sorted(
                repr(sorted(r.model_dump(exclude={"run_id"}).items())) for r in rows
            )
        return tables


def post_run(client: TestClient, lead: Account, golden_id: int, name: str, text: str) -> Any:
    return client.post(
        f"/api/v1/golden-sets/{golden_id}/runs",
        headers=lead.headers,
        data={"name": name},
        files={"run": ("large.trec", text)},
    )


@pytest.fixture
def parts_ranked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Small blocks; [parts ranked block by block (in order or sorted), whole-file reads] of
    the imports."""
    counts: list[int] = [0, 0]
    rank_part: Callable[..., RankedPart] = streaming.rank_part
    rank_in_order: Callable[..., Any] = streaming.rank_in_order
    load_run: Callable[..., Any] = streaming.load_run

    def counting_parts(*args: Any) -> RankedPart:
        counts[0] += 1
        return rank_part(*args)

    def counting_in_order(*args: Any) -> Any:
        ranked = rank_in_order(*args)
        counts[0] += ranked is not None
        return ranked

    def counting_whole(*args: Any, **kwargs: Any) -> Any:
        counts[1] += 1
        return load_run(*args, **kwargs)

    monkeypatch.setattr(streaming, "BLOCK_BYTES", BLOCK_BYTES)
    monkeypatch.setattr(streaming, "rank_part", counting_parts)
    monkeypatch.setattr(streaming, "rank_in_order", counting_in_order)
    monkeypatch.setattr(streaming, "load_run", counting_whole)
    return counts


def whole_file_only(*args: Any, **kwargs: Any) -> Any:
    raise streaming.WholeFile


def test_a_large_run_stores_what_the_whole_file_path_stores(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
    parts_ranked: list[int],
) -> None:
    lead = accounts[Role.LEAD]
    qrels, run = generated_files()
    answer = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": "large"},
        files={"qrels": ("qrels.txt", qrels)},
    )
    assert answer.status_code == 201, answer.text
    golden_id = answer.json()["id"]

    streamed = post_run(client, lead, golden_id, "streamed", run)
    assert streamed.status_code == 201, streamed.text
    assert parts_ranked == [parts_ranked[0], 0]
    assert parts_ranked[0] > 20  # ranked block by block
    report = streamed.json()["report"]
    assert report["lines"] == run.count("\n")
    assert report["duplicates_dropped"] > 100
    assert report["unknown_queries"] == len(UNKNOWN)
    assert report["golden_queries_absent"] > 10

    parts_ranked[:] = [0, 0]
    with monkeypatch.context() as patch:
        patch.setattr(streaming, "_streamed", whole_file_only)
        whole = post_run(client, lead, golden_id, "whole", run)
    assert whole.status_code == 201, whole.text
    assert parts_ranked == [0, 1]  # the previous path: the whole file at once

    mine, theirs = stored(engine, streamed.json()["id"]), stored(engine, whole.json()["id"])
    assert len(mine["RunHead"]) == len(ANSWERED_GOLDEN)
    assert len(mine["RunJudged"]) > 2000
    assert mine == theirs


def test_queries_out_of_order_take_the_whole_file_path(
    client: TestClient, accounts: dict[Role, Account], parts_ranked: list[int]
) -> None:
    lead = accounts[Role.LEAD]
    qrels, run = generated_files()
    golden_id = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": "large"},
        files={"qrels": ("qrels.txt", qrels)},
    ).json()["id"]
    lines = run.splitlines(keepends=True)
    # The first query's last line moved to the end: its lines are no longer contiguous.
    moved = "".join(lines[1:] + lines[:1])
    answer = post_run(client, lead, golden_id, "moved", moved)
    assert answer.status_code == 201, answer.text
    assert parts_ranked[1] == 1  # started block by block, then read the whole file
    reference = post_run(client, lead, golden_id, "reference", run)
    assert parts_ranked[1] == 1
    got, expected = answer.json()["report"], reference.json()["report"]
    assert {k: v for k, v in got.items() if k != "source"} == {
        k: v for k, v in expected.items() if k != "source"
    }


def test_a_bad_line_deep_in_a_large_run_is_named_and_writes_nothing(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    parts_ranked: list[int],
) -> None:
    lead = accounts[Role.LEAD]
    qrels, run = generated_files()
    golden_id = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": "large"},
        files={"qrels": ("qrels.txt", qrels)},
    ).json()["id"]
    lines = run.splitlines(keepends=True)
    lines[150_000] = "q01500 Q0 dx 1 nan tag\n"
    before = row_counts(engine)
    answer = post_run(client, lead, golden_id, "bad", "".join(lines))
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == (
        "large.trec, line 150001: score 'nan' is not a finite number"
    )
    assert row_counts(engine) == before
    assert parts_ranked[1] == 1  # worded by the whole-file path
