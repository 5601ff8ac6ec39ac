"""The review queue's reads: a miss's audit trail (blind while its double review runs), who
did what, and a reviewer's progress in a triage. ``app.services.queue`` answers them too."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import case, func
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from app.models import LabelEvent, Miss, MissState, Triage, User
from app.models.triage_public import LabelEventPublic
from app.readmodel import PageOf
from app.services.errors import NotFound
from app.services.paging import page_rows
from app.services.queue import overlap


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
    """A reviewer's part of a triage: their labels, everyone's, what is left, the total."""

    mine: int
    labelled: int
    remaining: int
    total: int


def progress(*, session: Session, triage: Triage, user: User) -> Progress:
    """``Progress`` of ``user`` in ``triage`` (one grouped count)."""
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
