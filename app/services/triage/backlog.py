"""The backlog export: one row per miss with stable fields, streamed (JSON, CSV, JSONL).

Rows are read in pages of ``BATCH`` from the database and written as they come, so a triage
of 100,000 misses never sits in memory as one list; a download reads each page in a session
of its own (``detached_rows``), holding no connection while its client reads.
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from typing import IO, Any

from sqlalchemy import literal
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.eval.cells import spreadsheet_cell
from app.eval.placement import where_the_run_put_it
from app.models import (
    OTHER,
    UNLABELLED,
    Document,
    GoldenQuery,
    Miss,
    MissState,
    Resolution,
    Review,
    RunQuery,
    User,
)
from app.models.triage import shown_cause
from app.models.triage_public import ClosureReport, TriageContext
from app.services.queue import skips
from app.services.queue.lifecycle import stage_of
from app.services.triage.dashboard import cause_filter

BATCH = 2000
#: A JSON download's group is kept in memory up to this size, then in a temporary file.
SPOOL_BYTES = 1 << 20
#: A download is sent in pieces of about this many characters.
CHUNK = 1 << 16
#: The backlog's group of misses covered by a duplicate (not a cause: off the queue).
COVERED = MissState.COVERED.value
#: The stable fields of a backlog row, in this order (documented in docs/backlog.md).
FIELDS = (
    "golden_set",
    "run",
    "depth",
    "miss_id",
    "qid",
    "query",
    "doc_id",
    "title",
    "grade",
    "rank",
    "cause",
    "rests_on",
    "note",
    "labelled_by",
    "labelled_at",
    "url",
    "hint",
    "covered_by",
    "retrieved",
    "where",
    "skipped",
    "stage",
    "carried_from",
)


def rows(
    *, session: Session, ctx: TriageContext, base_url: str, category: str | None = None
) -> Iterator[dict[str, Any]]:
    """Backlog rows in queue order, read through ``session`` (the tracker exports);
    ``category`` filters ("unlabelled" = not labelled yet, "covered" = covered by a duplicate
    and left off the queue)."""
    after = 0
    while True:
        page, after = _page(session, ctx=ctx, base_url=base_url, category=category, after=after)
        yield from page
        if not after:
            return


def detached_rows(
    *, engine: Engine, ctx: TriageContext, base_url: str, category: str | None = None
) -> Iterator[dict[str, Any]]:
    """Backlog rows in queue order for a download: each page read in a session of its own,
    closed before the page is handed on, so no database connection is held while a slow
    client reads (one that never reads held one each, until the pool ran dry). Pages follow
    each other by position (keyset), so every miss is in exactly one page, as it stood when
    its page was read; ``ctx`` is read, never refreshed."""
    after = 0
    while True:
        with Session(engine, expire_on_commit=False) as session:
            page, after = _page(session, ctx=ctx, base_url=base_url, category=category, after=after)
        yield from page
        if not after:
            return


def _page(
    session: Session, *, ctx: TriageContext, base_url: str, category: str | None, after: int
) -> tuple[list[dict[str, Any]], int]:
    """The ``BATCH`` rows after queue position ``after``, and the position to read on from
    (0 when this page is the last)."""
    triage, run, golden = ctx.triage, ctx.run, ctx.golden
    where: list[Any] = [Miss.triage_id == triage.id, *cause_filter(category or "")]
    # The page is chosen on the misses alone, then joined: with its LIMIT inside, no
    # database joins the rest of the triage first (PostgreSQL did, 110 ms a page at 100,000).
    chosen = (
        select(Miss.id)
        .where(*where, col(Miss.position) > after)
        .order_by(col(Miss.position))
        .limit(BATCH)
        .subquery()
    )
    query = (
        # five columns: more than sqlmodel's typed select() takes, so SQLAlchemy's
        sa_select(
            Miss,
            col(GoldenQuery.text),
            col(Document.title),
            col(User.email),
            col(RunQuery.retrieved),
        )
        .join(chosen, chosen.c.id == col(Miss.id))
        .join(
            GoldenQuery,
            (col(GoldenQuery.golden_set_id) == literal(golden.id))
            & (col(GoldenQuery.qid) == col(Miss.qid)),
            isouter=True,
        )
        .join(
            Document,
            (col(Document.golden_set_id) == literal(golden.id))
            & (col(Document.doc_id) == col(Miss.doc_id)),
            isouter=True,
        )
        .join(User, col(User.id) == col(Miss.labelled_by_id), isouter=True)
        .join(
            RunQuery,
            (col(RunQuery.run_id) == literal(run.id)) & (col(RunQuery.qid) == col(Miss.qid)),
            isouter=True,
        )
        .order_by(col(Miss.position))
    )
    batch = session.execute(query).all()
    skipped: dict[int, list[dict[str, Any]]] = {}
    for skip in skips.skips(
        session=session, triage=triage, miss_ids=[row[0].id for row in batch if row[0].id]
    ):
        skipped.setdefault(skip.miss_id, []).append(
            {"by": skip.by, "reason": skip.reason, "at": skip.at.isoformat()}
        )
    reviewers = _agreeing_reviewers(
        session, [row[0].id for row in batch if row[0].resolution == Resolution.AGREED.value]
    )
    page = []
    for miss, text, title, email, retrieved in batch:
        # an agreed label is its reviewers' (the miss records only the last of them)
        email = reviewers.get(miss.id or 0, email)
        page.append(
            {
                "golden_set": golden.name,
                "run": run.name,
                "depth": triage.depth,
                "miss_id": miss.id,
                "qid": miss.qid,
                "query": text,
                "doc_id": miss.doc_id,
                "title": title,
                "grade": miss.grade,
                "rank": miss.rank,
                # null: not labelled yet (the pages say "unlabelled")
                "cause": None
                if (cause := shown_cause(miss.state, miss.category)) == UNLABELLED
                else cause,
                # where the miss stands in its life cycle (app/services/queue/lifecycle.py)
                "stage": stage_of(miss.state, miss.category, miss.reviewed).value,
                # what the final label rests on: one reviewer, agreement or adjudication
                "rests_on": (miss.resolution or Resolution.SINGLE.value)
                if miss.state == MissState.LABELLED.value and miss.category
                else None,
                "hint": miss.hint,
                "covered_by": miss.covered_by,
                "note": miss.note,
                "labelled_by": email,
                "labelled_at": miss.labelled_at.isoformat() if miss.labelled_at else None,
                "url": f"{base_url}/misses/{miss.id}",
                "retrieved": retrieved or 0,
                "where": where_the_run_put_it(miss.rank, retrieved, triage.depth),
                "skipped": skipped.get(miss.id or 0, []),
                "carried_from": miss.carried_from,
            }
        )
    return page, (batch[-1][0].position if len(batch) == BATCH else 0)


def _agreeing_reviewers(session: Session, miss_ids: list[int | None]) -> dict[int, str]:
    """The reviewers of agreed overlap misses, "ann@…, bob@…" by miss id."""
    ids = [i for i in miss_ids if i is not None]
    if not ids:
        return {}
    found: dict[int, list[str]] = {}
    for miss_id, email in session.exec(
        select(Review.miss_id, User.email)
        .join(User, col(User.id) == col(Review.reviewer_id))
        .where(col(Review.miss_id).in_(ids), col(Review.category).is_not(None))
        .order_by(col(Review.miss_id), col(Review.labelled_at))
    ).all():
        found.setdefault(miss_id, []).append(email)
    return {miss_id: ", ".join(emails) for miss_id, emails in found.items()}


def as_jsonl(items: Iterator[dict[str, Any]]) -> Iterator[str]:
    """One JSON object per line, sent in pieces of about ``CHUNK`` characters (a piece per
    row costs the server a write per row)."""
    lines: list[str] = []
    size = 0
    for item in items:
        line = json.dumps(item, ensure_ascii=False) + "\n"
        lines.append(line)
        size += len(line)
        if size > CHUNK:
            yield "".join(lines)
            lines, size = [], 0
    yield "".join(lines)


def _csv_value(value: Any) -> Any:
    """A cell: empty for None; skips (a list) as "who: reason" joined by "; "; every text
    cell safe to open in a spreadsheet (app/eval/cells.py: no cell runs as a formula)."""
    if isinstance(value, list):
        value = "; ".join(f"{s['by'] or '(deleted user)'}: {s['reason']}" for s in value)
    return spreadsheet_cell(value)


def as_csv(items: Iterator[dict[str, Any]]) -> Iterator[str]:
    """UTF-8 with a byte-order mark, so that Excel reads accents and Greek letters right
    (LibreOffice and csv readers with ``utf-8-sig`` skip it)."""
    buffer = io.StringIO()
    buffer.write("\ufeff")
    writer = csv.DictWriter(buffer, fieldnames=FIELDS, lineterminator="\r\n")
    writer.writeheader()
    for item in items:
        writer.writerow({k: _csv_value(v) for k, v in item.items()})
        if buffer.tell() > CHUNK:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def as_json(
    items: Iterator[dict[str, Any]], *, ctx: TriageContext, summary: ClosureReport
) -> Iterator[str]:
    """One JSON document: the closure report, counts per cause, then the misses grouped by
    cause (named causes in taxonomy order, then other, then unlabelled, then the misses covered
    by a duplicate when there are any), in queue order within a group.

    Streamed in bounded memory: the head goes out at once; the rows are read once, in queue
    order, each written to its group's spool (in memory up to ``SPOOL_BYTES``, then an
    unnamed temporary file, gone with the process however it ends), and the groups are sent
    from their spools. One pass, so each miss is in exactly one group and each group's
    ``count`` is the number of its misses in the file."""
    names = [*ctx.causes, OTHER, UNLABELLED] + ([COVERED] if summary.covered else [])
    head = {
        "triage_id": ctx.triage.id,
        "golden_set": ctx.golden.name,
        "run": ctx.run.name,
        "depth": ctx.triage.depth,
        "k": ctx.triage.k,
        "counts": summary.counts,
        "other": summary.other,
        "unlabelled": summary.unlabelled,
        "covered": summary.covered,
        "misses": summary.misses,
        "states": summary.states,
        "residue": summary.residue,
        "closes": summary.closes,
        "closure": summary.closure,
    }
    if summary.covered_from is not None:  # the clusters that decided what is covered
        head["covered_from"] = summary.covered_from.model_dump(mode="json")
    if ctx.triage.reviewers > 1:  # double review: what the final labels rest on
        head |= {"final": summary.final.model_dump(), "adjudication": summary.adjudication}
    yield json.dumps(head, ensure_ascii=False)[:-1] + ', "causes": ['
    with ExitStack() as stack:
        spools: dict[str, IO[str]] = {}
        counts: dict[str, int] = {}

        def spool(name: str) -> IO[str]:
            if name not in spools:
                spools[name] = stack.enter_context(
                    tempfile.SpooledTemporaryFile(SPOOL_BYTES, mode="w+", encoding="utf-8")
                )
                counts[name] = 0
            return spools[name]

        for name in names:
            spool(name)
        for item in items:
            name = item["cause"] or UNLABELLED
            out = spool(name)
            out.write((", " if counts[name] else "") + json.dumps(item, ensure_ascii=False))
            counts[name] += 1
        for index, (name, out) in enumerate(spools.items()):
            group = json.dumps({"cause": name, "count": counts[name]}, ensure_ascii=False)
            yield (", " if index else "") + group[:-1] + ', "misses": ['
            out.seek(0)
            while chunk := out.read(1 << 16):
                yield chunk
            yield "]}"
    yield "]}"
