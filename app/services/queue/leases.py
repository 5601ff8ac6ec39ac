"""Leases: who has a miss in front of them. One mechanism for the review queue (single and
double review) and the adjudication queue:

- a person's claim takes their lock on the triage (``rows.lock_person``), then answers their
  current miss (their lease, live or expired while nobody took it: renewed), else the next
  miss of the queue in queue order that they may take (``SKIP LOCKED``), leased to them;
- a person holds at most one lease per triage: leasing a new miss gives back any other;
- a single-review miss and a disputed one are leased on the miss row (one place); a
  double-reviewed miss has as many places as reviewers, each a ``Review`` row, until its
  labels and the others' live leases fill them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import (
    Connection,
    select,
)
from sqlmodel import Session

from app.models import LabelAction, MissState, User
from app.models.triage_public import AdjudicationCase, MissPublic, ReviewPublic
from app.services.errors import Forbidden, NotFound
from app.services.queue import claims, rows, store
from app.services.queue.lifecycle import NOT_HELD, Stage, check_adjudicator, is_lead
from app.services.queue.rows import (
    MISS,
    REVIEW,
    MissRow,
)

_USERS = User.__table__  # type: ignore[attr-defined]


def claim(
    *, session: Session, triage_id: int, user: User, now: datetime, lease: timedelta
) -> MissPublic | None:
    """The caller's current miss on the review queue, else the next one they may take, leased
    to them; None when nothing is left for them. 404 ``triage_not_found``."""
    assert user.id is not None
    with rows.transaction(session) as conn:
        reviewers = rows.lock_person(conn, triage_id=triage_id, user_id=user.id)
        if reviewers is None:
            raise NotFound(f"no triage {triage_id}", code="triage_not_found")
        return claims.lease_next(
            conn, triage_id=triage_id, reviewers=reviewers, user_id=user.id, now=now, lease=lease
        )


def claim_adjudication(
    *, session: Session, triage_id: int, user: User, now: datetime, lease: timedelta
) -> AdjudicationCase | None:
    """The adjudicator's current disputed miss (renewed), else the next one in queue order,
    leased to them; None when none is left. 403 ``adjudicator_required``."""
    check_adjudicator(user)
    assert user.id is not None
    with rows.transaction(session) as conn:
        if rows.lock_person(conn, triage_id=triage_id, user_id=user.id) is None:
            raise NotFound(f"no triage {triage_id}", code="triage_not_found")
        row = claims.lease_on_miss(
            conn, triage_id=triage_id, user_id=user.id, now=now, lease=lease, adjudication=True
        )
        if row is None:
            return None
        claims.give_back_others(conn, row, user.id, now)
        return case_of(conn, row)


def case_of(conn: Connection, miss: MissRow) -> AdjudicationCase:
    """A disputed miss with every reviewer's label and note, oldest first."""
    users = _USERS
    rows = conn.execute(
        select(
            REVIEW.c.reviewer_id,
            users.c.email,
            REVIEW.c.category,
            REVIEW.c.note,
            REVIEW.c.labelled_at,
        )
        .select_from(REVIEW.outerjoin(users, users.c.id == REVIEW.c.reviewer_id))
        .where(REVIEW.c.miss_id == miss.id, REVIEW.c.category.is_not(None))
        .order_by(REVIEW.c.labelled_at, REVIEW.c.id)
    ).all()
    labels = [
        ReviewPublic(reviewer=r, email=e, category=c, note=n, labelled_at=at)
        for r, e, c, n, at in rows
    ]
    return AdjudicationCase(**dict(miss.public()), labels=labels)


def current(*, session: Session, triage_id: int, user: User, now: datetime) -> MissPublic | None:
    """The review-queue miss the caller holds a live lease on, if any: read only (showing the
    review page leases nothing; ``claim`` does, on a POST)."""
    conn = session.connection()
    single = conn.execute(
        select(*rows.COLUMNS)
        .where(
            MISS.c.triage_id == triage_id,
            MISS.c.state == rows.OPEN_LITERAL,
            MISS.c.lease_holder_id == user.id,
            MISS.c.lease_expires_at > now,
        )
        .order_by(MISS.c.position)
        .limit(1)
    ).first()
    double = conn.execute(
        select(*rows.COLUMNS, REVIEW.c.lease_expires_at)
        .select_from(REVIEW.join(MISS, MISS.c.id == REVIEW.c.miss_id))
        .where(
            REVIEW.c.triage_id == triage_id,
            REVIEW.c.reviewer_id == user.id,
            REVIEW.c.category.is_(None),
            REVIEW.c.lease_expires_at > now,
            MISS.c.state == MissState.OPEN.value,
        )
        .order_by(MISS.c.position)
        .limit(1)
    ).first()
    found = [rows.row_of(row) for row in (single, double) if row is not None]
    if double is not None:
        found[-1] = rows.with_lease(found[-1], user.id, double[-1])
    if not found:
        return None
    return min(found, key=lambda m: m.position).public()


def renew(
    *, session: Session, miss_id: int, user: User, now: datetime, lease: timedelta
) -> MissPublic:
    """Extend the caller's lease on a miss (review, double review or adjudication). 403
    ``lease_not_held`` when it is not theirs any more."""
    assert user.id is not None
    until = now + lease
    with rows.transaction(session) as conn:
        held = claims.renew_on_miss(conn, miss_id=miss_id, user_id=user.id, until=until)
        if held is not None:
            return held.public()
        target = rows.load(conn, miss_id)
        if target is None:
            raise NotFound(f"no miss {miss_id}", code="miss_not_found")
        miss = target.miss
        if miss.reviewers > 1 and miss.stage in (Stage.OPEN, Stage.REVIEWING):
            reviews = rows.reviews_of(conn, miss.id)
            mine = rows.mine(reviews, user.id)
            if (
                mine is not None
                and not mine.labelled
                and rows.room_for(reviews, miss, user.id, now)
            ):
                claims.lease_review(conn, miss, user_id=user.id, until=until, now=now)
                return rows.with_lease(miss, user.id, until).public()
    raise Forbidden("this miss is no longer leased to you", code="lease_not_held")


def release(
    *, session: Session, miss_id: int, user: User, now: datetime, triage_id: int | None = None
) -> MissPublic:
    """Give a miss back to the queue (its holder, or a lead for anyone's lease). 404
    ``miss_not_found``, also for a miss of another triage than ``triage_id`` (a page's)."""
    assert user.id is not None
    with rows.transaction(session) as conn:
        miss = rows.locked(conn, miss_id=miss_id, user_id=user.id, triage_id=triage_id).miss
        if miss.reviewers > 1 and miss.stage in (Stage.OPEN, Stage.REVIEWING):
            dropped = store.drop_review_leases(conn, miss.id, None if is_lead(user) else user.id)
            if not dropped:
                raise Forbidden(NOT_HELD, code="lease_not_held")
            for holder in dropped:
                before = rows.snapshot(miss) | {"lease_holder": holder}
                store.append_event(conn, miss, user.id, LabelAction.RELEASE, now=now, before=before)
            return miss.public()
        mine = miss.lease_holder_id == user.id and miss.stage in (
            Stage.OPEN,
            Stage.DISPUTED,
        )
        if not (mine or (is_lead(user) and miss.lease_holder_id is not None)):
            raise Forbidden(NOT_HELD, code="lease_not_held")
        before = rows.snapshot(miss) | {"lease_holder": miss.lease_holder_id}
        released = store.set_lease(conn, miss.id, user_id=None, until=None)
        store.append_event(conn, miss, user.id, LabelAction.RELEASE, now=now, before=before)
    return released.public()
