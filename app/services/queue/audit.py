"""What every queue operation shares (labelling, overlap reviews, adjudication): the miss's
label snapshot, the audit event, and the miss locked for the operation."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from sqlmodel import Session, select

from app.eval.errors import shorten
from app.models import CANT_TELL, OTHER, LabelAction, LabelEvent, Miss, MissState, Role, User
from app.services.errors import Conflict, Invalid, NotFound


class Labelled(Protocol):
    """What a label snapshot and the lease checks read: a ``Miss``, or the hot path's row of
    one (``queue_core.MissRow``)."""

    @property
    def id(self) -> int | None: ...
    @property
    def triage_id(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def category(self) -> str | None: ...
    @property
    def note(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def lease_holder_id(self) -> int | None: ...


def snapshot(miss: Labelled) -> dict[str, Any]:
    """A miss's label as the audit trail records it before and after an event."""
    return {
        "state": miss.state,
        "category": miss.category,
        "note": miss.note,
        "version": miss.version,
    }


def attempted(category: str, note: str, version: int) -> dict[str, Any]:
    """The label a refused attempt asked for, as its audit event's ``after``: the attempt is
    kept even though the miss did not change."""
    return {
        "state": MissState.LABELLED.value,
        "category": category,
        "note": note,
        "version": version,
    }


def stale(miss: Labelled, version: int) -> Conflict | None:
    """409 ``stale_version`` (with the miss's current label) when the caller loaded another
    version of the miss than the one it now has."""
    if miss.version == version:
        return None
    return Conflict(
        f"this miss changed since you loaded it (version {version}, now {miss.version})",
        code="stale_version",
        details={"current": snapshot(miss)},
    )


def record_event(
    session: Session,
    miss: Miss,
    user: User,
    action: LabelAction,
    *,
    now: datetime,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    note: str = "",
) -> None:
    """Append one ``LabelEvent`` (in the caller's transaction)."""
    values = event_values(miss, user, action, now=now, before=before, after=after, note=note)
    session.add(LabelEvent(**values))


def event_values(
    miss: Labelled,
    user: User,
    action: LabelAction,
    *,
    now: datetime,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    note: str = "",
) -> dict[str, Any]:
    """The columns of one ``LabelEvent``: ``before`` and ``after`` default to the miss's
    snapshot as it stands (``record_event`` adds the row through the session, the hot path
    inserts it with one statement)."""
    assert miss.id is not None
    return {
        "miss_id": miss.id,
        "triage_id": miss.triage_id,
        "user_id": user.id,
        "at": now,
        "action": LabelAction(action).value,
        "before": before or snapshot(miss),
        "after": after or snapshot(miss),
        "note": note,
    }


def is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def locked_miss(session: Session, miss_id: int) -> Miss:
    """The miss, its row locked for the transaction on PostgreSQL (SQLite's BEGIN IMMEDIATE
    has locked the database already), read afresh. 404 ``miss_not_found``."""
    query = select(Miss).where(Miss.id == miss_id).execution_options(populate_existing=True)
    if is_postgres(session):
        query = query.with_for_update()
    miss = session.exec(query).first()
    if miss is None:
        raise NotFound(f"no miss {miss_id}", code="miss_not_found")
    return miss


def holds(miss: Labelled, user: User) -> bool:
    """The caller's lease. An expired lease still counts while nobody else has claimed the
    miss: the version check keeps that safe, and a slow reviewer's label is not lost."""
    return miss.state == MissState.OPEN.value and miss.lease_holder_id == user.id


def adjudicating(miss: Labelled, user: User) -> bool:
    """The caller's adjudication lease on a disputed miss."""
    return miss.state == MissState.DISPUTED.value and miss.lease_holder_id == user.id


def is_lead(user: User) -> bool:
    return Role(user.role).allows(Role.LEAD)


def checked_note(category: str, note: str, causes: list[str]) -> str:
    """The note, stripped; 422 ``unknown_category`` for a category outside ``causes`` and
    other, 422 ``note_required`` for other without a note."""
    note = note.strip()
    if category != OTHER and category not in causes:
        shown = [c for c in causes if c != CANT_TELL]
        raise Invalid(
            f"unknown cause {shorten(category, 100)}: one of {', '.join([*shown, OTHER])}",
            code="unknown_category",
        )
    if category == OTHER and not note:
        raise Invalid("'other' needs a note saying what the cause is", code="note_required")
    return note
