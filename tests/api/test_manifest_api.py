"""Bad index manifests: a clear 4xx naming the file and line, and nothing written."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.models import Document, GoldenSet, Judgment, Role
from tests.support.service import Account

QRELS = b"q1 0 a 1\nq1 0 b 1\n"
CORPUS = "".join(
    json.dumps({"_id": d, "title": d, "text": f"text of {d}"}) + "\n" for d in ("a", "b")
).encode()


def _counts(engine: Engine) -> tuple[int, int, int]:
    with Session(engine) as session:
        return tuple(  # type: ignore[return-value]
            session.exec(select(func.count()).select_from(model)).one()
            for model in (GoldenSet, Judgment, Document)
        )


@pytest.mark.parametrize(
    ("manifest", "line", "problem"),
    [
        (b"# ids\na\nb\na\n", 4, "document 'a' is listed twice (first on line 2)"),
        (b"a\nb c\n", 2, "a document id has no spaces, got 'b c'"),
        (b"a\n\xff\xfe\n", 2, "not valid UTF-8 text (byte at column 1)"),
    ],
)
def test_a_bad_manifest_names_its_line_and_writes_nothing(
    client: TestClient,
    engine: Engine,
    accounts: dict[Role, Account],
    manifest: bytes,
    line: int,
    problem: str,
) -> None:
    before = _counts(engine)
    answer = client.post(
        "/api/v1/golden-sets",
        headers=accounts[Role.LEAD].headers,
        data={"name": "with manifest"},
        files={
            "qrels": ("qrels.txt", QRELS),
            "corpus": ("corpus.jsonl", CORPUS),
            "manifest": ("index-ids.txt", manifest),
        },
    )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "bad_input"
    assert error["details"] == {"file": "index-ids.txt", "line": line, "problem": problem}
    assert error["message"] == f"index-ids.txt, line {line}: {problem}"
    assert _counts(engine) == before


def test_a_manifest_needs_its_corpus(
    client: TestClient, engine: Engine, accounts: dict[Role, Account]
) -> None:
    before = _counts(engine)
    answer = client.post(
        "/api/v1/golden-sets",
        headers=accounts[Role.LEAD].headers,
        data={"name": "manifest alone"},
        files={"qrels": ("qrels.txt", QRELS), "manifest": ("index-ids.txt", b"a\n")},
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "manifest_without_corpus"
    assert _counts(engine) == before


def test_ids_the_corpus_does_not_describe_are_counted(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    answer = client.post(
        "/api/v1/golden-sets",
        headers=accounts[Role.LEAD].headers,
        data={"name": "manifest with strangers"},
        files={
            "qrels": ("qrels.txt", QRELS),
            "corpus": ("corpus.jsonl", CORPUS),
            "manifest": ("index-ids.txt", b"a\nzz\n"),
        },
    )
    assert answer.status_code == 201, answer.text
    assert answer.json()["report"]["manifest"] == {
        "indexed": 1,
        "not_indexed": 1,
        "relevant_not_indexed": 1,
        "unknown_to_corpus": 1,
    }
