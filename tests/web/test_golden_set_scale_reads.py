"""A golden set's pages and API read its counts, never its rows of queries or judgments: at
MS MARCO train size (500,000 judged queries, benchmarks/import_golden_set_scale.py) a page
that loaded them would take seconds and hundreds of MB (issue 29). No page or API route lists
a golden set's queries; the run pages that list queries are paged by their own routes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import event
from sqlalchemy.engine import Engine

from app.models import Role
from tests.support.samples import QRELS, QUERIES
from tests.support.service import ORIGIN, Account, login


@contextmanager
def statements(engine: Engine) -> Iterator[list[str]]:
    """The SQL the engine runs inside the block."""
    seen: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)


def test_the_golden_set_page_and_api_read_no_query_or_judgment_rows(
    client: TestClient, engine: Engine, accounts: dict[Role, Account]
) -> None:
    login(client, accounts[Role.LEAD].email)
    response = client.post(
        "/golden-sets",
        data={"name": "scale"},
        headers=ORIGIN,
        files={"qrels": ("qrels.txt", QRELS), "queries": ("queries.jsonl", QUERIES)},
        follow_redirects=False,
    )
    assert response.status_code == 303
    golden_url = response.headers["location"]
    golden_id = golden_url.rsplit("/", 1)[1]
    with statements(engine) as seen:
        for url in (golden_url, "/golden-sets", f"/api/v1/golden-sets/{golden_id}"):
            assert client.get(url).status_code == 200
        api = client.get("/api/v1/golden-sets").json()
    assert seen, "the listener saw the requests' SQL"
    rows_read = [s for s in seen if "FROM golden_query" in s or "FROM judgment" in s]
    assert rows_read == []
    assert {"items", "total"} <= set(api)  # the list of golden sets is paged
