"""Tracker issues that follow a series: a triage of a run in a series, exported to a tracker
and target an earlier run's triage of the same series was exported to, updates that export's
issue of each cause (never a second issue), says which run and triage it follows, and lists
the earlier misses of the cause the new run fixed.

The issue followed is, per cause, the one of the latest earlier run of the series exported
there (then its latest export). "Fixed" is a pair labelled in that cause in the earlier
triage that is no miss of the new triage at all (the new run put the document within its
depth). A pair still missed under another cause has moved, not been fixed: the other cause's
issue counts it. A cause with an issue but no miss left in the new triage gets its issue
updated to say 0 and list every earlier miss as fixed; GitHub and GitLab close it (and open it
again when a later run misses the cause again); Jira and Linear close through workflows of
their own, which the team runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, col, select

from app.exporters import Follow, Tracker
from app.models import Export, GoldenQuery, Miss, MissState, Run, Triage
from app.models.triage_public import TriageContext


@dataclass(frozen=True)
class Followed:
    """The earlier export of one cause a triage's export follows."""

    external_id: str
    url: str
    follow: Follow


def series_follows(
    *, session: Session, ctx: TriageContext, tracker: Tracker, target: str
) -> dict[str, Followed]:
    """Per cause, the earlier issue of the series at (``tracker``, ``target``) this triage's
    export follows, with the misses its run fixed; empty outside a series."""
    run = ctx.run
    if run.series is None:
        return {}
    found = session.exec(
        select(Export, Triage, Run)
        .join(Triage, col(Triage.id) == col(Export.triage_id))
        .join(Run, col(Run.id) == col(Triage.run_id))
        .where(
            Run.golden_set_id == run.golden_set_id,
            Run.series == run.series,
            col(Run.id) < run.id,
            Export.tracker == tracker,
            Export.target == target,
        )
        .order_by(col(Run.id).desc(), col(Export.id).desc())
    ).all()
    latest: dict[str, tuple[Export, Triage, Run]] = {}
    for export, triage, earlier in found:
        latest.setdefault(export.category, (export, triage, earlier))
    if not latest:
        return {}
    now_missed = set(
        session.exec(select(Miss.qid, Miss.doc_id).where(Miss.triage_id == ctx.triage.id)).all()
    )
    texts = dict(
        session.exec(
            select(GoldenQuery.qid, GoldenQuery.text).where(
                GoldenQuery.golden_set_id == run.golden_set_id
            )
        ).all()
    )
    out: dict[str, Followed] = {}
    for category, (export, triage, earlier) in latest.items():
        assert triage.id is not None
        before = session.exec(
            select(Miss.qid, Miss.doc_id)
            .where(
                Miss.triage_id == triage.id,
                Miss.category == category,
                col(Miss.state).in_([MissState.LABELLED.value, MissState.CARRIED.value]),
            )
            .order_by(col(Miss.position))
        ).all()
        fixed = [
            {"qid": q, "doc_id": d, "query": texts.get(q) or ""}
            for q, d in before
            if (q, d) not in now_missed
        ]
        out[category] = Followed(
            external_id=export.external_id,
            url="" if export.tracker == Tracker.WEBHOOK else export.url,
            follow=Follow(
                series=run.series,
                run_name=run.name,
                earlier_run=earlier.name,
                earlier_triage=triage.id,
                fixed=fixed,
            ),
        )
    return out
