"""Leases: who has a miss in front of them. One mechanism for the review queue (single and
double review) and the adjudication queue:

- a person's claim takes their lock on the triage (``store.lock_person``), then answers their
  current miss (their lease, live or expired while nobody took it: renewed), else the next
  miss of the queue in queue order that they may take (``SKIP LOCKED``), leased to them;
- a person holds at most one lease per triage: leasing a new miss gives back any other;
- a single-review miss and a disputed one are leased on the miss row (one place); a
  double-reviewed miss has as many places as reviewers, each a ``Review`` row, until its
  labels and the others' live leases fill them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, exists, func, or_, select
from sqlmodel import Session

from app.models import LabelAction, MissState, Role, User
from app.models.triage_public import AdjudicationCase, MissPublic, ReviewPublic
from app.services.errors import Forbidden, NotFound
from app.services.queue import store
from app.services.queue.lifecycle import Stage
from app.services.queue.store import MISS, REVIEW, SKIP, MissRow

NOT_HELD = "this miss is not leased to you"
_USERS = User.__table__  # type: ignore[attr-defined]


def is_lead(user: User) -> bool:
    return Role(user.role).allows(Role.LEAD)


def claim(
    *, session: Session, triage_id: int, user: User, now: datetime, lease: timedelta
) -> MissPublic | None:
    """The caller's current miss on the review queue, else the next one they may take, leased
    to them; None when nothing is left for them. 404 ``triage_not_found``."""
    assert user.id is not None
    with store.transaction(session) as conn:
        reviewers = store.lock_person(conn, triage_id=triage_id, user_id=user.id)
        if reviewers is None:
            raise NotFound(f"no triage {triage_id}", code="triage_not_found")
        return lease_next(
            conn, triage_id=triage_id, reviewers=reviewers, user_id=user.id, now=now, lease=lease
        )


def lease_next(
    conn: Connection,
    *,
    triage_id: int,
    reviewers: int,
    user_id: int,
    now: datetime,
    lease: timedelta,
) -> MissPublic | None:
    """Inside a transaction holding the person's lock: ``claim``'s answer."""
    if reviewers == 1:
        row = store.lease_on_miss(
            conn, triage_id=triage_id, user_id=user_id, now=now, lease=lease, adjudication=False
        )
        return None if row is None else row.public()
    return _lease_double(conn, triage_id=triage_id, user_id=user_id, now=now, lease=lease)


def claim_adjudication(
    *, session: Session, triage_id: int, user: User, now: datetime, lease: timedelta
) -> AdjudicationCase | None:
    """The adjudicator's current disputed miss (renewed), else the next one in queue order,
    leased to them; None when none is left. 403 ``adjudicator_required``."""
    check_adjudicator(user)
    assert user.id is not None
    with store.transaction(session) as conn:
        if store.lock_person(conn, triage_id=triage_id, user_id=user.id) is None:
            raise NotFound(f"no triage {triage_id}", code="triage_not_found")
        row = store.lease_on_miss(
            conn, triage_id=triage_id, user_id=user.id, now=now, lease=lease, adjudication=True
        )
        if row is None:
            return None
        give_back_others(conn, row, user.id, now)
        return case_of(conn, row)


def check_adjudicator(user: User) -> None:
    if not user.adjudicates:
        raise Forbidden(
            "adjudication needs the lead role or the adjudicator flag",
            code="adjudicator_required",
        )


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
        select(*store.COLUMNS)
        .where(
            MISS.c.triage_id == triage_id,
            MISS.c.state == store.OPEN_LITERAL,
            MISS.c.lease_holder_id == user.id,
            MISS.c.lease_expires_at > now,
        )
        .order_by(MISS.c.position)
        .limit(1)
    ).first()
    double = conn.execute(
        select(*store.COLUMNS, REVIEW.c.lease_expires_at)
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
    found = [store.row_of(row) for row in (single, double) if row is not None]
    if double is not None:
        found[-1] = store.with_lease(found[-1], user.id, double[-1])
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
    with store.transaction(session) as conn:
        held = store.renew_on_miss(conn, miss_id=miss_id, user_id=user.id, until=until)
        if held is not None:
            return held.public()
        target = store.load(conn, miss_id)
        if target is None:
            raise NotFound(f"no miss {miss_id}", code="miss_not_found")
        miss = target.miss
        if miss.reviewers > 1 and miss.stage in (Stage.OPEN, Stage.REVIEWING):
            reviews = store.reviews_of(conn, miss.id)
            mine = store.mine(reviews, user.id)
            if (
                mine is not None
                and not mine.labelled
                and store.room_for(reviews, miss, user.id, now)
            ):
                store.lease_review(conn, miss, user_id=user.id, until=until, now=now)
                return store.with_lease(miss, user.id, until).public()
    raise Forbidden("this miss is no longer leased to you", code="lease_not_held")


def release(*, session: Session, miss_id: int, user: User, now: datetime) -> MissPublic:
    """Give a miss back to the queue (its holder, or a lead for anyone's lease)."""
    assert user.id is not None
    with store.transaction(session) as conn:
        if store.lock_person_for_miss(conn, miss_id=miss_id, user_id=user.id) is None:
            raise NotFound(f"no miss {miss_id}", code="miss_not_found")
        target = store.load(conn, miss_id)
        assert target is not None  # the lock found it, and misses are deleted with a triage
        miss = target.miss
        if miss.reviewers > 1 and miss.stage in (Stage.OPEN, Stage.REVIEWING):
            dropped = store.drop_review_leases(conn, miss.id, None if is_lead(user) else user.id)
            if not dropped:
                raise Forbidden(NOT_HELD, code="lease_not_held")
            for holder in dropped:
                before = store.snapshot(miss) | {"lease_holder": holder}
                store.append_event(conn, miss, user.id, LabelAction.RELEASE, now=now, before=before)
            return miss.public()
        mine = miss.lease_holder_id == user.id and miss.stage in (
            Stage.OPEN,
            Stage.DISPUTED,
        )
        if not (mine or (is_lead(user) and miss.lease_holder_id is not None)):
            raise Forbidden(NOT_HELD, code="lease_not_held")
        before = store.snapshot(miss) | {"lease_holder": miss.lease_holder_id}
        released = store.set_lease(conn, miss.id, user_id=None, until=None)
        store.append_event(conn, miss, user.id, LabelAction.RELEASE, now=now, before=before)
    return released.public()


def give_back_others(conn: Connection, keep: MissRow, user_id: int, now: datetime) -> None:
    """One lease per person and triage: give back the person's leases but ``keep``'s, each
    with its ``release`` event."""
    dropped = store.drop_other_leases(
        conn, triage_id=keep.triage_id, user_id=user_id, keep=keep.id, reviews=True
    )
    if not dropped:
        return
    rows = conn.execute(select(*store.COLUMNS).where(MISS.c.id.in_(sorted(set(dropped)))))
    for row in rows:
        miss = store.row_of(row)
        before = store.snapshot(miss) | {"lease_holder": user_id}
        store.append_event(
            conn,
            miss,
            user_id,
            LabelAction.RELEASE,
            now=now,
            before=before,
            note="given back: one miss at a time",
        )


# --- double review -------------------------------------------------------------------------


def _lease_double(
    conn: Connection, *, triage_id: int, user_id: int, now: datetime, lease: timedelta
) -> MissPublic | None:
    """The review queue of a triage with double review: the person's current miss (a single
    miss leased to them, or a place of theirs on a double-reviewed one while the others leave
    room), else the next miss in queue order they may take."""
    until = now + lease
    for miss in _my_current(conn, triage_id, user_id):
        target = store.load(conn, miss.id)
        if target is None or target.miss.stage not in (Stage.OPEN, Stage.REVIEWING):
            continue
        miss = target.miss
        if miss.reviewers == 1:
            return store.set_lease(conn, miss.id, user_id=user_id, until=until).public()
        if store.room_for(store.reviews_of(conn, miss.id), miss, user_id, now):
            store.lease_review(conn, miss, user_id=user_id, until=until, now=now)
            return store.with_lease(miss, user_id, until).public()
        store.drop_review_leases(conn, miss.id, user_id)  # the others filled its places
    passed: list[int] = []
    while True:
        query = _next_double(conn, triage_id, user_id, now)
        if passed:
            query = query.where(MISS.c.id.not_in(passed))
        found = conn.execute(query).first()
        if found is None:
            return None
        miss = store.row_of(found)
        if miss.reviewers == 1:
            leased = store.set_lease(conn, miss.id, user_id=user_id, until=until)
            give_back_others(conn, leased, user_id, now)
            return leased.public()
        # PostgreSQL judged the reviews in the statement's snapshot, maybe older than the
        # lock just taken: count them again now that the miss is held.
        reviews = store.reviews_of(conn, miss.id)
        taken = store.mine(reviews, user_id)
        if (taken is not None and taken.labelled) or not store.room_for(
            reviews, miss, user_id, now
        ):
            passed.append(miss.id)
            continue
        store.lease_review(conn, miss, user_id=user_id, until=until, now=now)
        give_back_others(conn, miss, user_id, now)
        return store.with_lease(miss, user_id, until).public()


def _my_current(conn: Connection, triage_id: int, user_id: int) -> list[MissRow]:
    """The person's leases on the triage's review queue, live or expired, in queue order."""
    single = conn.execute(
        select(*store.COLUMNS).where(
            MISS.c.triage_id == triage_id,
            MISS.c.state == store.OPEN_LITERAL,
            MISS.c.lease_holder_id == user_id,
        )
    ).all()
    double = conn.execute(
        select(*store.COLUMNS)
        .select_from(REVIEW.join(MISS, MISS.c.id == REVIEW.c.miss_id))
        .where(
            REVIEW.c.triage_id == triage_id,
            REVIEW.c.reviewer_id == user_id,
            REVIEW.c.category.is_(None),
            MISS.c.state == MissState.OPEN.value,
        )
    ).all()
    return sorted((store.row_of(r) for r in [*single, *double]), key=lambda m: m.position)


def _next_double(conn: Connection, triage_id: int, user_id: int, now: datetime) -> Any:
    """The next miss the person may take on a double-review triage's queue: a single miss
    whose lease is free or expired, or a double-reviewed one they have not labelled whose
    labels and others' live leases leave a place; not skipped by them."""
    labelled_by_me = exists().where(
        REVIEW.c.miss_id == MISS.c.id,
        REVIEW.c.reviewer_id == user_id,
        REVIEW.c.category.is_not(None),
    )
    others_taken = (
        select(func.count())
        .select_from(REVIEW)
        .where(
            REVIEW.c.miss_id == MISS.c.id,
            func.coalesce(REVIEW.c.reviewer_id, -1) != user_id,
            or_(REVIEW.c.category.is_not(None), REVIEW.c.lease_expires_at > now),
        )
        .scalar_subquery()
    )
    skipped = select(SKIP.c.miss_id).where(SKIP.c.triage_id == triage_id, SKIP.c.user_id == user_id)
    query = (
        select(*store.COLUMNS)
        .where(
            MISS.c.triage_id == triage_id,
            MISS.c.state == MissState.OPEN.value,
            MISS.c.id.not_in(skipped),
            or_(
                and_(
                    MISS.c.reviewers == 1,
                    or_(MISS.c.lease_holder_id.is_(None), MISS.c.lease_expires_at <= now),
                ),
                and_(MISS.c.reviewers > 1, ~labelled_by_me, others_taken < MISS.c.reviewers),
            ),
        )
        .order_by(MISS.c.position)
        .limit(1)
    )
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True, of=MISS)
    return query
