"""Exporting a triage's backlog: one tracker issue per cause, updated (never duplicated) on
the next export; a dry run shows the exact requests instead of sending them."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from app.db import end_reading, writing
from app.exporters import (
    Draft,
    Exporter,
    Follow,
    NotConfigured,
    Sender,
    TargetRefused,
    Tracker,
    TrackerError,
    exporter_for,
    markup,
    outbound,
)
from app.models import OTHER, Export, GoldenSet, Resolution, Run, Triage, column_width, utcnow
from app.models.exports import (
    ExportAction,
    ExportOutcome,
    ExportRecord,
    ExportRequest,
    ExportResult,
)
from app.models.triage_public import FinalCounts, TriageContext
from app.security import shown_url
from app.services.delivery.follow import Followed, series_follows
from app.services.errors import Invalid
from app.services.names import check_name
from app.services.triage import backlog
from app.services.triage.closure import rests_on
from app.services.triage.triages import triage_context
from app.settings import Settings

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


def rests_on_phrase(rows: list[dict[str, Any]]) -> str:
    """What the labels of one cause rest on (``triages.rests_on``), from its backlog rows."""
    counts = Counter(row.get("rests_on") for row in rows)
    return rests_on(FinalCounts(**{r.value: counts[r.value] for r in Resolution}))


def make_draft(
    *,
    triage: Triage,
    run: Run,
    golden: GoldenSet,
    category: str,
    rows: list[dict[str, Any]],
    base_url: str,
    family: str = "github",
    follows: Follow | None = None,
) -> Draft:
    """The issue of one cause, its body in ``family``'s markup (``markup.RENDERERS``);
    ``follows``: the earlier triage of the series whose issue it updates."""
    count = len(rows)
    word = "miss" if count == 1 else "misses"
    title = markup.title_text(
        f"[misstriage] {count} {category} {word} in {run.name} @{triage.depth} "
        f"(golden set {golden.name})"
    )
    meaning = MEANINGS.get(category, "A cause named by the team's reviewers.")
    backlog_url = markup.url_path(
        base_url, "triages", triage.id, "backlog", query={"cause": category}
    )
    rests_on = rests_on_phrase(rows)
    body = markup.Body(
        count=count,
        category=category,
        golden_name=golden.name,
        run_name=run.name,
        depth=triage.depth,
        triage_id=triage.id or 0,
        meaning=meaning,
        backlog_url=backlog_url,
        rows=rows,
        rests_on=rests_on,
        follows=follows,
    )
    render = markup.RENDERERS.get(family, markup.issue_markdown)
    return Draft(
        triage_id=triage.id or 0,
        category=category,
        title=title,
        body=render(body),
        labels=["misstriage", f"cause:{category}"],
        count=count,
        rows=rows,
        meaning=meaning,
        backlog_url=backlog_url,
        rests_on=rests_on,
        follows=follows,
    )


def payload_hash(draft: Draft) -> str:
    data = json.dumps([draft.title, draft.body, draft.labels], sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()


def drafts(
    *,
    session: Session,
    ctx: TriageContext,
    base_url: str,
    family: str = "github",
    follows: dict[str, Followed] | None = None,
) -> list[Draft]:
    """One draft per cause with at least one labelled miss (named causes, then other), and
    per cause of ``follows`` (the series' earlier issues this export updates: ``follow``),
    with its misses, none left included."""
    follows = follows or {}
    triage, run, golden = ctx.triage, ctx.run, ctx.golden
    by_cause: dict[str, list[dict[str, Any]]] = {}
    for row in backlog.rows(session=session, ctx=ctx, base_url=base_url):
        # covered misses are not a cause: the run delivered their evidence via a duplicate
        if row["cause"] and row["cause"] != backlog.COVERED:
            row["url"] = markup.url_path(base_url, "misses", row["miss_id"])
            by_cause.setdefault(row["cause"], []).append(row)
    for category in follows:
        by_cause.setdefault(category, [])
    order = [*golden.causes, OTHER]
    return [
        make_draft(
            triage=triage,
            run=run,
            golden=golden,
            category=c,
            rows=by_cause[c],
            base_url=base_url,
            family=family,
            follows=follows[c].follow if c in follows else None,
        )
        for c in sorted(by_cause, key=lambda c: order.index(c) if c in order else len(order))
    ]


@dataclass(frozen=True)
class _Stored:
    """What an earlier export of one cause left (read before any tracker is called)."""

    external_id: str
    url: str
    payload_hash: str


def export(
    *,
    session: Session,
    settings: Settings,
    triage_id: int,
    tracker: Tracker,
    target: str,
    dry_run: bool = False,
    sender: Sender | None = None,
    exporter: Exporter | None = None,
) -> ExportOutcome:
    """Create or update one issue per cause. Each cause is committed on its own: a failure
    is reported for that cause, and running again completes the rest without duplicates.

    No database transaction is open while a tracker answers (it may take seconds, or time
    out): everything is read first and that transaction ended; each tracker answer is then
    written in a short transaction of its own."""
    ctx = triage_context(session=session, triage_id=triage_id)
    check_name(target, what="an export target", max_length=500, code="export_not_possible")
    try:
        exporter = exporter or exporter_for(tracker, settings, dry_run=dry_run)
        exporter.check_target(target)
        webhook = tracker == Tracker.WEBHOOK
        endpoint = target if webhook else getattr(exporter, "api", None)
        # A dry run sends nothing (and may show placeholders for unset tracker URLs): only a
        # target given by the request is checked then, and for its form only.
        # A webhook's target is checked as a push checks it, so a preview never shows a
        # delivery the push would then refuse (a local or private address).
        if endpoint and (webhook or not dry_run):
            outbound.check_url(endpoint, allow_local=settings.allow_local_network)
    except TargetRefused as exc:
        # before anything is planned: the code names the tracker's rule, the message states it
        raise Invalid(str(exc), code=exc.code, details={"tracker": tracker.value}) from None
    except (ValueError, NotConfigured) as exc:
        raise Invalid(str(exc), code="export_not_possible") from None
    except outbound.AddressRefused as exc:
        raise Invalid(exc.message, code=exc.code) from None
    sender = sender or Sender(
        timeout=settings.export_timeout_seconds,
        attempts=settings.export_attempts,
        max_wait=settings.export_max_wait_seconds,
    )
    results: list[ExportResult] = []
    requests: list[ExportRequest] = []
    family = getattr(exporter, "markup", "github")
    base_url = settings.public_url.rstrip("/")
    follows = series_follows(session=session, ctx=ctx, tracker=tracker, target=target)
    plans = drafts(session=session, ctx=ctx, base_url=base_url, family=family, follows=follows)
    earlier = {
        row.category: _Stored(row.external_id, issue_link(row), row.payload_hash)
        for row in session.exec(
            select(Export).where(
                Export.triage_id == triage_id, Export.tracker == tracker, Export.target == target
            )
        )
    }
    # a cause first exported from this triage updates the series' earlier issue of it
    for category, followed in follows.items():
        earlier.setdefault(category, _Stored(followed.external_id, followed.url, ""))
    end_reading(session)  # no transaction is open while a tracker answers
    with outbound.client(allow_local=settings.allow_local_network) as client:
        for draft in plans:
            digest = payload_hash(draft)
            stored = earlier.get(draft.category)
            if stored is not None and stored.payload_hash == digest:
                results.append(
                    ExportResult(
                        category=draft.category,
                        action=ExportAction.UNCHANGED,
                        external_id=stored.external_id,
                        url=stored.url,
                    )
                )
                continue
            try:
                request = (
                    exporter.update(target, stored.external_id, draft)
                    if stored
                    else exporter.create(target, draft)
                )
            except TargetRefused as exc:
                # an issue id the tracker answered that cannot be one segment of a path
                results.append(
                    ExportResult(
                        category=draft.category, action=ExportAction.FAILED, error=str(exc)
                    )
                )
                continue
            action = ExportAction.UPDATE if stored else ExportAction.CREATE
            if dry_run:
                requests.append(
                    ExportRequest.model_validate(request.redacted() | {"category": draft.category})
                )
                results.append(
                    ExportResult(
                        category=draft.category,
                        action=action,
                        external_id=stored.external_id if stored else None,
                        url=stored.url if stored else None,
                    )
                )
                continue
            try:
                response = sender.send(client, request)
                if stored is None:
                    external_id, url = exporter.created(target, response, draft)
                else:
                    external_id, url = stored.external_id, stored.url
            except TrackerError as exc:
                results.append(
                    ExportResult(
                        category=draft.category, action=ExportAction.FAILED, error=str(exc)
                    )
                )
                continue
            except (KeyError, TypeError, ValueError) as exc:
                error = f"the tracker's answer has no issue id ({type(exc).__name__})"
                results.append(
                    ExportResult(category=draft.category, action=ExportAction.FAILED, error=error)
                )
                continue
            _record(
                session,
                triage_id=triage_id,
                tracker=tracker,
                target=target,
                category=draft.category,
                external_id=external_id[: column_width(Export, "external_id")],
                url=url,
                digest=digest,
            )
            results.append(
                ExportResult(
                    category=draft.category, action=action, external_id=external_id, url=url
                )
            )
    return ExportOutcome(results=results, requests=requests if dry_run else None)


def _record(
    session: Session,
    *,
    triage_id: int,
    tracker: Tracker,
    target: str,
    category: str,
    external_id: str,
    url: str,
    digest: str,
) -> None:
    """Write one tracker answer in a short transaction of its own."""
    with writing(session):
        row = session.exec(
            select(Export).where(
                Export.triage_id == triage_id,
                Export.tracker == tracker,
                Export.target == target,
                Export.category == category,
            )
        ).first()
        if row is None:
            row = Export(
                triage_id=triage_id,
                tracker=tracker,
                target=target,
                category=category,
                external_id=external_id,
                url=url,
                payload_hash=digest,
            )
        else:
            row.payload_hash = digest
            row.updated_at = utcnow()
        session.add(row)


def issue_link(row: Export) -> str:
    """The link to an exported issue, or "" for a webhook delivery: rows written before
    webhooks stopped storing one hold the endpoint's URL, which may carry its secret."""
    return "" if row.tracker == Tracker.WEBHOOK else row.url


def shown_target(tracker: str, target: str) -> str:
    """The target as pages show it: a webhook's URL elided past its host (it may carry its
    secret), every other tracker's (a repository, a project key) as it is."""
    return shown_url(target) if tracker == Tracker.WEBHOOK else target


def stored(*, session: Session, triage: Triage) -> list[ExportRecord]:
    """The tracker issues this triage was exported to."""
    return [
        ExportRecord.of(row).model_copy(
            update={"url": issue_link(row), "target": shown_target(row.tracker, row.target)}
        )
        for row in session.exec(
            select(Export)
            .where(Export.triage_id == triage.id)
            .order_by(col(Export.tracker), col(Export.target), col(Export.category))
        )
    ]
