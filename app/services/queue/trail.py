"""A miss's audit trail as people may read it, and who did what.

Blind review: while a double-reviewed miss is still collecting its reviewers' labels, its
trail shows each person their own events only, whatever their role: nobody reads another's
blind label (its cause, its note, a skip's reason) of a miss they review or may review yet.
Once every label is in (agreed, disputed, adjudicated), the whole trail is open.
"""

from __future__ import annotations

from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from app.models import LabelEvent, Miss, User
from app.models.triage_public import LabelEventPublic
from app.readmodel import PageOf
from app.services.errors import NotFound
from app.services.paging import page_rows
from app.services.queue.lifecycle import REVIEW_QUEUE, stage_of


def is_blind(miss: Miss) -> bool:
    """The miss's reviewers' labels are hidden from each other (and everyone) still."""
    return miss.reviewers > 1 and stage_of(miss.state, miss.category, miss.reviewed) in REVIEW_QUEUE


def _trail(session: Session, miss_id: int, viewer: User | None) -> SelectOfScalar[LabelEvent]:
    """A miss's events, oldest first, as ``viewer`` may read them (None: every event, for
    the service's own use)."""
    miss = session.get(Miss, miss_id)
    if miss is None:
        raise NotFound(f"no miss {miss_id}", code="miss_not_found")
    query = select(LabelEvent).where(LabelEvent.miss_id == miss_id).order_by(col(LabelEvent.id))
    if viewer is not None and is_blind(miss):
        query = query.where(LabelEvent.user_id == viewer.id)
    return query


def audit_trail(
    *, session: Session, miss_id: int, viewer: User | None = None
) -> list[LabelEventPublic]:
    """Every event of a miss that ``viewer`` may read, oldest first. 404 ``miss_not_found``."""
    return [LabelEventPublic.of(e) for e in session.exec(_trail(session, miss_id, viewer))]


def audit_page(
    *, session: Session, miss_id: int, page: int, per_page: int, viewer: User | None = None
) -> PageOf[LabelEventPublic]:
    """One page of ``audit_trail``, in the API's list shape."""
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
