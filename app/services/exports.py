"""Exporting a triage's backlog: one tracker issue per cause, updated (never duplicated) on
the next export; a dry run shows the exact requests instead of sending them."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlmodel import Session, col, select

from app.exporters import Draft, Exporter, NotConfigured, Sender, TrackerError, exporter_for
from app.models import OTHER, Export, GoldenSet, Run, Triage, utcnow
from app.services import backlog
from app.services.errors import Invalid
from app.settings import Settings

ROWS_SHOWN = 100
MEANINGS = {
    "not-indexed": "The document never reached the index: ingestion skipped it (size limits, "
    "a parser failure, a filter). Owner: ingestion / the data pipeline. Check the index first.",
    "vocabulary-mismatch": "The query and the document say the same thing in different words "
    '("throttling" vs "rate limiting"). Owner: search relevance: analyzers, synonyms, '
    "query expansion, or the dense retriever.",
    "chunk-boundary": "The answer is split across chunks and no chunk scores well alone. "
    "Owner: chunking / document processing (chunk size, overlap, structure-aware splitting).",
    OTHER: "Reviewers found another cause; their notes say which.",
}


def _cell(value: object) -> str:
    return "" if value is None else str(value).replace("|", "\\|").replace("\n", " ")


def make_draft(
    *,
    triage: Triage,
    run: Run,
    golden: GoldenSet,
    category: str,
    rows: list[dict[str, Any]],
    base_url: str,
) -> Draft:
    count = len(rows)
    word = "miss" if count == 1 else "misses"
    title = (
        f"[misstriage] {count} {category} {word} in {run.name} @{triage.depth} "
        f"(golden set {golden.name})"
    )
    meaning = MEANINGS.get(category, "A cause named by the team's reviewers.")
    backlog_url = f"{base_url}/triages/{triage.id}/backlog?cause={category}"
    lines = [
        f"**{count}** relevant documents of golden set **{golden.name}** are missing from the "
        f"top {triage.depth} of run **{run.name}**, and reviewers labelled them "
        f"**{category}**.",
        "",
        f"What it usually means: {meaning}",
        "",
        "| Query | Document | Grade | Rank | Note | Link |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows[:ROWS_SHOWN]:
        query = f"{row['qid']}: {row['query']}" if row.get("query") else row["qid"]
        lines.append(
            f"| {_cell(query)} | {_cell(row['doc_id'])} | {row['grade']} | {row['where']} | "
            f"{_cell(row['note'])} | [miss]({row['url']}) |"
        )
    if count > ROWS_SHOWN:
        lines.append(f"\nAnd {count - ROWS_SHOWN} more in the [backlog]({backlog_url}).")
    lines.append(f"\nExported by misstriage from triage #{triage.id}: {backlog_url}")
    return Draft(
        triage_id=triage.id or 0,
        category=category,
        title=title,
        body="\n".join(lines),
        labels=["misstriage", f"cause:{category}"],
        count=count,
        rows=rows,
        meaning=meaning,
        backlog_url=backlog_url,
    )


def payload_hash(draft: Draft) -> str:
    data = json.dumps([draft.title, draft.body, draft.labels], sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()


@dataclass
class Result:
    category: str
    action: str  # create | update | unchanged | failed
    external_id: str | None = None
    url: str | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "category": self.category,
            "action": self.action,
            "external_id": self.external_id,
            "url": self.url,
        }
        if self.error:
            data["error"] = self.error
        return data


@dataclass
class Outcome:
    results: list[Result] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self, *, dry_run: bool) -> dict[str, Any]:
        data: dict[str, Any] = {"results": [r.as_dict() for r in self.results]}
        if dry_run:
            data["requests"] = self.requests
        return data


def drafts(
    *, session: Session, triage: Triage, run: Run, golden: GoldenSet, base_url: str
) -> list[Draft]:
    """One draft per cause with at least one labelled miss (named causes, then other)."""
    by_cause: dict[str, list[dict[str, Any]]] = {}
    for row in backlog.rows(
        session=session, triage=triage, run=run, golden=golden, base_url=base_url
    ):
        # covered misses are not a cause: the run delivered their evidence via a duplicate
        if row["cause"] and row["cause"] != backlog.COVERED:
            by_cause.setdefault(row["cause"], []).append(row)
    order = [*golden.causes, OTHER]
    return [
        make_draft(
            triage=triage, run=run, golden=golden, category=c, rows=by_cause[c], base_url=base_url
        )
        for c in sorted(by_cause, key=lambda c: order.index(c) if c in order else len(order))
    ]


def export(
    *,
    session: Session,
    settings: Settings,
    triage: Triage,
    run: Run,
    golden: GoldenSet,
    tracker: str,
    target: str,
    dry_run: bool = False,
    sender: Sender | None = None,
    exporter: Exporter | None = None,
) -> Outcome:
    """Create or update one issue per cause. Each cause is committed on its own: a failure
    is reported for that cause, and running again completes the rest without duplicates."""
    try:
        exporter = exporter or exporter_for(tracker, settings, dry_run=dry_run)
        exporter.check_target(target)
    except (ValueError, NotConfigured) as exc:
        raise Invalid(str(exc), code="export_not_possible") from None
    sender = sender or Sender(
        timeout=settings.export_timeout_seconds,
        attempts=settings.export_attempts,
        max_wait=settings.export_max_wait_seconds,
    )
    outcome = Outcome()
    base_url = settings.public_url.rstrip("/")
    with httpx.Client() as client:
        for draft in drafts(
            session=session, triage=triage, run=run, golden=golden, base_url=base_url
        ):
            digest = payload_hash(draft)
            stored = session.exec(
                select(Export).where(
                    Export.triage_id == triage.id,
                    Export.tracker == tracker,
                    Export.target == target,
                    Export.category == draft.category,
                )
            ).first()
            if stored is not None and stored.payload_hash == digest:
                outcome.results.append(
                    Result(draft.category, "unchanged", stored.external_id, stored.url)
                )
                continue
            request = (
                exporter.update(target, stored.external_id, draft)
                if stored
                else exporter.create(target, draft)
            )
            action = "update" if stored else "create"
            if dry_run:
                outcome.requests.append(request.redacted() | {"category": draft.category})
                outcome.results.append(
                    Result(
                        draft.category,
                        action,
                        stored.external_id if stored else None,
                        stored.url if stored else None,
                    )
                )
                continue
            try:
                response = sender.send(client, request)
                if stored is None:
                    external_id, url = exporter.created(target, response, draft)
                    stored = Export(
                        triage_id=triage.id,  # type: ignore[arg-type]
                        tracker=tracker,
                        target=target,
                        category=draft.category,
                        external_id=external_id,
                        url=url,
                        payload_hash=digest,
                    )
                else:
                    stored.payload_hash = digest
                    stored.updated_at = utcnow()
                session.add(stored)
                session.commit()
            except TrackerError as exc:
                session.rollback()
                outcome.results.append(Result(draft.category, "failed", error=str(exc)))
                continue
            outcome.results.append(Result(draft.category, action, stored.external_id, stored.url))
    return outcome


def stored(*, session: Session, triage: Triage) -> list[Export]:
    """The tracker issues this triage was exported to."""
    return list(
        session.exec(
            select(Export)
            .where(Export.triage_id == triage.id)
            .order_by(col(Export.tracker), col(Export.target), col(Export.category))
        )
    )
