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
from typing import Any

from sqlalchemy import case, func, or_
from sqlmodel import Session, col, select

from app.db import write_transaction
from app.eval.errors import shorten
from app.models import OTHER, LabelEvent, Miss, MissState, Role, Triage, User
from app.models.triage import LabelEventPage, LabelEventPublic, MissPublic
from app.services import events as outbox
from app.services.errors import Conflict, Forbidden, Invalid, NotFound
from app.services.skips import SKIP, skipped_ids
from app.services.triages import page_rows

LABEL_ACTIONS = ("label", "relabel")


def snapshot(miss: Miss) -> dict[str, Any]:
    return {
        "state": miss.state,
        "category": miss.category,
        "note": miss.note,
        "version": miss.version,
    }


def _event(
    session: Session,
    miss: Miss,
    user: User,
    action: str,
    *,
    now: datetime,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    note: str = "",
) -> None:
    assert miss.id is not None
    session.add(
        LabelEvent(
            miss_id=miss.id,
            triage_id=miss.triage_id,
            user_id=user.id,
            at=now,
            action=action,
            before=before or snapshot(miss),
            after=after or snapshot(miss),
            note=note,
        )
    )


def _is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def _locked(session: Session, miss_id: int) -> Miss:
    query = select(Miss).where(Miss.id == miss_id)
    if _is_postgres(session):
        query = query.with_for_update()
    miss = session.exec(query).first()
    if miss is None:
        session.rollback()
        raise NotFound(f"no miss {miss_id}", code="miss_not_found")
    return miss


def _holds(miss: Miss, user: User) -> bool:
    """The caller's lease. An expired lease still counts while nobody else has claimed the
    miss: the version check keeps that safe, and a slow reviewer's label is not lost."""
    return miss.state == MissState.OPEN.value and miss.lease_holder_id == user.id


def _is_lead(user: User) -> bool:
    return Role(user.role).allows(Role.LEAD)


def current(*, session: Session, triage: Triage, user: User, now: datetime) -> MissPublic | None:
    """The miss the caller holds a live lease on, if any: read only (showing the review page
    claims nothing; ``claim`` does, on a POST)."""
    held = _current(session, triage, user, now)
    return None if held is None else MissPublic.of(held)


def _current(session: Session, triage: Triage, user: User, now: datetime) -> Miss | None:
    return session.exec(
        select(Miss)
        .where(
            Miss.triage_id == triage.id,
            Miss.state == MissState.OPEN.value,
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
    Misses the caller skipped go to other reviewers. None when nothing is left."""
    write_transaction(session)
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
        if _is_postgres(session):
            query = query.with_for_update(skip_locked=True)
        mine = session.exec(query).first()
    if mine is None:
        session.commit()
        return None
    mine.lease_holder_id = user.id
    mine.lease_expires_at = now + lease
    session.add(mine)
    session.commit()
    return MissPublic.of(mine)


def renew(
    *, session: Session, miss_id: int, user: User, now: datetime, lease: timedelta
) -> MissPublic:
    write_transaction(session)
    miss = _locked(session, miss_id)
    if not _holds(miss, user):
        session.rollback()
        raise Forbidden("this miss is no longer leased to you", code="lease_not_held")
    miss.lease_expires_at = now + lease
    session.add(miss)
    session.commit()
    return MissPublic.of(miss)


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
    note = note.strip()
    if category != OTHER and category not in causes:
        raise Invalid(
            f"unknown cause {shorten(category, 100)}: one of {', '.join([*causes, OTHER])}",
            code="unknown_category",
        )
    if category == OTHER and not note:
        raise Invalid("'other' needs a note saying what the cause is", code="note_required")
    write_transaction(session)
    miss = _locked(session, miss_id)
    attempt = {
        "state": MissState.LABELLED.value,
        "category": category,
        "note": note,
        "version": version,
    }
    if miss.version != version:
        _event(session, miss, user, "conflict", now=now, after=attempt)
        session.commit()
        raise Conflict(
            f"this miss changed since you loaded it (version {version}, now {miss.version})",
            code="stale_version",
            details={"current": snapshot(miss)},
        )
    relabel = miss.state == MissState.LABELLED.value
    if not _is_lead(user) and (relabel or not _holds(miss, user)):
        _event(session, miss, user, "refused", now=now, after=attempt)
        session.commit()
        if relabel:
            raise Forbidden("relabelling needs the lead role", code="lead_required")
        raise Forbidden("this miss is not leased to you", code="lease_not_held")
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
    _event(
        session, miss, user, "relabel" if relabel else "label", now=now, before=before, note=note
    )
    outbox.after_label(session, miss)
    session.commit()
    return MissPublic.of(miss)


def release(*, session: Session, miss_id: int, user: User, now: datetime) -> MissPublic:
    """Give a miss back to the queue (its holder, or a lead)."""
    write_transaction(session)
    miss = _locked(session, miss_id)
    if not (_holds(miss, user) or (_is_lead(user) and miss.lease_holder_id is not None)):
        session.rollback()
        raise Forbidden("this miss is not leased to you", code="lease_not_held")
    before = snapshot(miss) | {"lease_holder": miss.lease_holder_id}
    miss.lease_holder_id = None
    miss.lease_expires_at = None
    session.add(miss)
    _event(session, miss, user, "release", now=now, before=before)
    session.commit()
    return MissPublic.of(miss)


def skip(*, session: Session, miss_id: int, user: User, reason: str, now: datetime) -> MissPublic:
    """Pass a miss on to other reviewers, saying why."""
    reason = reason.strip()
    if not reason:
        raise Invalid("say why you skip this miss", code="reason_required")
    write_transaction(session)
    miss = _locked(session, miss_id)
    if not _holds(miss, user):
        session.rollback()
        raise Forbidden("this miss is not leased to you", code="lease_not_held")
    miss.lease_holder_id = None
    miss.lease_expires_at = None
    session.add(miss)
    _event(session, miss, user, SKIP, now=now, note=reason)
    session.commit()
    return MissPublic.of(miss)


def undo(
    *, session: Session, triage: Triage, user: User, now: datetime, lease: timedelta
) -> MissPublic:
    """Undo the caller's most recent label that is still in force; the miss goes back to
    its previous state and, if that was unlabelled, to the caller's lease."""
    write_transaction(session)
    events = session.exec(
        select(LabelEvent)
        .where(
            LabelEvent.triage_id == triage.id,
            LabelEvent.user_id == user.id,
            col(LabelEvent.action).in_(LABEL_ACTIONS),
        )
        .order_by(col(LabelEvent.id).desc())
        .limit(50)
    ).all()
    for event in events:
        miss = _locked(session, event.miss_id)
        if miss.version != event.after.get("version"):
            continue  # changed since (undone already, or relabelled by a lead)
        before = snapshot(miss)
        previous = event.before
        miss.state = previous["state"]
        miss.category = previous["category"]
        miss.note = previous["note"]
        miss.version += 1
        if miss.state == MissState.OPEN.value:
            miss.labelled_by_id = None
            miss.labelled_at = None
            miss.lease_holder_id = user.id
            miss.lease_expires_at = now + lease
        session.add(miss)
        _event(session, miss, user, "undo", now=now, before=before)
        outbox.after_label(session, miss)
        session.commit()
        return MissPublic.of(miss)
    session.rollback()
    raise NotFound("you have no label to undo in this triage", code="nothing_to_undo")


def audit_trail(*, session: Session, miss_id: int) -> list[LabelEventPublic]:
    """Every event of a miss, oldest first. 404 ``miss_not_found``."""
    if session.get(Miss, miss_id) is None:
        raise NotFound(f"no miss {miss_id}", code="miss_not_found")
    return [
        LabelEventPublic.of(e)
        for e in session.exec(
            select(LabelEvent).where(LabelEvent.miss_id == miss_id).order_by(col(LabelEvent.id))
        )
    ]


def audit_page(*, session: Session, miss_id: int, page: int, per_page: int) -> LabelEventPage:
    """One page of a miss's audit trail, oldest first, in the API's list shape."""
    miss = session.get(Miss, miss_id)
    if miss is None:
        raise NotFound(f"no miss {miss_id}", code="miss_not_found")
    query = select(LabelEvent).where(LabelEvent.miss_id == miss_id).order_by(col(LabelEvent.id))
    events, total = page_rows(session=session, query=query, page=page, per_page=per_page)
    return LabelEventPage(items=[LabelEventPublic.of(e) for e in events], total=total)


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
    return Progress(
        mine=mine, labelled=labelled, remaining=remaining, total=triage.misses - covered
    )
