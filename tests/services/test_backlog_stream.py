"""The JSON backlog streams in bounded memory, as CSV and JSONL do.

Found by an outside probe: at 100,000 misses ``format=json`` sent its first byte after 4.98 s
and grew the server by 259 MiB (it grouped every row in memory before writing one). Now the head
goes out at once and each group's rows wait in a spool (memory up to SPOOL_BYTES, then an
unnamed temporary file); the figures of the 100,000-miss case are in benchmarks/backlog_http.py.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.models.triage_public import ClosureReport, TriageContext
from app.services.triage import backlog, closure, triages
from tests.support.triage import make_triage

ROWS = 20_000
CAUSES = ["not-indexed", "vocabulary-mismatch", "chunk-boundary", "other", None]


@pytest.fixture(params=["sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)  # the stream is the same on both: one database is enough


@pytest.fixture
def report(engine: Engine, tmp_path: Path) -> tuple[TriageContext, ClosureReport]:
    _, _, triage = make_triage(engine, tmp_path)
    assert triage.id is not None
    with Session(engine, expire_on_commit=False) as session:
        ctx = triages.triage_context(session=session, triage_id=triage.id)
        summary = closure.closure_report(session=session, triage=ctx.triage, causes=ctx.causes)
    return ctx, summary


def _row(n: int) -> dict[str, Any]:
    """A row as big as a real one (about 700 bytes of JSON)."""
    return {
        "miss_id": n,
        "qid": f"q{n // 10}",
        "query": f"how do I handle api throttling limits, case {n}?" * 3,
        "doc_id": f"doc-{n}",
        "title": f"Article {n}: api throttling limits and retries" * 2,
        "cause": CAUSES[n % len(CAUSES)],
        "note": f"a note of {n} " * 8 if n % 3 == 0 else None,
        "url": f"https://misstriage.example/misses/{n}",
        "skipped": [],
    }


def _rows(drawn: list[int]) -> Iterator[dict[str, Any]]:
    for n in range(ROWS):
        drawn.append(n)
        yield _row(n)


def test_json_backlog_memory_is_bounded(report: tuple[TriageContext, ClosureReport]) -> None:
    ctx, summary = report
    drawn: list[int] = []
    stream = backlog.as_json(_rows(drawn), ctx=ctx, summary=summary)
    tracemalloc.start()
    try:
        head = next(stream)
        assert drawn == []  # the head goes before a row is read
        sent = len(head)
        for chunk in stream:
            sent += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(drawn) == ROWS
    assert sent > 9_000_000
    # the groups' spools (SPOOL_BYTES each in memory at most) and a page of rows: a few MB,
    # where holding every row took more than the output's size
    assert peak < 5 * backlog.SPOOL_BYTES + 3_000_000, peak


def test_groups_spilled_to_disk_read_back_whole(
    report: tuple[TriageContext, ClosureReport], monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx, summary = report
    monkeypatch.setattr(backlog, "SPOOL_BYTES", 4096)  # every group spills to a file
    drawn: list[int] = []
    document = json.loads("".join(backlog.as_json(_rows(drawn), ctx=ctx, summary=summary)))
    groups = {g["cause"]: g for g in document["causes"]}
    assert list(groups) == [*ctx.causes, "other", "unlabelled"]
    for cause in CAUSES:
        expected = [_row(n) for n in range(ROWS) if CAUSES[n % len(CAUSES)] == cause]
        group = groups[cause or "unlabelled"]
        assert group["count"] == len(expected) == len(group["misses"])
        assert group["misses"] == expected
    assert document["closure"] == summary.closure
