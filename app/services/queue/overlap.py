"""Double review: the queue of a triage with overlap (``Triage.reviewers`` > 1).

A sampled miss (``Miss.reviewers`` > 1) is offered until it has that many labels from
distinct reviewers. Each reviewer's part is a ``Review`` row: their lease while they read the
miss, then their label. The miss's row lock (``FOR UPDATE`` on PostgreSQL, ``BEGIN IMMEDIATE``
on SQLite) serialises every change to a miss's reviews, so labels plus live leases never
exceed the need, and the (miss, reviewer) unique constraint keeps a reviewer to one label.

Blind: a reviewer's label is not written on the miss; the miss gets its final label (and
``version`` + 1) only when every label is in: the common cause when they agree, else the
adjudication queue (``MissState.DISPUTED``). Individual labels leave ``version`` alone: the
miss a second reviewer reads has not changed, and a changing version would tell them that
someone labelled it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, exists, func, or_
from sqlmodel import Session, col, select

from app.models import (
    CANT_TELL,
    LabelAction,
    Miss,
    MissState,
    Resolution,
    Review,
    Triage,
    User,
)
from app.models.triage_public import MissPublic
from app.services.delivery import events as outbox
from app.services.errors import Conflict, Forbidden, ServiceError
from app.services.queue.audit import is_lead, is_postgres, record_event, snapshot, stale
from app.services.queue.skips import skipped_ids

#: Reviewers' notes joined into an agreed label's note.
NOTE_JOIN = " | "


def reviews_of(session: Session, miss_id: int) -> list[Review]:
    """Every review row of a miss (labelled or only leased), read afresh."""
    return list(
        session.exec(
            select(Review)
            .where(Review.miss_id == miss_id)
            .order_by(col(Review.id))
            .execution_options(populate_existing=True)
        )
    )


def _mine(reviews: list[Review], user: User) -> Review | None:
    return next((r for r in reviews if r.reviewer_id == user.id), None)


def _taken_by_others(reviews: list[Review], user: User, now: datetime) -> int:
    """Labels and live leases of other reviewers: the part of the need already spoken for."""
    return sum(
        1 for r in reviews if r.reviewer_id != user.id and (r.category is not None or _live(r, now))
    )


def _live(review: Review, now: datetime) -> bool:
    return review.lease_expires_at is not None and review.lease_expires_at > now


def _new_review(miss: Miss, user: User, now: datetime) -> Review:
    assert miss.id is not None
    return Review(miss_id=miss.id, triage_id=miss.triage_id, reviewer_id=user.id, created_at=now)


def viewed(miss: Miss, review: Review | None) -> MissPublic:
    """The miss as one reviewer sees it: an open overlap miss shows the reviewer's own lease
    (the miss's lease columns belong to single-review and adjudication leases)."""
    public = MissPublic.of(miss)
    if miss.reviewers == 1 or miss.state != MissState.OPEN.value:
        return public
    held = review is not None and review.category is None and review.lease_expires_at
    return public.model_copy(
        update={
            "lease_holder": review.reviewer_id if held and review else None,
            "lease_expires_at": review.lease_expires_at if held and review else None,
        }
    )


def current(session: Session, triage: Triage, user: User, now: datetime) -> MissPublic | None:
    """The miss the caller holds a live lease on (a single-review miss or an overlap one)."""
    found = _current(session, triage, user, now)
    return None if found is None else viewed(*found)


def _current(
    session: Session, triage: Triage, user: User, now: datetime
) -> tuple[Miss, Review | None] | None:
    # two index-backed lookups (the caller's single-review lease: ix_miss_queue; their
    # overlap leases: ix_review_triage) rather than one OR across both tables
    single = session.exec(
        select(Miss)
        .where(
            Miss.triage_id == triage.id,
            Miss.state == MissState.OPEN.value,
            Miss.lease_holder_id == user.id,
            col(Miss.lease_expires_at) > now,
            col(Miss.reviewers) == 1,
        )
        .order_by(col(Miss.position))
        .limit(1)
        .execution_options(populate_existing=True)
    ).first()
    double = session.exec(
        select(Miss, Review)
        .join(Review, col(Review.miss_id) == col(Miss.id))
        .where(
            Review.triage_id == triage.id,
            Review.reviewer_id == user.id,
            col(Review.category).is_(None),
            col(Review.lease_expires_at) > now,
            Miss.state == MissState.OPEN.value,
        )
        .order_by(col(Miss.position))
        .limit(1)
        .execution_options(populate_existing=True)
    ).first()
    if double is not None and (single is None or double[0].position < single.position):
        return double[0], double[1]
    return None if single is None else (single, None)


def claim(
    session: Session, triage: Triage, user: User, now: datetime, lease: timedelta
) -> MissPublic | None:
    """Inside the caller's writing block: the next miss for the caller in queue order, a
    single-review miss whose lease is free or expired, or an overlap miss the caller has not
    labelled whose labels and others' live leases leave room; leased to the caller. The
    caller's current miss first (its lease renewed)."""
    held = _current(session, triage, user, now)
    if held is not None:
        miss, review = held
        if review is None:
            miss.lease_expires_at = now + lease
            session.add(miss)
        else:
            review.lease_expires_at = now + lease
            session.add(review)
        return viewed(miss, review)
    mine_labelled = exists().where(
        col(Review.miss_id) == col(Miss.id),
        col(Review.reviewer_id) == user.id,
        col(Review.category).is_not(None),
    )
    others_taken = (
        select(func.count())
        .select_from(Review)
        .where(
            col(Review.miss_id) == col(Miss.id),
            func.coalesce(col(Review.reviewer_id), -1) != user.id,
            or_(col(Review.category).is_not(None), col(Review.lease_expires_at) > now),
        )
        .scalar_subquery()
    )
    skipped = skipped_ids(triage_id=triage.id, user_id=user.id)  # type: ignore[arg-type]
    query = (
        select(Miss)
        .where(
            Miss.triage_id == triage.id,
            Miss.state == MissState.OPEN.value,
            col(Miss.id).not_in(skipped),
            or_(
                and_(
                    col(Miss.reviewers) == 1,
                    or_(col(Miss.lease_holder_id).is_(None), col(Miss.lease_expires_at) <= now),
                ),
                and_(col(Miss.reviewers) > 1, ~mine_labelled, others_taken < col(Miss.reviewers)),
            ),
        )
        .order_by(col(Miss.position))
        .limit(1)
        .execution_options(populate_existing=True)
    )
    if is_postgres(session):
        query = query.with_for_update(skip_locked=True, of=Miss)
    passed: list[int] = []
    while True:
        candidate = session.exec(
            query.where(col(Miss.id).not_in(passed)) if passed else query
        ).first()
        if candidate is None:
            return None
        assert candidate.id is not None
        if candidate.reviewers == 1:
            candidate.lease_holder_id = user.id
            candidate.lease_expires_at = now + lease
            session.add(candidate)
            return MissPublic.of(candidate)
        # PostgreSQL evaluated the reviews in the statement's snapshot, maybe older than the
        # lock just taken: count them again now that the miss is ours (SQLite: unchanged).
        reviews = reviews_of(session, candidate.id)
        mine = _mine(reviews, user)
        labelled = mine is not None and mine.category is not None
        full = _taken_by_others(reviews, user, now) >= candidate.reviewers
        if labelled or full or candidate.state != MissState.OPEN.value:
            passed.append(candidate.id)
            continue
        if mine is None:
            mine = _new_review(candidate, user, now)
        mine.lease_expires_at = now + lease
        session.add(mine)
        return viewed(candidate, mine)


def refusal(
    session: Session, miss: Miss, user: User, version: int, now: datetime
) -> tuple[LabelAction, ServiceError] | None:
    """Why ``user`` may not label the overlap ``miss`` at ``version``, or None."""
    conflict = stale(miss, version)
    if conflict is not None:
        return LabelAction.CONFLICT, conflict
    if miss.state != MissState.OPEN.value:
        if is_lead(user):
            return None  # a lead's label on a resolved or disputed miss is an adjudication
        return LabelAction.REFUSED, Forbidden(
            "this miss has all its reviewers' labels: an adjudicator decides it",
            code="lead_required",
        )
    assert miss.id is not None
    reviews = reviews_of(session, miss.id)
    mine = _mine(reviews, user)
    if mine is not None and mine.category is not None:
        return LabelAction.REFUSED, Conflict(
            "you have labelled this miss already: another reviewer gives its next label",
            code="already_reviewed",
        )
    room = _taken_by_others(reviews, user, now) < miss.reviewers
    if not room or (mine is None and not is_lead(user)):
        return LabelAction.REFUSED, Forbidden(
            "this miss is not leased to you", code="lease_not_held"
        )
    return None


def add_label(
    session: Session, miss: Miss, user: User, *, category: str, note: str, now: datetime
) -> None:
    """Inside the caller's writing block, after ``refusal`` said None: the caller's label on
    the overlap miss; the miss is resolved when it is the last one asked for."""
    if miss.state != MissState.OPEN.value:
        decide(session, miss, user, category=category, note=note, now=now)
        return
    assert miss.id is not None
    reviews = reviews_of(session, miss.id)
    mine = _mine(reviews, user)
    if mine is None:  # a lead labelling without a claim
        mine = _new_review(miss, user, now)
    mine.category, mine.note, mine.labelled_at, mine.lease_expires_at = category, note, now, None
    session.add(mine)
    # The reviewer's own label in the audit trail (the miss itself is unchanged until resolved).
    after = snapshot(miss) | {"category": category, "note": note}
    record_event(session, miss, user, LabelAction.REVIEW, now=now, after=after, note=note)
    labels = [r for r in reviews if r.category is not None and r is not mine] + [mine]
    if len(labels) >= miss.reviewers:
        _resolve(session, miss, user, labels, now)


def _resolve(session: Session, miss: Miss, user: User, labels: list[Review], now: datetime) -> None:
    """Every label is in: the common cause when they agree, else adjudication."""
    session.flush()
    # leases never used (expired, or given up) go: the miss is off the review queue
    session.execute(
        delete(Review).where(col(Review.miss_id) == miss.id, col(Review.category).is_(None))
    )
    before = snapshot(miss)
    causes = {r.category for r in labels}
    agreed = len(causes) == 1 and CANT_TELL not in causes
    if agreed:
        miss.state = MissState.LABELLED.value
        miss.category = labels[0].category
        miss.note = NOTE_JOIN.join(dict.fromkeys(r.note for r in labels if r.note))
        miss.resolution = Resolution.AGREED.value
        miss.labelled_by_id = user.id
        miss.labelled_at = now
    else:
        miss.state = MissState.DISPUTED.value
    miss.version += 1
    miss.lease_holder_id = None
    miss.lease_expires_at = None
    session.add(miss)
    action = LabelAction.AGREE if agreed else LabelAction.DISPUTE
    record_event(session, miss, user, action, now=now, before=before)
    if agreed:
        outbox.after_label(session, miss)


def decide(
    session: Session, miss: Miss, user: User, *, category: str, note: str, now: datetime
) -> None:
    """Inside the caller's writing block: the final label of an overlap miss, decided by an
    adjudicator (a disputed miss) or a lead (also an agreed one)."""
    before = snapshot(miss)
    miss.state = MissState.LABELLED.value
    miss.category = category
    miss.note = note
    miss.resolution = Resolution.ADJUDICATED.value
    miss.version += 1
    miss.labelled_by_id = user.id
    miss.labelled_at = now
    miss.lease_holder_id = None
    miss.lease_expires_at = None
    session.add(miss)
    record_event(session, miss, user, LabelAction.ADJUDICATE, now=now, before=before, note=note)
    outbox.after_label(session, miss)


def take_back(
    session: Session, miss: Miss, user: User, *, now: datetime, lease: timedelta
) -> MissPublic | None:
    """Inside the caller's writing block (the miss locked): the caller's own label on an
    overlap miss still waiting for another reviewer's goes, and the miss is leased to them
    again, as an undo does; None when there is nothing of theirs to take back (the miss has
    all its labels, or their label is gone already). The miss itself is unchanged: a
    reviewer's label never showed on it."""
    if miss.state != MissState.OPEN.value:
        return None
    assert miss.id is not None
    mine = _mine(reviews_of(session, miss.id), user)
    if mine is None or mine.category is None:
        return None
    before = snapshot(miss) | {"category": mine.category, "note": mine.note}
    mine.category, mine.note, mine.labelled_at = None, "", None
    mine.lease_expires_at = now + lease
    session.add(mine)
    record_event(session, miss, user, LabelAction.UNDO, now=now, before=before)
    return viewed(miss, mine)


def my_review(session: Session, miss: Miss, user: User) -> Review | None:
    """The caller's unlabelled review (their lease, live or expired) on an open overlap miss."""
    assert miss.id is not None
    mine = _mine(reviews_of(session, miss.id), user)
    return mine if mine is not None and mine.category is None else None


def give_up(session: Session, miss: Miss, user: User | None) -> list[dict[str, Any]]:
    """Inside the caller's writing block: drop the unlabelled reviews (leases) of ``user``,
    or of everyone with ``user`` None; answers what was dropped, for the audit trail."""
    assert miss.id is not None
    dropped = [
        r
        for r in reviews_of(session, miss.id)
        if r.category is None and (user is None or r.reviewer_id == user.id)
    ]
    for review in dropped:
        session.delete(review)
    return [{"lease_holder": r.reviewer_id} for r in dropped]


def labels_by(session: Session, triage: Triage, user: User) -> int:
    """How many overlap labels the caller gave in the triage."""
    return int(
        session.exec(
            select(func.count())
            .select_from(Review)
            .where(
                Review.triage_id == triage.id,
                Review.reviewer_id == user.id,
                col(Review.category).is_not(None),
            )
        ).one()
    )
