"""GET /api/v1/runs/{id}/gate: the CLI's gate on stored runs. Its JSON is the CLI's on the same
files; the lists are recounted by hand from tests/support/lead_runs.py and R@depth with
pytrec_eval; the baseline defaults to the previous run of the series; every refusal is a JSON
error with a code. Both databases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from app.cli import main
from app.eval.gate import DEFAULT_MAX_DROP, DEFAULT_PERMUTATIONS, DEFAULT_SEED
from app.models import Role
from tests.support.lead_runs import FIRST, HYBRID, QRELS, QUERIES, RERANKED
from tests.support.series import post_golden_set, post_run
from tests.support.service import Account

#: What the API adds to the CLI's JSON: the two runs and the limits.
ADDED = {"run", "baseline", "max_drop", "max_new_misses"}
QUERY_TEXT = dict(line.split("\t") for line in QUERIES.splitlines())


@pytest.fixture
def pushed(client: TestClient, accounts: dict[Role, Account]) -> dict[str, int]:
    """A CI job's pushes: FIRST, RERANKED, HYBRID in series "bm25-main", and FIRST alone (no
    series); another golden set with a run of its own."""
    lead = accounts[Role.LEAD]
    golden_id = post_golden_set(client, lead, "lead-runs", QRELS)
    ids = {"golden": golden_id}
    for name, body in (("first", FIRST), ("reranked", RERANKED), ("hybrid", HYBRID)):
        ids[name] = post_run(client, lead, golden_id, name, body, series="bm25-main")
    ids["alone"] = post_run(client, lead, golden_id, "alone", FIRST)
    other = post_golden_set(client, lead, "other-set", QRELS)
    ids["other"] = post_run(client, lead, other, "other-run", FIRST, series="bm25-main")
    return ids


def _gate(client: TestClient, reviewer: Account, run_id: int, query: str = "") -> Any:
    return client.get(f"/api/v1/runs/{run_id}/gate{query}", headers=reviewer.headers)


def _cli_gate(tmp_path: Path, baseline: str, new: str, *extra: str) -> tuple[int, Any]:
    files = {"qrels.txt": QRELS, "queries.tsv": QUERIES, "base.trec": baseline, "new.trec": new}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    args = ["gate", "--qrels", str(tmp_path / "qrels.txt"), "--queries"]
    args += [str(tmp_path / "queries.tsv"), "--baseline", str(tmp_path / "base.trec")]
    args += ["--run", str(tmp_path / "new.trec"), "--format", "json", *extra]
    done = CliRunner().invoke(main, args)
    assert done.exit_code in (0, 1), done.output
    return done.exit_code, json.loads(done.stdout)


def _recall(run_text: str, depth: int) -> float:
    """Macro R@depth over the three judged queries, by pytrec_eval (a query absent from the
    run counts 0)."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrel: dict[str, dict[str, int]] = {}
    for q, _, d, g in (line.split() for line in QRELS.splitlines()):
        qrel.setdefault(q, {})[d] = int(g)
    run: dict[str, dict[str, float]] = {}
    for line in run_text.splitlines():
        q, _, d, _, s, _ = line.split()
        run.setdefault(q, {})[d] = float(s)
    scores = pytrec_eval.RelevanceEvaluator(qrel, {f"recall_{depth}"}).evaluate(run)
    return sum(scores.get(q, {}).get(f"recall_{depth}", 0.0) for q in qrel) / len(qrel)


def _moved(items: list[dict[str, Any]]) -> list[tuple[str, str, int | None, int | None]]:
    return [(d["qid"], d["doc_id"], d["rank_before"], d["rank_after"]) for d in items]


def test_the_gate_of_a_pushed_run_is_the_clis_on_the_same_files(
    client: TestClient,
    accounts: dict[Role, Account],
    pushed: dict[str, int],
    tmp_path: Path,
) -> None:
    reviewer = accounts[Role.REVIEWER]
    answer = _gate(client, reviewer, pushed["hybrid"], "?k=3&depth=3")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    code, cli = _cli_gate(tmp_path, RERANKED, HYBRID, "--k", "3", "--depth", "3")
    assert code == 1
    assert set(body) == set(cli) | ADDED
    assert {key: value for key, value in body.items() if key not in ADDED} == cli
    assert body["run"] == {"id": pushed["hybrid"], "name": "hybrid"}
    assert body["baseline"] == {"id": pushed["reranked"], "name": "reranked"}
    assert (body["max_drop"], body["max_new_misses"]) == (DEFAULT_MAX_DROP, None)
    assert (body["permutations"], body["seed"]) == (DEFAULT_PERMUTATIONS, DEFAULT_SEED)
    assert (body["k"], body["depth"], body["queries"]) == (3, 3, 3)
    # Recounted by hand at depth 3: RERANKED has q1 b@1 a@2, q2 c@1, q3 nothing relevant;
    # HYBRID has q1 a@1 b@2, loses c (q2 not retrieved) and finds q3 d@2.
    assert _moved(body["left"]) == [("q2", "c", 1, None)]
    assert _moved(body["entered"]) == [("q3", "d", None, 2)]
    assert [d["text"] for d in body["left"] + body["entered"]] == [
        QUERY_TEXT["q2"],
        QUERY_TEXT["q3"],
    ]
    assert [d["grade"] for d in body["left"] + body["entered"]] == [1, 2]
    recall = body["measures"]["R@3"]
    assert (recall["before"], recall["after"]) == pytest.approx(
        (_recall(RERANKED, 3), _recall(HYBRID, 3)), abs=1e-12
    )
    assert recall["before"] == pytest.approx(2 / 3)
    assert recall["delta"] == pytest.approx(0.0, abs=1e-12)
    assert recall["p_value"] == 1.0  # q2 loses what q3 gains: per query, the signs cancel
    ndcg = body["measures"]["nDCG@3"]
    assert ndcg["delta"] < -DEFAULT_MAX_DROP
    assert body["passed"] is False
    assert len(body["reasons"]) == 1
    assert body["reasons"][0].startswith("nDCG@3 dropped")


@pytest.mark.parametrize(
    ("query", "flags"),
    [("&gain=linear", ["--gain", "linear"]), ("&gain=exp", ["--gain", "exp"])],
)
def test_the_gate_takes_the_gain_as_the_cli_does(
    client: TestClient,
    accounts: dict[Role, Account],
    pushed: dict[str, int],
    tmp_path: Path,
    query: str,
    flags: list[str],
) -> None:
    answer = _gate(client, accounts[Role.REVIEWER], pushed["hybrid"], f"?k=3&depth=3{query}")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    _, cli = _cli_gate(tmp_path, RERANKED, HYBRID, "--k", "3", "--depth", "3", *flags)
    assert {key: value for key, value in body.items() if key not in ADDED} == cli


def test_the_gains_differ_on_graded_judgments(
    client: TestClient, accounts: dict[Role, Account], pushed: dict[str, int]
) -> None:
    reviewer = accounts[Role.REVIEWER]
    exp = _gate(client, reviewer, pushed["hybrid"], "?k=3&depth=3&gain=exp").json()
    linear = _gate(client, reviewer, pushed["hybrid"], "?k=3&depth=3&gain=linear").json()
    # q3's d has grade 2: 2^2-1 = 3 against 2 changes nDCG, never recall
    assert exp["measures"]["nDCG@3"]["after"] != linear["measures"]["nDCG@3"]["after"]
    assert exp["measures"]["R@3"] == linear["measures"]["R@3"]
    bad = _gate(client, reviewer, pushed["hybrid"], "?gain=cubic")
    assert bad.status_code == 422


def test_the_default_baseline_is_the_previous_run_of_the_series(
    client: TestClient,
    accounts: dict[Role, Account],
    pushed: dict[str, int],
    tmp_path: Path,
) -> None:
    reviewer = accounts[Role.REVIEWER]
    body = _gate(client, reviewer, pushed["reranked"], "?k=3&depth=3").json()
    assert body["baseline"] == {"id": pushed["first"], "name": "first"}
    # FIRST has q1 a@1 b@3 and c at 4: c enters at 1; nothing leaves.
    assert _moved(body["left"]) == []
    assert _moved(body["entered"]) == [("q2", "c", 4, 1)]
    assert body["passed"] is True
    assert body["reasons"] == []
    _, cli = _cli_gate(tmp_path, FIRST, RERANKED, "--k", "3", "--depth", "3")
    assert {key: value for key, value in body.items() if key not in ADDED} == cli
    named = _gate(client, reviewer, pushed["reranked"], f"?k=3&depth=3&baseline={pushed['first']}")
    assert named.json() == body


def test_an_explicit_baseline_replaces_the_previous_run(
    client: TestClient, accounts: dict[Role, Account], pushed: dict[str, int]
) -> None:
    reviewer = accounts[Role.REVIEWER]
    # HYBRID against FIRST at the default k and depth (10, 50): every retrieved relevant
    # document is inside the top 50, so only the documents found or lost at all move.
    body = _gate(client, reviewer, pushed["hybrid"], f"?baseline={pushed['first']}").json()
    assert body["baseline"] == {"id": pushed["first"], "name": "first"}
    assert (body["k"], body["depth"]) == (10, 50)
    assert set(body["measures"]) == {"R@50", "nDCG@10"}
    assert _moved(body["left"]) == [("q2", "c", 4, None)]
    assert _moved(body["entered"]) == [("q3", "d", None, 2)]
    # a run of no series, given a baseline, is gated too: FIRST has c at 4, beyond depth 3
    query = f"?baseline={pushed['reranked']}&k=3&depth=3"
    alone = _gate(client, reviewer, pushed["alone"], query).json()
    assert alone["run"] == {"id": pushed["alone"], "name": "alone"}
    assert _moved(alone["left"]) == [("q2", "c", 1, 4)]
    assert _moved(alone["entered"]) == []


@pytest.mark.parametrize(
    ("which", "query", "status", "code"),
    [
        ("first", "", 409, "no_baseline"),  # the first of its series
        ("alone", "", 409, "no_baseline"),  # in no series
        ("hybrid", "?baseline={other}", 422, "baseline_other_golden_set"),
        ("hybrid", "?baseline={hybrid}", 422, "baseline_is_run"),
        ("hybrid", "?baseline=99999", 404, "baseline_not_found"),
        ("missing", "", 404, "run_not_found"),
        ("hybrid", "?max_drop=1.5", 422, "validation_error"),
        ("hybrid", "?max_drop=-0.1", 422, "validation_error"),
        ("hybrid", "?max_new_misses=-1", 422, "validation_error"),
        ("hybrid", "?k=20&depth=10", 422, "k_above_depth"),
        ("hybrid", "?baseline=abc", 422, "validation_error"),
    ],
)
def test_refusals_are_json_errors_with_codes(
    client: TestClient,
    accounts: dict[Role, Account],
    pushed: dict[str, int],
    which: str,
    query: str,
    status: int,
    code: str,
) -> None:
    run_id = pushed.get(which, 99999)
    answer = _gate(client, accounts[Role.REVIEWER], run_id, query.format(**pushed))
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code
    if code == "no_baseline":
        assert "?baseline=" in error["message"]


def test_the_limits_fail_the_gate_with_their_reasons(
    client: TestClient, accounts: dict[Role, Account], pushed: dict[str, int], tmp_path: Path
) -> None:
    reviewer = accounts[Role.REVIEWER]
    run_id = pushed["hybrid"]
    # a drop of nDCG@3 beyond the allowed: HYBRID loses c of q2 and finds d of q3 lower
    lenient = _gate(client, reviewer, run_id, "?k=3&depth=3&max_drop=1").json()
    assert lenient["passed"] is True
    assert lenient["reasons"] == []
    assert lenient["max_drop"] == 1.0
    # one document left the top 3: more than 0 fails, 1 is allowed
    strict = _gate(client, reviewer, run_id, "?k=3&depth=3&max_drop=1&max_new_misses=0").json()
    assert strict["passed"] is False
    assert strict["max_new_misses"] == 0
    assert strict["reasons"] == [
        "1 relevant document left the top 3, more than the 0 allowed (max new misses)"
    ]
    _, cli = _cli_gate(
        tmp_path, RERANKED, HYBRID, "--k", "3", "--depth", "3", "--max-drop", "1",
        "--max-new-misses", "0",
    )  # fmt: skip
    assert strict["reasons"] == cli["reasons"]
    allowed = _gate(client, reviewer, run_id, "?k=3&depth=3&max_drop=1&max_new_misses=1").json()
    assert allowed["passed"] is True
    # the drop: nDCG@3 falls by more than 0.1, so 0.1 fails it and R@3 (unchanged) does not
    dropped = _gate(client, reviewer, run_id, "?k=3&depth=3&max_drop=0.1").json()
    assert dropped["passed"] is False
    assert len(dropped["reasons"]) == 1
    assert dropped["reasons"][0].startswith("nDCG@3 dropped by ")


def test_the_gate_needs_credentials_and_any_role_reads_it(
    client: TestClient, accounts: dict[Role, Account], pushed: dict[str, int]
) -> None:
    anonymous = client.get(f"/api/v1/runs/{pushed['hybrid']}/gate")
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "not_authenticated"
    for role in Role:
        assert _gate(client, accounts[role], pushed["hybrid"]).status_code == 200, role
