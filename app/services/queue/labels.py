"""Labels: a reviewer's label (single review: final; double review: blind, final when the
last one agrees, else disputed), an adjudicator's decision, a lead's relabel, and undo.

Every label is checked against the miss's own triage and golden set (read with the miss, in
the label's transaction; a page's triage must be the miss's), at the miss's current version
(409 ``stale_version`` otherwise, repeats included, the attempt kept in the audit trail), and
under the person's lock on the triage (``store``). The first label of a golden set freezes
its causes. Every final label is written by ``store.write_label``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, select
from sqlmodel import Session

from app.eval.errors import shorten
from app.models import CANT_TELL, OTHER, LabelAction, Resolution, User
from app.models.triage_public import MissPublic
from app.services.errors import Conflict, Forbidden, Invalid, NotFound, ServiceError
from app.services.queue import rows, store
from app.services.queue.claims import give_back_others, lease_next
from app.services.queue.lifecycle import (
    LABELLED,
    NOT_HELD,
    REVIEW_QUEUE,
    Stage,
    check_adjudicator,
    is_lead,
    stage_of,
)
from app.services.queue.rows import Target
from app.services.queue.store import LabelState

#: Reviewers' notes joined into an agreed label's note.
NOTE_JOIN = " | "
#: Undo looks this far back in the caller's labels for one still in force.
UNDO_LOOKBACK = 50
_EVENT = rows.EVENT


@dataclass(frozen=True)
class Refusal:
    """Why a label was refused: the audit event's action (``conflict`` or ``refused``) and
    the error answered once the attempt is stored."""

    action: LabelAction
    error: ServiceError


@dataclass(frozen=True)
class LabelledAndNext:
    """A label and the caller's next miss (None: nothing is left for the caller)."""

    labelled: MissPublic
    next: MissPublic | None


def label(
    *,
    session: Session,
    miss_id: int,
    user: User,
    category: str,
    note: str,
    version: int,
    now: datetime,
    triage_id: int | None = None,
) -> MissPublic:
    """Label (a lead: also relabel, or decide a double-reviewed miss) the miss at its current
    version. ``triage_id``: the triage the caller is working in (a page's), which must be the
    miss's (404 otherwise)."""
    return _labelled(session, miss_id, user, category, note, version, now, triage_id)


def label_and_claim(
    *,
    session: Session,
    miss_id: int,
    user: User,
    category: str,
    note: str,
    version: int,
    now: datetime,
    lease: timedelta,
    triage_id: int | None = None,
) -> LabelledAndNext:
    """``label``, then ``claim`` in the miss's triage, in one transaction. A refused label
    (409, 403) claims nothing and answers as ``label`` does."""
    assert user.id is not None
    with rows.transaction(session) as conn:
        done = _label_in(conn, miss_id, user, category, note, version, now, triage_id)
        following = None
        if not isinstance(done, Refusal):
            following = lease_next(
                conn,
                triage_id=done.miss.triage_id,
                reviewers=done.triage_reviewers,
                user_id=user.id,
                now=now,
                lease=lease,
            )
    if isinstance(done, Refusal):
        raise done.error
    store.settle_closure(session, done, now)
    return LabelledAndNext(labelled=done.miss.public(), next=following)


def adjudicate(
    *,
    session: Session,
    miss_id: int,
    user: User,
    category: str,
    note: str,
    version: int,
    now: datetime,
    triage_id: int | None = None,
) -> MissPublic:
    """The final label of a disputed miss at its current version: needs the caller's
    adjudication lease (a lead's needs none). 409 ``stale_version`` or ``not_disputed``,
    403 ``lease_not_held`` or ``adjudicator_required``."""
    check_adjudicator(user)
    return _labelled(
        session, miss_id, user, category, note, version, now, triage_id, adjudicating=True
    )


def _labelled(
    session: Session,
    miss_id: int,
    user: User,
    category: str,
    note: str,
    version: int,
    now: datetime,
    triage_id: int | None,
    *,
    adjudicating: bool = False,
) -> MissPublic:
    """``label`` and ``adjudicate``: one transaction, the refusal raised once its attempt is
    stored, the closure settled after the commit."""
    with rows.transaction(session) as conn:
        done = _label_in(
            conn, miss_id, user, category, note, version, now, triage_id, adjudicating=adjudicating
        )
    if isinstance(done, Refusal):
        raise done.error
    store.settle_closure(session, done, now)
    return done.miss.public()


def _label_in(
    conn: Connection,
    miss_id: int,
    user: User,
    category: str,
    note: str,
    version: int,
    now: datetime,
    triage_id: int | None,
    *,
    adjudicating: bool = False,
) -> Target | Refusal:
    """Inside the caller's transaction: the label written (the miss brought up to date in
    the answer), or the refused attempt recorded and why."""
    assert user.id is not None
    target = rows.locked(conn, miss_id=miss_id, user_id=user.id, triage_id=triage_id)
    miss = target.miss
    double = miss.reviewers > 1
    blind = double and miss.stage in REVIEW_QUEUE and not adjudicating
    extra = [CANT_TELL] if blind else []
    note = checked_note(category, note, [*target.causes, *extra])
    refusal = _refusal(conn, target, user, version, now, adjudicating=adjudicating)
    if refusal is not None:
        attempt = {"state": "labelled", "category": category, "note": note, "version": version}
        store.append_event(conn, miss, user.id, refusal.action, now=now, after=attempt)
        return refusal
    # the golden set's causes as they stand once frozen (a change in flight has landed)
    checked_note(category, note, [*store.freeze_causes(conn, target), *extra])
    final = LabelState(Stage.OTHER if category == OTHER else Stage.FINAL, category, note)
    if blind:
        _review(conn, target, user.id, category, note, now)
    elif double:
        decided = LabelState(final.stage, category, note, Resolution.ADJUDICATED.value)
        store.write_label(
            conn,
            target,
            step=LabelAction.ADJUDICATE,
            to=decided,
            user_id=user.id,
            now=now,
            event_note=note,
        )
    else:
        step = LabelAction.RELABEL if miss.stage in LABELLED else LabelAction.LABEL
        store.write_label(
            conn, target, step=step, to=final, user_id=user.id, now=now, event_note=note
        )
    return target


def _refusal(
    conn: Connection,
    target: Target,
    user: User,
    version: int,
    now: datetime,
    *,
    adjudicating: bool,
) -> Refusal | None:
    """Why ``user`` may not label the miss at ``version``, or None when they may."""
    miss = target.miss
    assert user.id is not None
    if miss.version != version:
        return Refusal(LabelAction.CONFLICT, stale(miss.version, version, rows.snapshot(miss)))
    stage = miss.stage
    if stage is Stage.COVERED:
        return Refusal(
            LabelAction.REFUSED,
            Conflict(
                "this miss is covered by a duplicate and off the queue: a lead puts the "
                "covered misses on the queue first",
                code="not_on_queue",
            ),
        )
    if stage is Stage.CARRIED:
        return Refusal(
            LabelAction.REFUSED,
            Conflict(
                f"this miss carries the label of triage {miss.carried_from} and is off the "
                "queue: a lead sends it back to the queue first",
                code="carried",
            ),
        )
    holds = miss.lease_holder_id == user.id
    if adjudicating:
        if stage is not Stage.DISPUTED:
            return Refusal(
                LabelAction.REFUSED,
                Conflict("this miss is not waiting for adjudication", code="not_disputed"),
            )
        return None if holds or is_lead(user) else _not_held()
    if miss.reviewers > 1 and stage in REVIEW_QUEUE:
        reviews = rows.reviews_of(conn, miss.id)
        mine = rows.mine(reviews, user.id)
        if mine is not None and mine.labelled:
            # a repeat: the caller's label is in already, at this version
            current = rows.snapshot(miss) | {"category": mine.category, "note": mine.note}
            return Refusal(
                LabelAction.CONFLICT,
                stale(miss.version, version, current, said="you labelled this miss already"),
            )
        if not rows.room_for(reviews, miss, user.id, now):
            return _not_held()
        return None if mine is not None or is_lead(user) else _not_held()
    if stage in LABELLED or stage is Stage.DISPUTED:
        if is_lead(user):
            return None
        said = (
            "this miss has all its reviewers' labels: an adjudicator decides it"
            if miss.reviewers > 1
            else "relabelling needs the lead role"
        )
        return Refusal(LabelAction.REFUSED, Forbidden(said, code="lead_required"))
    return None if holds or is_lead(user) else _not_held()


def _not_held() -> Refusal:
    return Refusal(LabelAction.REFUSED, Forbidden(NOT_HELD, code="lease_not_held"))


def stale(
    now_version: int, asked: int, current: dict[str, Any], *, said: str | None = None
) -> Conflict:
    """409 ``stale_version`` with the label as it now stands (``details.current``)."""
    why = said or f"this miss changed since you loaded it (version {asked}, now {now_version})"
    return Conflict(why, code="stale_version", details={"current": current})


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


def _review(
    conn: Connection, target: Target, user_id: int, category: str, note: str, now: datetime
) -> None:
    """A blind label; the last one asked for resolves the miss: the common cause when every
    label names it, else the adjudication queue."""
    store.put_review(
        conn, target, user_id=user_id, category=category, note=note, now=now, event_note=note
    )
    miss = target.miss
    if miss.reviewed < miss.reviewers:
        return
    labels = [r for r in rows.reviews_of(conn, miss.id) if r.labelled]
    store.drop_review_leases(conn, miss.id, None)  # places never used: off the review queue
    causes = {r.category for r in labels}
    if len(causes) == 1 and CANT_TELL not in causes:
        agreed = labels[0].category
        assert agreed is not None
        joined = NOTE_JOIN.join(dict.fromkeys(r.note for r in labels if r.note))
        stage = Stage.OTHER if agreed == OTHER else Stage.FINAL
        to = LabelState(stage, agreed, joined, Resolution.AGREED.value)
        store.write_label(conn, target, step=LabelAction.AGREE, to=to, user_id=user_id, now=now)
    else:
        to = LabelState(Stage.DISPUTED, None, miss.note)
        store.write_label(conn, target, step=LabelAction.DISPUTE, to=to, user_id=user_id, now=now)


def undo(
    *, session: Session, triage_id: int, user: User, now: datetime, lease: timedelta
) -> MissPublic:
    """Undo the caller's most recent label still in force: the miss goes back to where it
    was and, if that was unlabelled, to the caller's lease (their other lease goes back to
    the queue). A reviewer's own blind label on a miss still collecting labels is taken back
    the same way. 404 ``nothing_to_undo``."""
    assert user.id is not None
    with rows.transaction(session) as conn:
        if rows.lock_person(conn, triage_id=triage_id, user_id=user.id) is None:
            raise NotFound(f"no triage {triage_id}", code="triage_not_found")
        undone = _undo_latest(conn, triage_id, user.id, now, now + lease)
        if undone is None:
            raise NotFound("you have no label to undo in this triage", code="nothing_to_undo")
    answer, target = undone
    store.settle_closure(session, target, now)
    return answer


_MINE = (LabelAction.LABEL, LabelAction.RELABEL, LabelAction.REVIEW)


def _undo_latest(
    conn: Connection, triage_id: int, user_id: int, now: datetime, until: datetime
) -> tuple[MissPublic, Target] | None:
    events = conn.execute(
        select(_EVENT.c.miss_id, _EVENT.c.action, _EVENT.c.before, _EVENT.c.after)
        .where(
            _EVENT.c.triage_id == triage_id,
            _EVENT.c.user_id == user_id,
            _EVENT.c.action.in_([a.value for a in _MINE]),
        )
        .order_by(_EVENT.c.id.desc())
        .limit(UNDO_LOOKBACK)
    ).all()
    for miss_id, action, before, after in events:
        target = rows.load(conn, miss_id)
        if target is None:
            continue
        if action == LabelAction.REVIEW.value:
            if store.take_back_review(conn, target, user_id=user_id, now=now, until=until):
                give_back_others(conn, target.miss, user_id, now)
                return rows.with_lease(target.miss, user_id, until).public(), target
            continue  # all its labels are in (or taken back already): not the caller's
        if target.miss.version != (after or {}).get("version"):
            continue  # changed since (undone already, or relabelled by a lead)
        stage = stage_of(before["state"], before["category"], 0)
        to = LabelState(stage, before["category"], before["note"], target.miss.resolution)
        reopened = stage not in LABELLED
        store.write_label(
            conn,
            target,
            step=LabelAction.UNDO,
            to=to if not reopened else LabelState(stage, None, before["note"]),
            user_id=user_id,
            now=now,
            lease_until=until if reopened else None,
        )
        if reopened:
            give_back_others(conn, target.miss, user_id, now)
        return target.miss.public(), target
    return None
