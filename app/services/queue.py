"""The review work queue: claim, renew, label, release, skip, undo (DESIGN.md, "Work queue").

Two reviewers never hold one miss: PostgreSQL picks the next miss with ``FOR UPDATE SKIP
LOCKED``; SQLite runs each operation in one ``BEGIN IMMEDIATE`` transaction. A label needs the
caller's lease (or the lead role) and the miss's current ``version``: a stale version answers
409 and the attempt is kept in the audit log, so no label is ever silently lost. Every label,
relabel, release, skip, undo and refused attempt appends a ``LabelEvent``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnClause, case, func, literal_column, or_
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from app.db import writing
from app.models import (
    CANT_TELL,
    LABEL_ACTIONS,
    LabelAction,
    LabelEvent,
    Miss,
    MissState,
    Triage,
    User,
)
from app.models.triage_public import LabelEventPublic, MissPublic
from app.readmodel import PageOf
from app.services import events as outbox
from app.services import overlap
from app.services.audit import (
    checked_note,
    is_lead,
    is_postgres,
    locked_miss,
    record_event,
    snapshot,
)
from app.services.errors import Conflict, Forbidden, Invalid, NotFound, ServiceError
from app.services.paging import page_rows
from app.services.skips import record_skip, skipped_ids

#: Undo looks this far back in the caller's labels for one still in force.
UNDO_LOOKBACK = 50


def _holds(miss: Miss, user: User) -> bool:
    """The caller's lease. An expired lease still counts while nobody else has claimed the
    miss: the version check keeps that safe, and a slow reviewer's label is not lost."""
    return miss.state == MissState.OPEN.value and miss.lease_holder_id == user.id


def current(*, session: Session, triage: Triage, user: User, now: datetime) -> MissPublic | None:
    """The miss the caller holds a live lease on, if any: read only (showing the review page
    claims nothing; ``claim`` does, on a POST)."""
    if triage.reviewers > 1:
        return overlap.current(session, triage, user, now)
    held = _current(session, triage, user, now)
    return None if held is None else MissPublic.of(held)


#: ``state = 'open'`` as SQL text, not a bound parameter: PostgreSQL uses the partial index
#: ix_miss_holder only when it can prove its predicate, which a generic plan of a prepared
#: statement (psycopg prepares after a few executions) cannot with a parameter.
_OPEN_LITERAL: ColumnClause[str] = literal_column(f"'{MissState.OPEN.value}'")


def _current(session: Session, triage: Triage, user: User, now: datetime) -> Miss | None:
    return session.exec(
        select(Miss)
        .where(
            Miss.triage_id == triage.id,
            col(Miss.state) == _OPEN_LITERAL,
            Miss.lease_holder_id == user.id,
            col(Miss.lease_expires_at) > now,
        )
        .order_by(col(Miss.position))
        .limit(1)
    ).first()


def claim(
    *, session: Session, triage: Triage, user: User, now: datetime, lease: timedelta
) -> MissPublic | None:
    """The caller's current miss, or the next unlabelled one whose lease is free or expired
    (queue order: one query's misses together, grade descending), leased to the caller.
    Misses the caller skipped go to other reviewers. None when nothing is left.

    With overlap (``triage.reviewers`` > 1) a sampled miss is offered to distinct reviewers
    until it has its labels (``app.services.overlap``)."""
    with writing(session):
        return _claim_in(session, triage, user, now, lease)


def _claim_in(
    session: Session, triage: Triage, user: User, now: datetime, lease: timedelta
) -> MissPublic | None:
    """Inside the caller's writing block: ``claim``."""
    if triage.reviewers > 1:
        return overlap.claim(session, triage, user, now, lease)
    mine = _current(session, triage, user, now)
    if mine is None:
        skipped = skipped_ids(triage_id=triage.id, user_id=user.id)  # type: ignore[arg-type]
        query = (
            select(Miss)
            .where(
                Miss.triage_id == triage.id,
                Miss.state == MissState.OPEN.value,
                or_(col(Miss.lease_holder_id).is_(None), col(Miss.lease_expires_at) <= now),
                col(Miss.id).not_in(skipped),
            )
            .order_by(col(Miss.position))
            .limit(1)
        )
        if is_postgres(session):
            query = query.with_for_update(skip_locked=True)
        mine = session.exec(query).first()
    if mine is None:
        return None
    mine.lease_holder_id = user.id
    mine.lease_expires_at = now + lease
    session.add(mine)
    return MissPublic.of(mine)


def renew(
    *, session: Session, miss_id: int, user: User, now: datetime, lease: timedelta
) -> MissPublic:
    """Extend the caller's lease on a miss (a review, an overlap review or an adjudication)."""
    with writing(session):
        miss = locked_miss(session, miss_id)
        if miss.reviewers > 1 and miss.state == MissState.OPEN.value:
            review = overlap.my_review(session, miss, user)
            if review is None:
                raise Forbidden("this miss is no longer leased to you", code="lease_not_held")
            review.lease_expires_at = now + lease
            session.add(review)
            return overlap.viewed(miss, review)
        if not (_holds(miss, user) or _adjudicating(miss, user)):
            raise Forbidden("this miss is no longer leased to you", code="lease_not_held")
        miss.lease_expires_at = now + lease
        session.add(miss)
    return MissPublic.of(miss)


def _adjudicating(miss: Miss, user: User) -> bool:
    """The caller's adjudication lease on a disputed miss."""
    return miss.state == MissState.DISPUTED.value and miss.lease_holder_id == user.id


def label(
    *,
    session: Session,
    miss_id: int,
    user: User,
    category: str,
    note: str,
    version: int,
    causes: list[str],
    now: datetime,
) -> MissPublic:
    """Label (or, for a lead, relabel) a miss at its current version."""
    note = checked_note(category, note, [*causes, CANT_TELL])
    with writing(session):
        miss, refusal = _label_in(session, miss_id, user, category, note, version, now)
    if refusal is not None:
        raise refusal[1]
    return MissPublic.of(miss)


@dataclass(frozen=True)
class LabelledAndNext:
    """A label and the caller's next miss (None: nothing is left for the caller)."""

    labelled: MissPublic
    next: MissPublic | None


def label_and_claim(
    *,
    session: Session,
    miss_id: int,
    user: User,
    category: str,
    note: str,
    version: int,
    causes: list[str],
    now: datetime,
    lease: timedelta,
    triage: Triage | None = None,
) -> LabelledAndNext:
    """``label``, then ``claim`` in the miss's triage, in one transaction: a reviewer working
    back to back pays for one request, one BEGIN/COMMIT. A refused label (409, 403) claims
    nothing and answers as ``label`` does. ``triage``: the miss's, when the caller has it."""
    note = checked_note(category, note, [*causes, CANT_TELL])
    following: MissPublic | None = None
    with writing(session):
        miss, refusal = _label_in(session, miss_id, user, category, note, version, now)
        if refusal is None:
            labelled = MissPublic.of(miss)
            if triage is None or triage.id != miss.triage_id:
                triage = session.get(Triage, miss.triage_id)
            assert triage is not None  # the foreign key
            following = _claim_in(session, triage, user, now, lease)
    if refusal is not None:
        raise refusal[1]
    return LabelledAndNext(labelled=labelled, next=following)


def _label_in(
    session: Session,
    miss_id: int,
    user: User,
    category: str,
    note: str,
    version: int,
    now: datetime,
) -> tuple[Miss, tuple[LabelAction, ServiceError] | None]:
    """Inside the caller's writing block: label the miss, or record the refused attempt and
    return why (the caller raises the error once the block has committed the attempt)."""
    miss = locked_miss(session, miss_id)
    overlapped = miss.reviewers > 1
    if category == CANT_TELL and (not overlapped or miss.state != MissState.OPEN.value):
        raise Invalid(
            f"{CANT_TELL!r} is for reviewers of a miss with more than one reviewer",
            code="unknown_category",
        )
    refusal = (
        overlap.refusal(session, miss, user, version, now)
        if overlapped
        else _refusal(miss, user, version)
    )
    if refusal is not None:
        # the refused attempt is kept in the audit log (committed), then answered
        attempt = {
            "state": MissState.LABELLED.value,
            "category": category,
            "note": note,
            "version": version,
        }
        record_event(session, miss, user, refusal[0], now=now, after=attempt)
    elif overlapped:
        overlap.add_label(session, miss, user, category=category, note=note, now=now)
    else:
        relabel = miss.state == MissState.LABELLED
        before = snapshot(miss)
        miss.state = MissState.LABELLED.value
        miss.category = category
        miss.note = note
        miss.version += 1
        miss.labelled_by_id = user.id
        miss.labelled_at = now
        miss.lease_holder_id = None
        miss.lease_expires_at = None
        session.add(miss)
        action = LabelAction.RELABEL if relabel else LabelAction.LABEL
        record_event(session, miss, user, action, now=now, before=before, note=note)
        outbox.after_label(session, miss)
    return miss, refusal


def _refusal(miss: Miss, user: User, version: int) -> tuple[LabelAction, ServiceError] | None:
    """Why ``user`` may not label ``miss`` at ``version`` (the audit action and the error),
    or None when they may."""
    if miss.version != version:
        return LabelAction.CONFLICT, Conflict(
            f"this miss changed since you loaded it (version {version}, now {miss.version})",
            code="stale_version",
            details={"current": snapshot(miss)},
        )
    relabel = miss.state == MissState.LABELLED
    if is_lead(user) or (not relabel and _holds(miss, user)):
        return None
    if relabel:
        return LabelAction.REFUSED, Forbidden(
            "relabelling needs the lead role", code="lead_required"
        )
    return LabelAction.REFUSED, Forbidden("this miss is not leased to you", code="lease_not_held")


def release(*, session: Session, miss_id: int, user: User, now: datetime) -> MissPublic:
    """Give a miss back to the queue (its holder, or a lead)."""
    with writing(session):
        miss = locked_miss(session, miss_id)
        if miss.reviewers > 1 and miss.state == MissState.OPEN.value:
            dropped = overlap.give_up(session, miss, None if is_lead(user) else user)
            if not dropped:
                raise Forbidden("this miss is not leased to you", code="lease_not_held")
            for lease in dropped:
                before = snapshot(miss) | lease
                record_event(session, miss, user, LabelAction.RELEASE, now=now, before=before)
            return MissPublic.of(miss)
        mine = _holds(miss, user) or _adjudicating(miss, user)
        if not (mine or (is_lead(user) and miss.lease_holder_id is not None)):
            raise Forbidden("this miss is not leased to you", code="lease_not_held")
        before = snapshot(miss) | {"lease_holder": miss.lease_holder_id}
        miss.lease_holder_id = None
        miss.lease_expires_at = None
        session.add(miss)
        record_event(session, miss, user, LabelAction.RELEASE, now=now, before=before)
    return MissPublic.of(miss)


def skip(*, session: Session, miss_id: int, user: User, reason: str, now: datetime) -> MissPublic:
    """Pass a miss on to other reviewers, saying why."""
    reason = reason.strip()
    if not reason:
        raise Invalid("say why you skip this miss", code="reason_required")
    with writing(session):
        miss = locked_miss(session, miss_id)
        if miss.reviewers > 1 and miss.state == MissState.OPEN.value:
            if not overlap.give_up(session, miss, user):
                raise Forbidden("this miss is not leased to you", code="lease_not_held")
            record_event(session, miss, user, LabelAction.SKIP, now=now, note=reason)
            record_skip(session, miss, user, reason=reason, now=now)
            return MissPublic.of(miss)
        if not _holds(miss, user):
            raise Forbidden("this miss is not leased to you", code="lease_not_held")
        miss.lease_holder_id = None
        miss.lease_expires_at = None
        session.add(miss)
        record_event(session, miss, user, LabelAction.SKIP, now=now, note=reason)
        record_skip(session, miss, user, reason=reason, now=now)
    return MissPublic.of(miss)


def undo(
    *, session: Session, triage: Triage, user: User, now: datetime, lease: timedelta
) -> MissPublic:
    """Undo the caller's most recent label that is still in force; the miss goes back to
    its previous state and, if that was unlabelled, to the caller's lease. With double review,
    a reviewer's own label on a miss still waiting for another reviewer's is taken back the
    same way (a miss whose labels are all in is decided by them, or by an adjudicator)."""
    with writing(session):
        undone = _undo_latest(session, triage=triage, user=user, now=now, lease=lease)
        if undone is None:
            raise NotFound("you have no label to undo in this triage", code="nothing_to_undo")
    return undone


def _undo_latest(
    session: Session, *, triage: Triage, user: User, now: datetime, lease: timedelta
) -> MissPublic | None:
    """Inside the caller's writing block: undo the latest label still in force."""
    events = session.exec(
        select(LabelEvent)
        .where(
            LabelEvent.triage_id == triage.id,
            LabelEvent.user_id == user.id,
            col(LabelEvent.action).in_([*LABEL_ACTIONS, LabelAction.REVIEW]),
        )
        .order_by(col(LabelEvent.id).desc())
        .limit(UNDO_LOOKBACK)
    ).all()
    for event in events:
        miss = locked_miss(session, event.miss_id)
        if event.action == LabelAction.REVIEW.value:
            taken_back = overlap.take_back(session, miss, user, now=now, lease=lease)
            if taken_back is not None:
                return taken_back
            continue  # all its labels are in (or undone already): not the caller's to undo
        if miss.version != event.after.get("version"):
            continue  # changed since (undone already, or relabelled by a lead)
        before = snapshot(miss)
        previous = event.before
        miss.state = previous["state"]
        miss.category = previous["category"]
        miss.note = previous["note"]
        miss.version += 1
        if miss.state == MissState.OPEN:
            miss.labelled_by_id = None
            miss.labelled_at = None
            miss.lease_holder_id = user.id
            miss.lease_expires_at = now + lease
        session.add(miss)
        record_event(session, miss, user, LabelAction.UNDO, now=now, before=before)
        outbox.after_label(session, miss)
        return MissPublic.of(miss)
    return None


def _trail(session: Session, miss_id: int, viewer: User | None) -> SelectOfScalar[LabelEvent]:
    """A miss's events, oldest first. Blind review: until an overlap miss has its final
    label, a ``viewer`` who is not a lead or an adjudicator sees their own events only."""
    miss = session.get(Miss, miss_id)
    if miss is None:
        raise NotFound(f"no miss {miss_id}", code="miss_not_found")
    query = select(LabelEvent).where(LabelEvent.miss_id == miss_id).order_by(col(LabelEvent.id))
    blind = miss.reviewers > 1 and miss.state != MissState.LABELLED.value
    if viewer is not None and blind and not viewer.adjudicates:
        query = query.where(LabelEvent.user_id == viewer.id)
    return query


def audit_trail(
    *, session: Session, miss_id: int, viewer: User | None = None
) -> list[LabelEventPublic]:
    """Every event of a miss (that ``viewer`` may see), oldest first. 404 ``miss_not_found``."""
    return [LabelEventPublic.of(e) for e in session.exec(_trail(session, miss_id, viewer))]


def audit_page(
    *, session: Session, miss_id: int, page: int, per_page: int, viewer: User | None = None
) -> PageOf[LabelEventPublic]:
    """One page of a miss's audit trail (what ``viewer`` may see), oldest first, in the API's
    list shape."""
    query = _trail(session, miss_id, viewer)
    events, total = page_rows(session=session, query=query, page=page, per_page=per_page)
    return PageOf[LabelEventPublic](items=[LabelEventPublic.of(e) for e in events], total=total)


def who_did(*, session: Session, events: list[LabelEventPublic]) -> dict[int, str]:
    """The email of each user named in ``events`` (deleted users are absent)."""
    ids = sorted({e.user_id for e in events if e.user_id is not None})
    if not ids:
        return {}
    rows = session.exec(select(User.id, User.email).where(col(User.id).in_(ids))).all()
    return {user_id: email for user_id, email in rows if user_id is not None}


@dataclass(frozen=True)
class Progress:
    mine: int
    labelled: int
    remaining: int
    total: int


def progress(*, session: Session, triage: Triage, user: User) -> Progress:
    by_me = case((col(Miss.labelled_by_id) == user.id, 1), else_=0)
    rows = session.exec(
        select(Miss.state, by_me, func.count())
        .where(Miss.triage_id == triage.id)
        .group_by(col(Miss.state), by_me)
    ).all()
    mine = labelled = remaining = covered = 0
    for state, by_me, n in rows:
        if state == MissState.LABELLED.value:
            labelled += n
            mine += n if by_me else 0
        elif state == MissState.COVERED.value:
            covered += n  # off the queue: neither work done nor work left
        else:
            remaining += n
    if triage.reviewers > 1:
        mine += overlap.labels_by(session, triage, user)  # the caller's part in overlap misses
    return Progress(
        mine=mine, labelled=labelled, remaining=remaining, total=triage.misses - covered
    )
