"""The lead's view of a triage: throughput per reviewer, live leases, the residue, the
backlog with filters. Aggregates are computed in SQL; no query per row."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from app.eval.hints import HINT_CAUSES
from app.models import OTHER, LabelEvent, Miss, MissState, Triage, User
from app.services.errors import Invalid

LABEL_ACTIONS = ("label", "relabel")
BACKLOG_SORTS = {
    "position": col(Miss.position),
    "qid": col(Miss.qid),
    "grade": col(Miss.grade).desc(),
    "rank": col(Miss.rank),
    "category": col(Miss.category),
    "labelled_at": col(Miss.labelled_at).desc(),
}


@dataclass(frozen=True)
class Throughput:
    email: str
    labels: int
    first: datetime
    last: datetime

    @property
    def per_hour(self) -> float | None:
        hours = (self.last - self.first).total_seconds() / 3600
        return self.labels / hours if hours > 0 else None


def throughput(*, session: Session, triage: Triage) -> list[Throughput]:
    # Aggregate per user id on the index, then look up the few users.
    per_user = (
        select(
            col(LabelEvent.user_id).label("user_id"),
            func.count().label("labels"),
            func.min(LabelEvent.at).label("first"),
            func.max(LabelEvent.at).label("last"),
        )
        .where(LabelEvent.triage_id == triage.id, col(LabelEvent.action).in_(LABEL_ACTIONS))
        .group_by(col(LabelEvent.user_id))
        .subquery()
    )
    rows = session.exec(
        select(User.email, per_user.c.labels, per_user.c.first, per_user.c.last)
        .join(per_user, per_user.c.user_id == col(User.id))
        .order_by(per_user.c.labels.desc(), col(User.email))
    ).all()
    return [Throughput(email, n, _aware(first), _aware(last)) for email, n, first, last in rows]


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
    rows = session.exec(
        select(Miss, User.email)
        .join(User, col(User.id) == col(Miss.lease_holder_id))
        .where(
            Miss.triage_id == triage.id,
            Miss.state == MissState.OPEN.value,
            col(Miss.lease_expires_at) > now,
        )
        .order_by(col(Miss.lease_expires_at))
    ).all()
    return [
        Lease(m.id, m.qid, m.doc_id, email, m.lease_expires_at)
        for m, email in rows
        if m.id is not None and m.lease_expires_at is not None
    ]


def residue(*, session: Session, triage: Triage, limit: int = 100) -> tuple[list[Miss], int]:
    """What keeps the categories from closing: unlabelled misses and those in "other"."""
    where: list[Any] = [
        Miss.triage_id == triage.id,
        (col(Miss.state) == MissState.OPEN.value) | (col(Miss.category) == OTHER),
    ]
    total = session.exec(select(func.count()).select_from(Miss).where(*where)).one()
    items = session.exec(select(Miss).where(*where).order_by(col(Miss.position)).limit(limit))
    return list(items), int(total)


@dataclass(frozen=True)
class BacklogRow:
    miss: Miss
    labelled_by: str | None


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
    per_page: int = 50,
) -> tuple[list[BacklogRow], int]:
    if page < 1 or not 1 <= per_page <= 1000:
        raise Invalid("page >= 1 and per_page within 1..1000", code="invalid_page")
    where: list[Any] = [Miss.triage_id == triage.id]
    if cause == "unlabelled":
        where += [col(Miss.category).is_(None), Miss.state != MissState.COVERED.value]
    elif cause == MissState.COVERED.value:
        where.append(Miss.state == MissState.COVERED.value)
    elif cause:
        where.append(Miss.category == cause)
    if qid:
        where.append(Miss.qid == qid)
    if state:
        where.append(Miss.state == state)
    if reviewer:
        where.append(User.email == reviewer)
    base = (
        select(Miss, User.email)
        .join(User, col(User.id) == col(Miss.labelled_by_id), isouter=True)
        .where(*where)
    )
    total = session.exec(
        select(func.count())
        .select_from(Miss)
        .join(User, col(User.id) == col(Miss.labelled_by_id), isouter=True)
        .where(*where)
    ).one()
    order = BACKLOG_SORTS.get(sort, BACKLOG_SORTS["position"])
    rows = session.exec(
        base.order_by(order, col(Miss.position)).offset((page - 1) * per_page).limit(per_page)
    ).all()
    return [BacklogRow(m, email) for m, email in rows], int(total)


def reviewers(*, session: Session, triage: Triage) -> list[str]:
    """Who labelled misses of this triage (one index probe per user, not a scan of misses)."""
    labelled = (
        select(Miss.id)
        .where(Miss.triage_id == triage.id, col(Miss.labelled_by_id) == col(User.id))
        .exists()
    )
    return list(session.exec(select(User.email).where(labelled).order_by(col(User.email))))


@dataclass(frozen=True)
class HintAccuracy:
    """How one hint fared against the reviewers' labels.

    precision = labelled misses with the hint that reviewers put in its cause / labelled
    misses with the hint; recall = labelled misses of the cause that had the hint / labelled
    misses of the cause. None when there is nothing to divide by yet.
    """

    cause: str
    hinted: int
    agreed: int
    labelled_as_cause: int

    @property
    def precision(self) -> float | None:
        return self.agreed / self.hinted if self.hinted else None

    @property
    def recall(self) -> float | None:
        return self.agreed / self.labelled_as_cause if self.labelled_as_cause else None


@dataclass(frozen=True)
class HintReport:
    per_cause: list[HintAccuracy]
    #: Labelled misses that had a suggestion, and how many got the suggested cause.
    suggested: int
    accepted: int

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.suggested if self.suggested else None


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
        report.append(HintAccuracy(cause, hinted, agreed, labelled))
    suggested = sum(row[5] for row in rows if row[4])
    accepted = sum(row[5] for row in rows if row[4] and row[4] == row[0])
    return HintReport(report, suggested, accepted)
