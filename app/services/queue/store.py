"""The queue's writes: every change to a miss's label, its blind reviews, its lease on the
miss row, its skips and its audit trail is one of the statements here, in the caller's
transaction (``rows.transaction``), after the locks ``rows`` takes.

``write_label`` is the one writer of a miss's label: a single review's label, an agreement,
a dispute, an adjudication, a lead's relabel and an undo all go through it, with their audit
event, the triage's closure (``closed_at`` from the caller's clock) and the webhook outbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    Connection,
    bindparam,
    delete,
    exists,
    func,
    insert,
    select,
    update,
)
from sqlmodel import Session

from app.models import (
    LabelAction,
    WebhookEvent,
)
from app.services.queue.lifecycle import (
    LABELLED,
    Stage,
    check,
    keeps_open,
    stored_state,
)
from app.services.queue.rows import (
    COLUMNS,
    DELIVERY,
    EVENT,
    GOLDEN,
    MISS,
    P_EXPIRES,
    P_MISS,
    P_TRIAGE,
    P_USER,
    REVIEW,
    RUN,
    SKIP,
    TRIAGE,
    Closing,
    MissRow,
    Target,
    mine,
    reviews_of,
    row_of,
    snapshot,
    transaction,
)

_FREEZE = (
    update(GOLDEN)
    .where(GOLDEN.c.id == bindparam("p_golden"))
    .values(causes_frozen=True)
    .returning(GOLDEN.c.causes)
)


def freeze_causes(conn: Connection, target: Target) -> list[str]:
    """Freeze the golden set's causes before its first label is written, and answer them as
    they now stand: the update waits for a change of causes in flight (which holds the
    row), so the label is checked against the causes it is stored under."""
    if target.causes_frozen:
        return target.causes
    golden = {"p_golden": target.closing.golden_id}
    causes = list(conn.execute(_FREEZE, golden).scalar_one() or [])
    target.causes, target.causes_frozen = causes, True
    return causes


_SET_LEASE = (
    update(MISS)
    .where(MISS.c.id == P_MISS)
    .values(lease_holder_id=P_USER, lease_expires_at=P_EXPIRES)
    .returning(*COLUMNS)
)


def set_lease(
    conn: Connection, miss_id: int, *, user_id: int | None, until: datetime | None
) -> MissRow:
    """Write the lease of a (locked) miss: to ``user_id`` until ``until``, or none."""
    found = conn.execute(
        _SET_LEASE, {"p_miss": miss_id, "p_user": user_id, "p_expires": until}
    ).one()
    return row_of(found)


def drop_review_leases(conn: Connection, miss_id: int, user_id: int | None) -> list[int | None]:
    """Drop the unlabelled review rows (leases) of ``user_id`` on a miss, or everyone's with
    None; answers whose were dropped."""
    statement = delete(REVIEW).where(REVIEW.c.miss_id == miss_id, REVIEW.c.category.is_(None))
    if user_id is not None:
        statement = statement.where(REVIEW.c.reviewer_id == user_id)
    return [r for r in conn.execute(statement.returning(REVIEW.c.reviewer_id)).scalars()]


_COUNT_REVIEWED = (
    update(MISS)
    .where(MISS.c.id == P_MISS)
    .values(reviewed=MISS.c.reviewed + bindparam("p_delta"))
    .returning(MISS.c.reviewed)
)


def put_review(
    conn: Connection,
    target: Target,
    *,
    user_id: int,
    category: str,
    note: str,
    now: datetime,
    event_note: str,
) -> None:
    """A reviewer's blind label on a double-reviewed miss: their row labelled (made if a lead
    labels without a lease), one more label in on the miss, the ``review`` event. The miss
    itself (its label, its version) does not change: another reviewer reading it learns
    nothing from it."""
    miss = target.miss
    check(LabelAction.REVIEW, miss.stage, Stage.REVIEWING)
    before = snapshot(miss)
    found = mine(reviews_of(conn, miss.id), user_id)
    values = {"category": category, "note": note, "labelled_at": now, "lease_expires_at": None}
    if found is None:
        conn.execute(
            insert(REVIEW).values(
                miss_id=miss.id,
                triage_id=miss.triage_id,
                reviewer_id=user_id,
                created_at=now,
                **values,
            )
        )
    else:
        conn.execute(update(REVIEW).where(REVIEW.c.id == found.id).values(**values))
    miss.reviewed = int(
        conn.execute(_COUNT_REVIEWED, {"p_miss": miss.id, "p_delta": 1}).scalar_one()
    )
    after = before | {"category": category, "note": note}
    append_event(
        conn,
        miss,
        user_id,
        LabelAction.REVIEW,
        now=now,
        before=before,
        after=after,
        note=event_note,
    )


def take_back_review(
    conn: Connection, target: Target, *, user_id: int, now: datetime, until: datetime
) -> bool:
    """The reviewer's own blind label on a miss still collecting labels goes, and the miss is
    leased to them again (their row becomes a lease); the ``undo`` event. False: they have no
    label on it to take back."""
    miss = target.miss
    found = mine(reviews_of(conn, miss.id), user_id)
    if miss.stage is not Stage.REVIEWING or found is None or not found.labelled:
        return False
    before = snapshot(miss) | {"category": found.category, "note": found.note}
    conn.execute(
        update(REVIEW)
        .where(REVIEW.c.id == found.id)
        .values(category=None, note="", labelled_at=None, lease_expires_at=until)
    )
    miss.reviewed = int(
        conn.execute(_COUNT_REVIEWED, {"p_miss": miss.id, "p_delta": -1}).scalar_one()
    )
    check(LabelAction.UNDO, Stage.REVIEWING, miss.stage)
    append_event(conn, miss, user_id, LabelAction.UNDO, now=now, before=before)
    return True


# --- the one writer of a miss's label -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabelState:
    """Where a write puts a miss: its stage, final label (None: none), note and what the
    final label rests on."""

    stage: Stage
    category: str | None
    note: str
    resolution: str | None = None


class Closure(StrEnum):
    """What a write did to its triage's closure."""

    UNCHANGED = "unchanged"
    CLOSED = "closed"
    REOPENED = "reopened"


#: Other misses keeping the triage open, counted up to this many: below it, writes in
#: flight elsewhere (at most a few per app process: the queue's lane) may be the last ones,
#: so the closure is asked again after the commit.
NEAR_CLOSURE = 64
_OTHER_MISS = MISS.alias("other_miss")
#: After the write: does the written miss keep the triage open (by its new values), and how
#: many others do (as the statement found them, up to ``NEAR_CLOSURE``)? The closure check
#: rides on the write's own UPDATE.
_OTHERS_OPEN = (
    select(func.count())
    .select_from(
        # parameters, not correlation: SQLite writes RETURNING's columns unqualified
        select(_OTHER_MISS.c.id)
        .where(
            _OTHER_MISS.c.triage_id == P_TRIAGE,
            _OTHER_MISS.c.id != P_MISS,
            keeps_open(_OTHER_MISS),
        )
        .limit(NEAR_CLOSURE)
        .subquery()
    )
    .scalar_subquery()
)
_WRITE_LABEL = (
    update(MISS)
    .where(MISS.c.id == P_MISS)
    .values(
        state=bindparam("p_state", type_=MISS.c.state.type),
        category=bindparam("p_category", type_=MISS.c.category.type),
        note=bindparam("p_note", type_=MISS.c.note.type),
        resolution=bindparam("p_resolution", type_=MISS.c.resolution.type),
        version=MISS.c.version + 1,
        labelled_by_id=bindparam("p_labelled_by", type_=MISS.c.labelled_by_id.type),
        labelled_at=bindparam("p_labelled_at", type_=MISS.c.labelled_at.type),
        lease_holder_id=P_USER,
        lease_expires_at=P_EXPIRES,
    )
    .returning(keeps_open(MISS), _OTHERS_OPEN)
)


def write_label(
    conn: Connection,
    target: Target,
    *,
    step: LabelAction,
    to: LabelState,
    user_id: int | None,
    now: datetime,
    event_note: str = "",
    lease_until: datetime | None = None,
) -> Closure:
    """Move the (locked) miss to ``to`` by ``step``: its label, version + 1, who and when (a
    final label's author; none while not final), its lease (to ``user_id`` until
    ``lease_until`` when given, else none); the audit event; the triage's closure and the
    webhook outbox. ``target.miss`` is brought up to date."""
    miss = target.miss
    check(step, miss.stage, to.stage)
    before = snapshot(miss)
    final = to.stage in LABELLED
    itself, others = conn.execute(
        _WRITE_LABEL,
        {
            "p_miss": miss.id,
            "p_triage": miss.triage_id,
            "p_state": stored_state(to.stage).value,
            "p_category": to.category,
            "p_note": to.note,
            "p_resolution": to.resolution,
            "p_labelled_by": user_id if final else None,
            "p_labelled_at": now if final else None,
            "p_user": user_id if lease_until is not None else None,
            "p_expires": lease_until,
        },
    ).one()
    miss.state = stored_state(to.stage).value
    miss.category, miss.note, miss.resolution = to.category, to.note, to.resolution
    miss.version += 1
    miss.lease_holder_id = user_id if lease_until is not None else None
    miss.lease_expires_at = lease_until
    append_event(conn, miss, user_id, step, now=now, before=before, note=event_note)
    if step is not LabelAction.DISPUTE:
        _outbox(conn, target.closing, WebhookEvent.MISS_LABELLED, now, _labelled_payload(miss))
    closure = _close(conn, target.closing, still_open=bool(itself) or others > 0, now=now)
    target.closing.recheck = closure is Closure.UNCHANGED and others < NEAR_CLOSURE
    return closure


def _labelled_payload(miss: MissRow) -> dict[str, Any]:
    return {
        "triage_id": miss.triage_id,
        "miss_id": miss.id,
        "qid": miss.qid,
        "doc_id": miss.doc_id,
        "stage": miss.stage.value,
        "category": miss.category,
        "note": miss.note,
        "version": miss.version,
    }


_CLOSE = (
    update(TRIAGE)
    .where(TRIAGE.c.id == P_TRIAGE, TRIAGE.c.closed_at.is_(None))
    .values(closed_at=bindparam("p_closed", type_=TRIAGE.c.closed_at.type))
    .returning(TRIAGE.c.id)
)
_REOPEN = (
    update(TRIAGE)
    .where(TRIAGE.c.id == P_TRIAGE, TRIAGE.c.closed_at.is_not(None))
    .values(closed_at=None)
    .returning(TRIAGE.c.id)
)


def _close(conn: Connection, closing: Closing, *, still_open: bool, now: datetime) -> Closure:
    """Mark the triage closed (at ``now``) or open again, as the write left it. Each mark
    is written only where it is not yet (so two writers that both find the triage closed
    queue one ``triage.closed`` event); asked only when ``closing.closed_at`` says it
    changes."""
    params = {"p_triage": closing.triage_id}
    if not still_open and closing.closed_at is None:
        closing.closed_at = now
        if conn.execute(_CLOSE, params | {"p_closed": now}).first() is None:
            return Closure.UNCHANGED  # another writer marked it
        payload = {"triage_id": closing.triage_id, "misses": closing.misses}
        _outbox(conn, closing, WebhookEvent.TRIAGE_CLOSED, now, payload)
        return Closure.CLOSED
    if still_open and closing.closed_at is not None:
        closing.closed_at = None
        if conn.execute(_REOPEN, params).first() is None:
            return Closure.UNCHANGED
        return Closure.REOPENED
    return Closure.UNCHANGED


_INSERT_DELIVERY = insert(DELIVERY)


def _outbox(
    conn: Connection, closing: Closing, event: WebhookEvent, now: datetime, payload: dict[str, Any]
) -> None:
    """Queue a webhook event in the write's own transaction, if the golden set asks for it
    (delivered afterwards: app/services/delivery/events.py)."""
    if not closing.webhook_url or event.value not in closing.webhook_events:
        return
    conn.execute(
        _INSERT_DELIVERY,
        {
            "golden_set_id": closing.golden_id,
            "event": event.value,
            "payload": payload,
            "created_at": now,
            "attempts": 0,
            "last_error": "",
        },
    )


# --- the audit trail and skips -------------------------------------------------------------

_INSERT_EVENT = insert(EVENT)


def append_event(
    conn: Connection,
    miss: MissRow,
    user_id: int | None,
    action: str,
    *,
    now: datetime,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    note: str = "",
) -> None:
    """Append one ``LabelEvent`` (``before`` and ``after`` default to the miss as it stands)."""
    conn.execute(
        _INSERT_EVENT,
        {
            "miss_id": miss.id,
            "triage_id": miss.triage_id,
            "user_id": user_id,
            "at": now,
            "action": str(action),
            "before": before or snapshot(miss),
            "after": after or snapshot(miss),
            "note": note,
        },
    )


def record_skip(
    conn: Connection, miss: MissRow, *, user_id: int, reason: str, now: datetime
) -> None:
    """Keep the person's skip of ``miss`` in force (a later skip replaces the reason)."""
    conn.execute(delete(SKIP).where(SKIP.c.miss_id == miss.id, SKIP.c.user_id == user_id))
    conn.execute(
        insert(SKIP).values(
            miss_id=miss.id, triage_id=miss.triage_id, user_id=user_id, reason=reason, at=now
        )
    )


_KEEPS_OPEN_ANY = exists(select(MISS.c.id).where(MISS.c.triage_id == P_TRIAGE, keeps_open(MISS)))
_CLOSURE_CONTEXT = (
    select(
        TRIAGE.c.closed_at,
        TRIAGE.c.misses,
        GOLDEN.c.id,
        GOLDEN.c.webhook_url,
        GOLDEN.c.webhook_events,
        _KEEPS_OPEN_ANY,
    )
    .select_from(
        TRIAGE.join(RUN, RUN.c.id == TRIAGE.c.run_id).join(
            GOLDEN, GOLDEN.c.id == RUN.c.golden_set_id
        )
    )
    .where(TRIAGE.c.id == P_TRIAGE)
)


def recheck_closure(conn: Connection, *, triage_id: int, now: datetime) -> Closure:
    """Mark the triage closed or open again as its misses now stand (read afresh): after a
    write that moved many misses at once (covered misses put on the queue or taken off), or
    after a label's commit near the closure (``settle_closure``)."""
    closed_at, misses, golden_id, url, events, still_open = conn.execute(
        _CLOSURE_CONTEXT, {"p_triage": triage_id}
    ).one()
    closing = Closing(triage_id, closed_at, int(misses), int(golden_id), url, list(events or []))
    return _close(conn, closing, still_open=bool(still_open), now=now)


def settle_closure(session: Session, target: Target, now: datetime) -> None:
    """Once a write near the closure has committed (``Closing.recheck``): ask the closure
    again in a transaction of its own, which sees every write committed before it. Of the
    last writes of a triage made at once, each found the others' misses open; the last to
    commit sees them all labelled here and marks the triage closed."""
    if not target.closing.recheck:
        return
    with transaction(session) as conn:
        recheck_closure(conn, triage_id=target.closing.triage_id, now=now)
