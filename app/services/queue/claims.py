"""Claims: how the next miss is found and leased, one mechanism for every queue. The
person's current miss first (their lease, live or expired while nobody took it), else the
next one in queue order they may take, with ``SKIP LOCKED``: a single-review miss and a
disputed one on the miss row (one statement), a double-reviewed miss as a place of theirs
(a ``Review`` row) while the others' labels and live leases leave one. Leasing a new miss
gives back the person's other leases in the triage (one lease per person and triage). Every
function here runs inside a transaction holding the person's lock (``rows.lock_person``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnClause,
    Connection,
    and_,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    update,
)

from app.models import LabelAction, MissState
from app.models.triage_public import MissPublic
from app.services.queue import rows, store
from app.services.queue.lifecycle import Stage
from app.services.queue.rows import (
    COLUMNS,
    MISS,
    P_EXPIRES,
    P_MISS,
    P_NOW,
    P_TRIAGE,
    P_USER,
    REVIEW,
    SKIP,
    MissRow,
    mine,
    reviews_of,
    row_of,
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
        row = lease_on_miss(
            conn, triage_id=triage_id, user_id=user_id, now=now, lease=lease, adjudication=False
        )
        return None if row is None else row.public()
    return lease_double(conn, triage_id=triage_id, user_id=user_id, now=now, lease=lease)


def give_back_others(conn: Connection, keep: MissRow, user_id: int, now: datetime) -> None:
    """One lease per person and triage: give back the person's leases but ``keep``'s, each
    with its ``release`` event."""
    dropped = drop_other_leases(
        conn, triage_id=keep.triage_id, user_id=user_id, keep=keep.id, reviews=True
    )
    if not dropped:
        return
    given = conn.execute(select(*rows.COLUMNS).where(MISS.c.id.in_(sorted(set(dropped)))))
    for row in given:
        miss = rows.row_of(row)
        before = rows.snapshot(miss) | {"lease_holder": user_id}
        store.append_event(
            conn,
            miss,
            user_id,
            LabelAction.RELEASE,
            now=now,
            before=before,
            note="given back: one miss at a time",
        )


# --- the statements of leases on the miss row (single review, adjudication) --------------

_NOT_SKIPPED = MISS.c.id.not_in(
    select(SKIP.c.miss_id).where(SKIP.c.triage_id == P_TRIAGE, SKIP.c.user_id == P_USER)
)


def _lease_on_miss(state: MissState, *, skips: bool) -> Any:
    """Lease the person their current miss in ``state`` (their lease, live or expired: nobody
    has taken it since), else the next one in queue order whose lease is free or expired, in
    one statement. ``SKIP LOCKED``: a miss another transaction is writing goes to the next.
    The outer ``state`` test makes PostgreSQL re-check a miss written meanwhile."""
    literal_state: ColumnClause[str] = literal_column(f"'{state.value}'")
    mine = (
        select(MISS.c.id)
        .where(
            MISS.c.triage_id == P_TRIAGE,
            MISS.c.state == literal_state,
            MISS.c.lease_holder_id == P_USER,
        )
        .order_by(MISS.c.position)
        .limit(1)
        .scalar_subquery()
    )
    free = (
        select(MISS.c.id)
        .where(
            MISS.c.triage_id == P_TRIAGE,
            MISS.c.state == state.value,
            or_(MISS.c.lease_holder_id.is_(None), MISS.c.lease_expires_at <= P_NOW),
            *((_NOT_SKIPPED,) if skips else ()),
        )
        .order_by(MISS.c.position)
        .limit(1)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    return (
        update(MISS)
        .where(MISS.c.id == func.coalesce(mine, free), MISS.c.state == state.value)
        .values(lease_holder_id=P_USER, lease_expires_at=P_EXPIRES)
        .returning(*COLUMNS)
    )


_LEASE_REVIEW = _lease_on_miss(MissState.OPEN, skips=True)
_LEASE_ADJUDICATION = _lease_on_miss(MissState.DISPUTED, skips=False)


def lease_on_miss(
    conn: Connection,
    *,
    triage_id: int,
    user_id: int,
    now: datetime,
    lease: timedelta,
    adjudication: bool,
) -> MissRow | None:
    """The person's current miss (lease renewed), else the next free one leased to them: in
    a single-review triage's queue, or (``adjudication``) its disputed misses. None when
    nothing is left for them."""
    statement = _LEASE_ADJUDICATION if adjudication else _LEASE_REVIEW
    params = {"p_triage": triage_id, "p_user": user_id, "p_now": now, "p_expires": now + lease}
    found = conn.execute(statement, params).first()
    if found is None:
        # A miss read as the person's (or the next free one) may have been written by
        # another transaction meanwhile: asked again, the statement sees it as it now is.
        found = conn.execute(statement, params).first()
    return None if found is None else row_of(found)


_MY_OTHER_LEASES = (
    update(MISS)
    .where(
        MISS.c.triage_id == P_TRIAGE,
        MISS.c.lease_holder_id == P_USER,
        MISS.c.id != P_MISS,
    )
    .values(lease_holder_id=None, lease_expires_at=None)
    .returning(MISS.c.id)
)
_MY_OTHER_REVIEW_LEASES = (
    delete(REVIEW)
    .where(
        REVIEW.c.triage_id == P_TRIAGE,
        REVIEW.c.reviewer_id == P_USER,
        REVIEW.c.category.is_(None),
        REVIEW.c.miss_id != P_MISS,
    )
    .returning(REVIEW.c.miss_id)
)


def drop_other_leases(
    conn: Connection, *, triage_id: int, user_id: int, keep: int, reviews: bool
) -> list[int]:
    """Give back every lease the person holds in the triage but the one on ``keep``: one
    lease per person and triage. ``reviews``: also their double-review leases. Answers the
    misses given back."""
    params = {"p_triage": triage_id, "p_user": user_id, "p_miss": keep}
    dropped = [int(i) for i in conn.execute(_MY_OTHER_LEASES, params).scalars()]
    if reviews:
        dropped += [int(i) for i in conn.execute(_MY_OTHER_REVIEW_LEASES, params).scalars()]
    return dropped


_RENEW = (
    update(MISS)
    .where(
        MISS.c.id == P_MISS,
        MISS.c.lease_holder_id == P_USER,
        MISS.c.state.in_([MissState.OPEN.value, MissState.DISPUTED.value]),
    )
    .values(lease_expires_at=P_EXPIRES)
    .returning(*COLUMNS)
)


def renew_on_miss(
    conn: Connection, *, miss_id: int, user_id: int, until: datetime
) -> MissRow | None:
    """Extend the person's lease on the miss row (single review, adjudication) in one
    statement. None: no such lease (a double-review lease is a ``Review`` row)."""
    found = conn.execute(_RENEW, {"p_miss": miss_id, "p_user": user_id, "p_expires": until})
    row = found.first()
    return None if row is None else row_of(row)


def lease_review(
    conn: Connection, miss: MissRow, *, user_id: int, until: datetime, now: datetime
) -> None:
    """Write the person's review lease on a double-reviewed miss (their row, made if new)."""
    found = mine(reviews_of(conn, miss.id), user_id)
    if found is None:
        conn.execute(
            insert(REVIEW).values(
                miss_id=miss.id,
                triage_id=miss.triage_id,
                reviewer_id=user_id,
                note="",
                lease_expires_at=until,
                created_at=now,
            )
        )
    else:
        conn.execute(update(REVIEW).where(REVIEW.c.id == found.id).values(lease_expires_at=until))


# --- double review -------------------------------------------------------------------------


def lease_double(
    conn: Connection, *, triage_id: int, user_id: int, now: datetime, lease: timedelta
) -> MissPublic | None:
    """The review queue of a triage with double review: the person's current miss (a single
    miss leased to them, or a place of theirs on a double-reviewed one while the others leave
    room), else the next miss in queue order they may take."""
    until = now + lease
    for miss in _my_current(conn, triage_id, user_id):
        target = rows.load(conn, miss.id)
        if target is None or target.miss.stage not in (Stage.OPEN, Stage.REVIEWING):
            continue
        miss = target.miss
        if miss.reviewers == 1:
            return store.set_lease(conn, miss.id, user_id=user_id, until=until).public()
        if rows.room_for(rows.reviews_of(conn, miss.id), miss, user_id, now):
            lease_review(conn, miss, user_id=user_id, until=until, now=now)
            return rows.with_lease(miss, user_id, until).public()
        store.drop_review_leases(conn, miss.id, user_id)  # the others filled its places
    passed: list[int] = []
    while True:
        query = _next_double(conn, triage_id, user_id, now)
        if passed:
            query = query.where(MISS.c.id.not_in(passed))
        found = conn.execute(query).first()
        if found is None:
            return None
        miss = rows.row_of(found)
        if miss.reviewers == 1:
            leased = store.set_lease(conn, miss.id, user_id=user_id, until=until)
            give_back_others(conn, leased, user_id, now)
            return leased.public()
        # PostgreSQL judged the reviews in the statement's snapshot, maybe older than the
        # lock just taken: count them again now that the miss is held.
        reviews = rows.reviews_of(conn, miss.id)
        taken = rows.mine(reviews, user_id)
        if (taken is not None and taken.labelled) or not rows.room_for(reviews, miss, user_id, now):
            passed.append(miss.id)
            continue
        lease_review(conn, miss, user_id=user_id, until=until, now=now)
        give_back_others(conn, miss, user_id, now)
        return rows.with_lease(miss, user_id, until).public()


def _my_current(conn: Connection, triage_id: int, user_id: int) -> list[MissRow]:
    """The person's leases on the triage's review queue, live or expired, in queue order."""
    single = conn.execute(
        select(*rows.COLUMNS).where(
            MISS.c.triage_id == triage_id,
            MISS.c.state == rows.OPEN_LITERAL,
            MISS.c.lease_holder_id == user_id,
        )
    ).all()
    double = conn.execute(
        select(*rows.COLUMNS)
        .select_from(REVIEW.join(MISS, MISS.c.id == REVIEW.c.miss_id))
        .where(
            REVIEW.c.triage_id == triage_id,
            REVIEW.c.reviewer_id == user_id,
            REVIEW.c.category.is_(None),
            MISS.c.state == MissState.OPEN.value,
        )
    ).all()
    return sorted((rows.row_of(r) for r in [*single, *double]), key=lambda m: m.position)


def _next_double(conn: Connection, triage_id: int, user_id: int, now: datetime) -> Any:
    """The next miss the person may take on a double-review triage's queue: a single miss
    whose lease is free or expired, or a double-reviewed one they have not labelled whose
    labels and others' live leases leave a place; not skipped by them."""
    labelled_by_me = rows.labelled_by_sql(user_id)
    others_taken = rows.others_places_sql(user_id, now)
    skipped = select(SKIP.c.miss_id).where(SKIP.c.triage_id == triage_id, SKIP.c.user_id == user_id)
    query = (
        select(*rows.COLUMNS)
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
