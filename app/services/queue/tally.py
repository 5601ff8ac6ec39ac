"""The tally: a triage's misses counted by stage (``lifecycle``), per triage and per person.
Every count a page, an answer, a download, an exported issue or a webhook shows is read from
these two, so none can say another number than the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, case, exists, func, literal, or_, select
from sqlmodel import Session

from app.models import MissState, Resolution
from app.services.queue.lifecycle import (
    IN_NAMED_CAUSE,
    KEEPS_OPEN,
    LABELLED,
    UNLABELLED,
    Stage,
    stage_of,
)
from app.services.queue.rows import (
    MISS,
    REVIEW,
    SKIP,
    labelled_by_sql,
    others_places_sql,
)


@dataclass(frozen=True)
class Tally:
    """A triage's misses by stage, its final labels by cause and by what they rest on."""

    misses: int
    stages: dict[Stage, int]
    #: Misses per named cause (the golden set's causes first, in taxonomy order): final
    #: labels given here and labels carried from an earlier triage.
    causes: dict[str, int]
    #: The final labels (named causes and other) by what they rest on: ``single`` (one
    #: reviewer), ``agreed``, ``adjudicated``.
    rests_on: dict[str, int]
    #: Of ``causes``, the labels carried from an earlier triage (``Stage.CARRIED``).
    carried: dict[str, int] = field(default_factory=dict)
    #: What changes whenever a label does (``kept``): the rows the tally was counted from.
    fingerprint: tuple[Any, ...] = field(default=(), compare=False)

    def count(self, stages: frozenset[Stage]) -> int:
        return sum(self.stages[s] for s in stages)

    @property
    def unlabelled(self) -> int:
        """No final label yet: open, waiting for another reviewer, or disputed."""
        return self.count(UNLABELLED)

    @property
    def residue(self) -> int:
        """What keeps the categories open: the unlabelled and those in "other"."""
        return self.count(KEEPS_OPEN)

    @property
    def labelled(self) -> int:
        return self.count(LABELLED)

    @property
    def labelled_here(self) -> int:
        """Final labels in a named cause given in this triage (not carried)."""
        return self.stages[Stage.FINAL]

    @property
    def queued(self) -> int:
        """Every miss but those covered by a duplicate and left off the queue."""
        return self.misses - self.stages[Stage.COVERED]

    @property
    def closes(self) -> bool:
        return self.residue == 0


def triage_tally(*, session: Session, triage_id: int, causes: list[str]) -> Tally:
    """The tally of one triage: one grouped read of an index (ix_miss_summary)."""
    rows = (
        session.connection()
        .execute(
            select(
                MISS.c.state,
                MISS.c.category,
                MISS.c.resolution,
                MISS.c.reviewed,
                func.count(),
            )
            .where(MISS.c.triage_id == triage_id)
            .group_by(MISS.c.state, MISS.c.category, MISS.c.resolution, MISS.c.reviewed)
        )
        .all()
    )
    stages = dict.fromkeys(Stage, 0)
    by_cause = dict.fromkeys(causes, 0)
    carried = dict.fromkeys(causes, 0)
    rests = {r.value: 0 for r in Resolution}
    for state, category, resolution, reviewed, n in rows:
        stage = stage_of(state, category, reviewed)
        stages[stage] += n
        if stage in LABELLED:
            rests[resolution or Resolution.SINGLE.value] += n
        if stage in IN_NAMED_CAUSE and category is not None:
            by_cause[category] = by_cause.get(category, 0) + n
        if stage is Stage.CARRIED and category is not None:
            carried[category] = carried.get(category, 0) + n
    fingerprint = tuple(sorted((tuple(map(str, row[:4])), int(row[4])) for row in rows))
    return Tally(
        misses=sum(stages.values()),
        stages=stages,
        causes=by_cause,
        rests_on=rests,
        carried=carried,
        fingerprint=fingerprint,
    )


class Reason:
    """Why a miss without a final label is not the person's to label now (or that it is)."""

    FOR_YOU = "for_you"
    WITH_OTHERS = "with_others"
    ANOTHER_REVIEWER = "another_reviewer"
    ADJUDICATION = "adjudication"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class PersonTally:
    """One person's part of a triage: their labels in force, their decisions, and each miss
    still without a final label by the reason it is or is not theirs to label now."""

    labels: int
    decisions: int
    #: ``Reason`` -> misses; these add up to the triage's unlabelled misses.
    waiting: dict[str, int]

    @property
    def for_you(self) -> int:
        return self.waiting[Reason.FOR_YOU]


def person_labels(*, session: Session, triage_id: int, user_id: int) -> tuple[int, int]:
    """The person's labels in force in the triage (a single review's final label, a blind
    label of a double-reviewed miss) and their decisions (adjudications), from indexes."""
    conn = session.connection()
    single, decided = conn.execute(
        select(
            func.count().filter(MISS.c.resolution.is_(None)),
            func.count().filter(MISS.c.resolution == Resolution.ADJUDICATED.value),
        ).where(
            MISS.c.triage_id == triage_id,
            MISS.c.labelled_by_id == user_id,
            MISS.c.state == MissState.LABELLED.value,
        )
    ).one()
    blind = conn.execute(
        select(func.count()).where(
            REVIEW.c.triage_id == triage_id,
            REVIEW.c.reviewer_id == user_id,
            REVIEW.c.category.is_not(None),
        )
    ).scalar_one()
    return int(single) + int(blind), int(decided)


def person_tally(*, session: Session, triage_id: int, user_id: int, now: datetime) -> PersonTally:
    """``PersonTally``: one grouped read over the triage's misses without a final label."""
    mine_labelled = labelled_by_sql(user_id)
    skipped = exists().where(SKIP.c.miss_id == MISS.c.id, SKIP.c.user_id == user_id)
    others_places = others_places_sql(user_id, now)
    held_by_other = and_(
        MISS.c.lease_holder_id.is_not(None),
        MISS.c.lease_holder_id != user_id,
        MISS.c.lease_expires_at > now,
    )
    reason = case(
        (MISS.c.state == MissState.DISPUTED.value, literal(Reason.ADJUDICATION)),
        (mine_labelled, literal(Reason.ANOTHER_REVIEWER)),
        (skipped, literal(Reason.SKIPPED)),
        (and_(MISS.c.reviewers == 1, held_by_other), literal(Reason.WITH_OTHERS)),
        (
            and_(MISS.c.reviewers > 1, others_places >= MISS.c.reviewers),
            literal(Reason.WITH_OTHERS),
        ),
        else_=literal(Reason.FOR_YOU),
    )
    rows = (
        session.connection()
        .execute(
            select(reason, func.count())
            .where(
                MISS.c.triage_id == triage_id,
                MISS.c.state.in_([MissState.OPEN.value, MissState.DISPUTED.value]),
            )
            .group_by(reason)
        )
        .all()
    )
    waiting = {
        r: 0
        for r in (
            Reason.FOR_YOU,
            Reason.WITH_OTHERS,
            Reason.ANOTHER_REVIEWER,
            Reason.ADJUDICATION,
            Reason.SKIPPED,
        )
    }
    waiting.update({str(r): int(n) for r, n in rows})
    labels, decisions = person_labels(session=session, triage_id=triage_id, user_id=user_id)
    return PersonTally(labels=labels, decisions=decisions, waiting=waiting)


@dataclass(frozen=True)
class PersonCounts:
    """A person's labels in force and decisions in a triage, and when they gave the first
    and the last of them (the dashboard's reviewers table)."""

    user_id: int
    labels: int
    decisions: int
    first: datetime
    last: datetime
    #: Of ``labels``, blind labels on misses still waiting for another reviewer's.
    waiting: int = 0


def people_counts(*, session: Session, triage_id: int) -> list[PersonCounts]:
    """``person_labels`` for everybody who labelled in the triage, from indexes
    (ix_miss_labelled_by, ix_review_triage)."""
    conn = session.connection()
    own = conn.execute(
        select(
            MISS.c.labelled_by_id,
            func.count().filter(MISS.c.resolution.is_(None)),
            func.count().filter(MISS.c.resolution == Resolution.ADJUDICATED.value),
            func.min(MISS.c.labelled_at),
            func.max(MISS.c.labelled_at),
        )
        .where(
            MISS.c.triage_id == triage_id,
            MISS.c.state == MissState.LABELLED.value,
            MISS.c.labelled_by_id.is_not(None),
            or_(
                MISS.c.resolution.is_(None),
                MISS.c.resolution == Resolution.ADJUDICATED.value,
            ),
        )
        .group_by(MISS.c.labelled_by_id)
    ).all()
    blind = conn.execute(
        select(
            REVIEW.c.reviewer_id,
            func.count(),
            literal(0),
            func.min(REVIEW.c.labelled_at),
            func.max(REVIEW.c.labelled_at),
        )
        .where(
            REVIEW.c.triage_id == triage_id,
            REVIEW.c.category.is_not(None),
            REVIEW.c.reviewer_id.is_not(None),
        )
        .group_by(REVIEW.c.reviewer_id)
    ).all()
    # blind labels of misses still collecting theirs: from those misses (a few, by the
    # tally's index: open with labels in) to their reviews
    waiting: dict[int, int] = dict(
        conn.execute(
            select(REVIEW.c.reviewer_id, func.count())
            .select_from(MISS.join(REVIEW, REVIEW.c.miss_id == MISS.c.id))
            .where(
                MISS.c.triage_id == triage_id,
                MISS.c.state == MissState.OPEN.value,
                MISS.c.reviewed > 0,
                REVIEW.c.category.is_not(None),
            )
            .group_by(REVIEW.c.reviewer_id)
        ).all()
    )
    totals: dict[int, tuple[int, int, datetime, datetime]] = {}
    for user_id, labels, decisions, first, last in [*own, *blind]:
        if user_id is None or first is None or last is None:
            continue
        first, last = _aware(first), _aware(last)
        if user_id in totals:
            n, d, f, la = totals[user_id]
            labels, decisions, first, last = labels + n, decisions + d, min(first, f), max(last, la)
        totals[user_id] = (int(labels), int(decisions), first, last)
    return [
        PersonCounts(u, n, d, f, la, int(waiting.get(u, 0))) for u, (n, d, f, la) in totals.items()
    ]


def _aware(value: Any) -> datetime:
    assert isinstance(value, datetime)
    return value if value.tzinfo else value.replace(tzinfo=UTC)
