"""The bad-input catalogue: every reader behind every upload, fed what people really upload.

Each case goes through the HTTP upload endpoint (golden-set import or run import) and, where
``misstriage evaluate`` reads the same file, through the command line too. A bad file answers
a 4xx with the error body, names the file and the line (where there is one), and writes
nothing; the command line exits 2 with one line naming the file and the line.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app.cli import main as cli_main
from app.main import create_app
from app.models import Role
from app.settings import Settings
from tests.support.service import Account, row_counts

QRELS = "q1 0 a 2\nq1 0 b 1\nq2 0 c 1\nq3 0 z 0\n"
QUERIES = "q1\trate limits\nq2\tsso login\n"
RUN = "q1 Q0 a 1 9 t\nq1 Q0 x 2 8 t\nq2 Q0 c 1 5 t\n"
MB = 1 << 20

Target = Literal["qrels", "queries", "corpus", "run"]


@dataclass(frozen=True)
class Case:
    """One bad upload: which file, its bytes, and the answer it must get."""

    id: str
    target: Target
    content: bytes
    #: the line the message must name; None where the problem has no line (an empty file)
    line: int | None
    #: words the problem must contain
    problem: str
    filename: str = ""
    status: int = 400
    code: str = "bad_input"
    #: also fed to ``misstriage evaluate`` (which reads qrels, queries and runs, not corpora)
    cli: bool = True
    form: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return (
            self.filename
            or {
                "qrels": "bad.qrels",
                "queries": "bad-queries.tsv",
                "corpus": "bad-corpus.jsonl",
                "run": "bad.trec",
            }[self.target]
        )


def _truncated_gzip(text: str) -> bytes:
    data = gzip.compress(text.encode())
    return data[: len(data) // 2]


def _garbage() -> bytes:
    # Deterministic bytes that are neither text nor gzip: NULs, high bytes, stray newlines.
    return bytes((i * 97 + 13) % 256 for i in range(4096))


LONG_RUN = "q1 Q0 a 1 9 t\nq1 Q0 " + "x" * (10 * MB) + "\n"
CASES = [
    Case("qrels-truncated-gzip", "qrels", _truncated_gzip(QRELS * 200), None, "truncated gzip"),
    Case("run-truncated-gzip", "run", _truncated_gzip(RUN * 500), None, "gzip"),
    Case("qrels-binary-garbage", "qrels", _garbage(), 1, "expected 4 columns"),
    Case("run-binary-garbage", "run", _garbage(), 1, "not valid UTF-8"),
    Case("qrels-too-few-columns", "qrels", b"q1 0 a 1\nq1 0 b\n", 2, "expected 4 columns"),
    Case("run-too-few-columns", "run", b"q1 Q0 a 1 9 t\nq1 Q0 b 2 8\n", 2, "expected 6 columns"),
    Case("qrels-grade-not-a-number", "qrels", b"q1 0 a 1\nq1 0 b high\n", 2, "not an integer"),
    Case("run-score-not-a-number", "run", b"q1 Q0 a 1 9 t\nq1 Q0 b 2 high t\n", 2, "not a number"),
    Case("run-score-nan", "run", b"q1 Q0 a 1 9 t\nq1 Q0 b 2 nan t\n", 2, "not a finite number"),
    Case("run-score-infinite", "run", b"q1 Q0 a 1 inf t\n", 1, "not a finite number"),
    Case(
        "jsonl-run-score-nan",
        "run",
        b'{"qid": "q1", "doc_id": "a", "score": 1}\n{"qid": "q1", "doc_id": "b", "score": NaN}\n',
        2,
        "not a finite number",
        filename="bad.jsonl",
    ),
    Case(
        "jsonl-run-score-infinite",
        "run",
        b'{"qid": "q1", "doc_id": "a", "score": -Infinity}\n',
        1,
        "not a finite number",
        filename="bad.jsonl",
    ),
    Case(
        "run-10mb-single-line",
        "run",
        LONG_RUN.encode(),
        2,
        "expected 6 columns (qid Q0 docno rank score tag), found 3",
    ),
    Case(
        "qrels-10mb-document-id",
        "qrels",
        ("q1 0 a 1\nq1 0 " + "d" * (10 * MB) + " 1\n").encode(),
        2,
        "characters long (at most 300)",
        cli=False,  # the database's limit: evaluate has none
    ),
    Case("qrels-empty", "qrels", b"", None, "empty"),
    Case("qrels-blank-lines-only", "qrels", b"\n  \n\t\n", None, "empty"),
    Case("run-empty", "run", b"", None, "the run is empty"),
    Case("queries-empty-json-lines", "queries", b"\n\n", None, "no query", filename="q.jsonl"),
    Case(
        "qrels-same-pair-conflicting-grades",
        "qrels",
        b"q1 0 a 2\nq1 0 b 1\nq1 0 a 0\n",
        3,
        "judged again with a different grade than on line 1",
    ),
    Case(
        "run-matches-no-golden-query",
        "run",
        b"1 Q0 a 1 9 t\n2 Q0 c 1 5 t\n",
        None,
        "none of the run's 2 queries",
    ),
    Case(
        "qrels-id-with-a-space",
        "qrels",
        b"q1 0 a 1\nq1 0 my doc 1\n",
        2,
        "expected 4 columns (qid iteration docno grade), found 5",
    ),
    Case(
        "queries-id-with-a-space",
        "queries",
        b"q1\trate limits\nq 2\tsso login\n",
        2,
        "contains whitespace",
    ),
    Case(
        "corpus-id-with-a-space",
        "corpus",
        b'{"_id": "a", "text": "x"}\n{"_id": "b c", "text": "y"}\n',
        2,
        "contains whitespace",
        cli=False,
    ),
    Case("qrels-non-utf8-id", "qrels", b"q1 0 a 1\nq1 0 caf\xe9 1\n", 2, "not valid UTF-8"),
    Case("run-non-utf8-id", "run", b"q1 Q0 a 1 9 t\nq1 Q0 caf\xe9 2 8 t\n", 2, "not valid UTF-8"),
    Case("queries-non-utf8-text", "queries", b"q1\tok\nq2\tna\xefve\n", 2, "not valid UTF-8"),
    Case(
        "corpus-non-utf8-text",
        "corpus",
        b'{"_id": "a", "text": "ok"}\n{"_id": "b", "text": "caf\xe9"}\n',
        2,
        "not valid UTF-8",
        cli=False,
    ),
    Case("qrels-nul-in-id", "qrels", b"q1 0 a 1\nq1 0 a\x00b 1\n", 2, "NUL"),
    Case("run-nul-in-id", "run", b"q1 Q0 a 1 9 t\nq1 Q0 a\x00b 2 8 t\n", 2, "NUL"),
    Case(
        "corpus-nul-in-text",
        "corpus",
        b'{"_id": "a", "text": "ok"}\n{"_id": "b", "text": "x\\u0000y"}\n',
        2,
        "NUL",
        cli=False,
    ),
    Case(
        "qrels-query-id-too-long-for-the-database",
        "qrels",
        ("q1 0 a 1\n" + "q" * 201 + " 0 b 1\n").encode(),
        2,
        "characters long (at most 200)",
        cli=False,
    ),
    Case(
        "jsonl-run-wrong-type",
        "run",
        b'{"qid": "q1", "doc_id": "a", "score": 2}\n'
        b'{"qid": "q1", "doc_id": "b", "score": "high"}\n',
        2,
        '"score" must be a number, got a string',
        filename="bad.jsonl",
    ),
    Case(
        "jsonl-run-list-entry-wrong-type",
        "run",
        b'{"qid": "q1", "docs": ["a", "b"]}\n{"qid": "q2", "docs": ["c", 1.5]}\n',
        2,
        '"docs[]" must be a string or an integer',
        filename="bad.jsonl",
    ),
    Case(
        "jsonl-run-not-json",
        "run",
        b'{"qid": "q1", "docs": ["a"]}\n{"qid": "q2", "docs": [\n',
        2,
        "not valid JSON",
        filename="bad.jsonl",
    ),
    Case(
        "jsonl-queries-wrong-type",
        "queries",
        b'{"_id": "q1", "text": "ok"}\n{"_id": "q2", "text": ["sso"]}\n',
        2,
        '"text" must be a string, got a list',
        filename="q.jsonl",
    ),
    Case(
        "jsonl-corpus-wrong-type",
        "corpus",
        b'{"_id": "a", "title": "A"}\n{"_id": "b", "chunk_index": "2"}\n',
        2,
        '"chunk_index" must be an integer, got a string',
        cli=False,
    ),
    Case(
        "run-rank-order-with-a-bad-rank",
        "run",
        b"q1 Q0 a 1 9 t\nq1 Q0 b two 8 t\n",
        2,
        "rank 'two' is not an integer",
        form={"order": "rank"},
    ),
]


def upload(client: TestClient, lead: Account, case: Case) -> tuple[int, dict[str, object]]:
    """Send the case's file where it belongs: a golden-set import (qrels, queries, corpus),
    or a run import into the golden set ``good`` (created beforehand by the test)."""
    bad = (case.name, case.content)
    if case.target == "run":
        golden_id = client.get("/api/v1/golden-sets", headers=lead.headers).json()["items"][0]["id"]
        response = client.post(
            f"/api/v1/golden-sets/{golden_id}/runs",
            headers=lead.headers,
            data={"name": "bad", **case.form},
            files={"run": bad},
        )
    else:
        files = {"qrels": ("good.qrels", QRELS.encode()), case.target: bad}
        response = client.post(
            "/api/v1/golden-sets", headers=lead.headers, data={"name": "bad"}, files=files
        )
    return response.status_code, response.json()


def import_good_golden_set(client: TestClient, lead: Account) -> None:
    response = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": "good"},
        files={"qrels": ("good.qrels", QRELS), "queries": ("good.tsv", QUERIES)},
    )
    assert response.status_code == 201, response.text


def test_the_catalogue_is_complete() -> None:
    assert len(CASES) >= 15
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.target for c in CASES} == {"qrels", "queries", "corpus", "run"}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_upload_answers_4xx_naming_the_line_and_writes_nothing(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, case: Case
) -> None:
    lead = accounts[Role.LEAD]
    import_good_golden_set(client, lead)
    before = row_counts(engine)
    status, body = upload(client, lead, case)
    assert status == case.status, body
    error = body["error"]
    assert isinstance(error, dict)
    assert error["code"] == case.code
    assert case.problem in error["details"]["problem"]
    assert error["details"]["file"] == case.name
    assert error["details"]["line"] == case.line
    where = f"{case.name}, line {case.line}: " if case.line else f"{case.name}: "
    assert error["message"].startswith(where)
    assert len(error["message"]) < 1000  # a 10 MB line is never echoed back
    assert row_counts(engine) == before


CLI_CASES = [c for c in CASES if c.cli]


@pytest.mark.parametrize("case", CLI_CASES, ids=[c.id for c in CLI_CASES])
def test_evaluate_exits_2_naming_file_and_line(tmp_path: Path, case: Case) -> None:
    bad = tmp_path / case.name
    bad.write_bytes(case.content)
    qrels, queries, run = tmp_path / "good.qrels", tmp_path / "good.tsv", tmp_path / "good.trec"
    qrels.write_text(QRELS)
    queries.write_text(QUERIES)
    run.write_text(RUN)
    files = {"qrels": qrels, "queries": queries, "run": run, case.target: bad}
    args = ["evaluate", "--qrels", str(files["qrels"]), "--queries", str(files["queries"])]
    args += ["--run", f"r={files['run']}"]
    if "order" in case.form:
        args += ["--order", case.form["order"]]
    result = CliRunner().invoke(cli_main, args)
    assert result.exit_code == 2, result.output
    where = f"{bad}, line {case.line}: " if case.line else f"{bad}: "
    (message,) = result.stderr.strip().splitlines()
    assert message.startswith(f"misstriage: error: {where}")
    assert case.problem in message


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_same_pair_twice_with_the_same_grade_is_tolerated_and_counted(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    response = client.post(
        "/api/v1/golden-sets",
        headers=accounts[Role.LEAD].headers,
        data={"name": "twice"},
        files={"qrels": ("twice.qrels", QRELS + "q1 0 a 2\n")},
    )
    assert response.status_code == 201, response.text
    assert response.json()["judgments"] == 4
    assert response.json()["report"]["judgments"]["duplicate_pairs_dropped"] == 1


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_valid_10mb_line_is_read(client: TestClient, accounts: dict[Role, Account]) -> None:
    """One JSON line of a million documents is a legitimate ranking, not an attack."""
    lead = accounts[Role.LEAD]
    import_good_golden_set(client, lead)
    docs = [f"n{i}" for i in range(1_100_000)] + ["a"]
    line = json.dumps({"qid": "q1", "docs": docs}).encode()
    assert len(line) > 10 * MB
    golden_id = client.get("/api/v1/golden-sets", headers=lead.headers).json()["items"][0]["id"]
    response = client.post(
        f"/api/v1/golden-sets/{golden_id}/runs",
        headers=lead.headers,
        data={"name": "long"},
        files={"run": ("long.jsonl", line + b"\n")},
    )
    assert response.status_code == 201, response.text
    assert response.json()["lines"] == 1_100_001


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_an_upload_over_the_limit_is_413_and_writes_nothing(
    settings: Settings, engine: Engine, accounts: dict[Role, Account]
) -> None:
    small = create_app(settings.model_copy(update={"upload_max_bytes": 1000}), engine)
    lead = accounts[Role.LEAD]
    with TestClient(small) as client:
        for field_name, body in (("qrels", QRELS * 100), ("queries", QUERIES * 100)):
            files = {"qrels": ("q.qrels", QRELS), field_name: (f"{field_name}.txt", body)}
            response = client.post(
                "/api/v1/golden-sets", headers=lead.headers, data={"name": "big"}, files=files
            )
            assert response.status_code == 413
            assert response.json()["error"]["code"] == "too_large"
    assert sum(row_counts(engine).values()) == 0


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_a_file_name_longer_than_the_column_is_cut_not_a_5xx(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    lead = accounts[Role.LEAD]
    import_good_golden_set(client, lead)
    golden_id = client.get("/api/v1/golden-sets", headers=lead.headers).json()["items"][0]["id"]
    name = "r" * 600 + ".trec"
    response = client.post(
        f"/api/v1/golden-sets/{golden_id}/runs",
        headers=lead.headers,
        data={"name": "named"},
        files={"run": (name, RUN)},
    )
    assert response.status_code == 201, response.text
    assert response.json()["source_name"] == name[-500:]
