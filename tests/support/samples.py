"""A small golden set (judgments, queries, corpus) and a run full of traps, and its import
through the JSON API."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.support.service import Account

QRELS = "q1 0 a 2\nq1 0 b 1\nq2 0 c 1\nq3 0 z 0\n"


QUERIES = '{"_id": "q1", "text": "rate limits"}\n{"_id": "q2", "text": "sso login"}\n'


CORPUS = (
    '{"_id": "a", "title": "Rate limiting", "text": "429 Too Many Requests", "parent_id": "rl"}\n'
    '{"_id": "b", "title": "Retry", "text": "Back off", "parent_id": "rl", "chunk_index": 1}\n'
)


RUN = "q1 Q0 a 1 9 t\nq1 Q0 x 2 8 t\nq1 Q0 b 3 7 t\nq2 Q0 y 1 5 t\nq9 Q0 c 1 1 t\nq1 Q0 a 4 1 t\n"


def import_golden(client: TestClient, lead: Account, name: str = "help") -> dict:  # type: ignore[type-arg]
    response = client.post(
        "/api/v1/golden-sets",
        headers=lead.headers,
        data={"name": name},
        files={
            "qrels": ("qrels.txt", QRELS),
            "queries": ("queries.jsonl", QUERIES),
            "corpus": ("corpus.jsonl", CORPUS),
        },
    )
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]
