"""The lead's view of a triage: throughput per reviewer, live leases, the residue, the
backlog with filters. Aggregates are computed in SQL; no query per row."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, literal
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import Select

from app.eval.hints import HINT_CAUSES
from app.eval.placement import where_the_run_put_it
from app.models import UNLABELLED as UNLABELLED_NAME
from app.models import (
    Miss,
    MissState,
    Review,
    RunQuery,
    Triage,
    User,
)
from app.models.triage_public import HintAccuracy, HintReport, MissPublic
from app.services.paging import DEFAULT_PER_PAGE, page_rows
from app.services.queue import skips as skips_service
from app.services.queue.lifecycle import LABELLED, UNLABELLED, Stage, in_stages, stage_of
from app.services.queue.tally import people_counts
from app.services.triage.kept import Kept, LabelKey, label_key, slot_of

#: The backlog's state filter for misses with a skip in force (not a stage of the miss).
SKIPPED = "skipped"
#: The backlog's state filter: a stage, or "labelled" (a final label, named or other).
STATE_FILTERS: dict[str, frozenset[Stage]] = {
    **{stage.value: frozenset({stage}) for stage in Stage},
    "labelled": LABELLED,
}


def cause_filter(cause: str) -> list[Any]:
    """The backlog's (and its download's) cause filter: a named cause, other, "unlabelled"
    (no final label: ``lifecycle.UNLABELLED``) or "covered". A named cause holds the labels
    given here and those carried from an earlier triage."""
    if cause == UNLABELLED_NAME:
        return [in_stages(_MISS, UNLABELLED)]
    if cause == MissState.COVERED.value:
        return [in_stages(_MISS, frozenset({Stage.COVERED}))]
    if cause:
        named = [MissState.LABELLED.value, MissState.CARRIED.value]
        return [col(Miss.category) == cause, col(Miss.state).in_(named)]
    return []


BACKLOG_SORTS = {
    "position": col(Miss.position),
    "qid": col(Miss.qid),
    "grade": col(Miss.grade).desc(),
    "rank": col(Miss.rank),
    "category": col(Miss.category),
    "labelled_at": col(Miss.labelled_at).desc(),
}


#: A rate needs at least this many labels over at least this span to mean something.
RATE_MIN_LABELS = 5
RATE_MIN_SECONDS = 120


@dataclass(frozen=True)
class Throughput:
    """A reviewer's current labels in a triage (undone labels and labels a lead relabelled
    since are not theirs any more) and when they gave the first and the last of them."""

    email: str
    labels: int
    first: datetime
    last: datetime
    #: Adjudications: the final label of a double-reviewed miss, decided.
    decisions: int = 0
    #: Of ``labels``, blind labels on misses still waiting for another reviewer's.
    waiting: int = 0

    @property
    def per_hour(self) -> float | None:
        """Labels per hour between the first and the last label (the intervals between
        them: ``labels - 1`` over the span); None until the span means something."""
        if self.labels < RATE_MIN_LABELS or self.span_seconds < RATE_MIN_SECONDS:
            return None
        return (self.labels - 1) * 3600 / self.span_seconds

    @property
    def span_seconds(self) -> float:
        return (self.last - self.first).total_seconds()

    @property
    def why_no_rate(self) -> str:
        """Why there is no rate yet (empty when there is one)."""
        if self.per_hour is not None:
            return ""
        return (
            f"A rate needs at least {RATE_MIN_LABELS} labels over at least "
            f"{RATE_MIN_SECONDS // 60} minutes; so far {self.labels} over "
            f"{_duration(self.span_seconds)}."
        )


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"


def throughput(*, session: Session, triage: Triage) -> list[Throughput]:
    """Each person's labels in force and decisions in the triage (the queue's tally:
    ``people_counts``): a label undone or relabelled by someone else no longer counts for
    its author; a blind label of a double-reviewed miss counts for its reviewer, an
    adjudication as a decision of its adjudicator."""
    assert triage.id is not None
    counts = people_counts(session=session, triage_id=triage.id)
    ids = [c.user_id for c in counts]
    emails = dict(session.exec(select(User.id, User.email).where(col(User.id).in_(ids))).all())
    rows = [
        Throughput(emails[c.user_id], c.labels, c.first, c.last, c.decisions, c.waiting)
        for c in counts
        if c.user_id in emails
    ]
    return sorted(rows, key=lambda t: (-(t.labels + t.decisions), t.email))


def _aware(value: Any) -> datetime:
    assert isinstance(value, datetime)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Lease:
    miss_id: int
    qid: str
    doc_id: str
    holder: str
    expires_at: datetime


def live_leases(*, session: Session, triage: Triage, now: datetime) -> list[Lease]:
    """The live leases on the triage's misses, the soonest to expire first: a single-review
    miss's (on the miss), each overlap reviewer's (their unlabelled review; two reviewers may
    hold one miss) and an adjudicator's on a disputed miss."""
    # five columns: more than sqlmodel's typed select() takes, so SQLAlchemy's
    columns = (col(Miss.id), col(Miss.qid), col(Miss.doc_id), col(User.email))
    single = session.execute(
        sa_select(*columns, col(Miss.lease_expires_at))
        .join(User, col(User.id) == col(Miss.lease_holder_id))
        .where(
            col(Miss.triage_id) == triage.id,
            col(Miss.state).in_([MissState.OPEN.value, MissState.DISPUTED.value]),
            col(Miss.lease_expires_at) > now,
        )
    ).all()
    # From the reviews whose lease runs past now (ix_review_lease: a few rows) to their misses.
    double = (
        session.execute(
            sa_select(*columns, col(Review.lease_expires_at))
            .select_from(Review)
            .join(Miss, col(Miss.id) == col(Review.miss_id))
            .join(User, col(User.id) == col(Review.reviewer_id))
            .where(
                col(Review.triage_id) == triage.id,
                col(Review.lease_expires_at) > now,
                col(Review.category).is_(None),
                col(Miss.state) == MissState.OPEN.value,
            )
        ).all()
        if triage.reviewers > 1
        else []
    )
    leases = [
        Lease(miss_id, qid, doc_id, email, _aware(expires))
        for miss_id, qid, doc_id, email, expires in [*single, *double]
    ]
    return sorted(leases, key=lambda lease: (lease.expires_at, lease.miss_id))


@dataclass(frozen=True)
class BacklogRow:
    miss: MissPublic
    labelled_by: str | None
    #: Where the run put the document (app/eval/placement.py).
    where: str
    #: Where the miss stands in its life cycle (``lifecycle.Stage``).
    stage: Stage = Stage.OPEN
    skips: list[skips_service.Skip] = field(default_factory=list)


def _misses_with_reviewer(triage: Triage) -> Select[Miss, str, int]:
    """Misses of the triage with who labelled them and how many results the run returned for
    their query (what ``where_the_run_put_it`` needs)."""
    return (
        select(Miss, User.email, RunQuery.retrieved)
        .join(User, col(User.id) == col(Miss.labelled_by_id), isouter=True)
        .join(
            RunQuery,
            (col(RunQuery.run_id) == literal(triage.run_id)) & (col(RunQuery.qid) == col(Miss.qid)),
            isouter=True,
        )
        .where(Miss.triage_id == triage.id)
    )


def _placed(
    triage: Triage, rows: Sequence[tuple[Miss, str | None, int | None]]
) -> list[BacklogRow]:
    """Backlog rows, each with the sentence saying where the run put the miss."""
    return [
        BacklogRow(
            MissPublic.of(m),
            email,
            where_the_run_put_it(m.rank, retrieved, triage.depth),
            stage_of(m.state, m.category, m.reviewed),
        )
        for m, email, retrieved in rows
    ]


_MISS = Miss.__table__  # type: ignore[attr-defined]
#: The residue (``lifecycle.KEEPS_OPEN``: the unlabelled and "other") in two parts, each
#: read in queue order from its own index (ix_miss_queue, ix_miss_category): one OR across
#: both walked the triage's queue from its start, past every labelled miss.
_RESIDUE_PARTS = (in_stages(_MISS, UNLABELLED), in_stages(_MISS, frozenset({Stage.OTHER})))


def residue_rows(*, session: Session, triage: Triage, limit: int = 100) -> list[BacklogRow]:
    """What keeps the categories from closing (``lifecycle.KEEPS_OPEN``): its first ``limit``
    misses in queue order."""
    rows: list[tuple[Miss, str | None, int | None]] = []
    for where in _RESIDUE_PARTS:
        rows += session.exec(
            _misses_with_reviewer(triage).where(where).order_by(col(Miss.position)).limit(limit)
        ).all()
    rows.sort(key=lambda row: row[0].position)
    return _placed(triage, rows[:limit])


def backlog(
    *,
    session: Session,
    triage: Triage,
    cause: str = "",
    qid: str = "",
    reviewer: str = "",
    state: str = "",
    sort: str = "position",
    page: int = 1,
    per_page: int = DEFAULT_PER_PAGE,
) -> tuple[list[BacklogRow], int]:
    """One page of the backlog; ``state`` "skipped" = misses with a skip still in force.

    The page is chosen, and its misses counted, on the misses alone (their reviewer joined only
    to filter by it); the page's rows are then read with their reviewer and result count: the
    count through those outer joins cost 31 ms at 100,000 misses on SQLite, the ids 3 ms."""
    filters: list[Any] = [col(Miss.triage_id) == triage.id, *cause_filter(cause)]
    if qid:
        filters.append(col(Miss.qid) == qid)
    if state == SKIPPED:
        filters.append(col(Miss.id).in_(skips_service.skipped_ids(triage_id=triage.id)))  # type: ignore[arg-type]
    elif state in STATE_FILTERS:
        filters.append(in_stages(_MISS, STATE_FILTERS[state]))
    ids = select(Miss.id)
    if reviewer:
        ids = ids.join(User, col(User.id) == col(Miss.labelled_by_id))
        filters.append(col(User.email) == reviewer)
    order = BACKLOG_SORTS.get(sort, BACKLOG_SORTS["position"])
    page_ids, total = page_rows(
        session=session,
        query=ids.where(*filters).order_by(order, col(Miss.position)),
        page=page,
        per_page=per_page,
    )
    rows = session.exec(_misses_with_reviewer(triage).where(col(Miss.id).in_(list(page_ids)))).all()
    place = {miss_id: n for n, miss_id in enumerate(page_ids)}
    found = sorted(rows, key=lambda row: place[row[0].id])
    placed = _placed(triage, found)
    by_miss: dict[int, list[skips_service.Skip]] = {}
    for skip in skips_service.skips(
        session=session, triage=triage, miss_ids=[row.miss.id for row in placed]
    ):
        by_miss.setdefault(skip.miss_id, []).append(skip)
    return [replace(row, skips=by_miss.get(row.miss.id, [])) for row in placed], total


@dataclass(frozen=True)
class LabelPanels:
    """The dashboard's panels that change only when a label does."""

    throughput: list[Throughput]
    hints: HintReport
    covered_on_queue: int


_panels: Kept[LabelPanels] = Kept()


def label_panels(*, session: Session, triage: Triage, key: LabelKey | None = None) -> LabelPanels:
    """Throughput per reviewer, the hints' precision and the covered misses on the queue,
    kept per triage until its labels change (app/services/kept.py): together a scan of the
    triage's labels and reviews (40-60 ms at 100,000 misses) on every page otherwise.
    ``key``: the triage's ``label_key`` when the caller has it."""
    slot = slot_of(session, triage)
    key = key if key is not None else label_key(session, triage)
    hit = _panels.get(slot, key)
    if hit is not None:
        return hit
    panels = LabelPanels(
        throughput=throughput(session=session, triage=triage),
        hints=hint_accuracy(session=session, triage=triage),
        covered_on_queue=covered_on_queue(session=session, triage=triage),
    )
    _panels.put(slot, key, panels)
    return panels


def covered_on_queue(*, session: Session, triage: Triage) -> int:
    """Misses covered by a duplicate that a lead put on the queue (not covered any more)."""
    return int(
        session.exec(
            select(func.count())
            .select_from(Miss)
            .where(
                Miss.triage_id == triage.id,
                col(Miss.covered_by).is_not(None),
                Miss.state != MissState.COVERED.value,
            )
        ).one()
    )


def reviewers(*, session: Session, triage: Triage) -> list[str]:
    """Who labelled misses of this triage (one index probe per user, not a scan of misses)."""
    labelled = (
        select(Miss.id)
        .where(Miss.triage_id == triage.id, col(Miss.labelled_by_id) == col(User.id))
        .exists()
    )
    return list(session.exec(select(User.email).where(labelled).order_by(col(User.email))))


def hint_accuracy(*, session: Session, triage: Triage) -> HintReport:
    """Precision and recall of each hint over the labelled misses (one grouped query)."""
    flags = {
        HINT_CAUSES[0]: 1,  # positions in the row below
        HINT_CAUSES[1]: 2,
        HINT_CAUSES[2]: 3,
    }
    columns = (
        col(Miss.category),
        col(Miss.hint_not_indexed),
        col(Miss.hint_vocabulary),
        col(Miss.hint_chunk),
        col(Miss.hint),
    )
    # six columns: more than sqlmodel's typed select() takes, so SQLAlchemy's
    rows = session.execute(
        sa_select(*columns, func.count())
        .where(col(Miss.triage_id) == triage.id, col(Miss.state) == MissState.LABELLED.value)
        .group_by(*columns)
    ).all()
    report = []
    for cause, position in flags.items():
        hinted = sum(row[5] for row in rows if row[position])
        agreed = sum(row[5] for row in rows if row[position] and row[0] == cause)
        labelled = sum(row[5] for row in rows if row[0] == cause)
        report.append(
            HintAccuracy(cause=cause, hinted=hinted, agreed=agreed, labelled_as_cause=labelled)
        )
    suggested = sum(row[5] for row in rows if row[4])
    accepted = sum(row[5] for row in rows if row[4] and row[4] == row[0])
    assert triage.id is not None
    return HintReport(triage_id=triage.id, hints=report, suggested=suggested, accepted=accepted)
