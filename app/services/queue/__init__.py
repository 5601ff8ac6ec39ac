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

from sqlmodel import Session, col, select

from app.db import writing
from app.models import (
    CANT_TELL,
    LabelAction,
    Miss,
    MissState,
    Triage,
    User,
)
from app.models.triage_public import MissPublic
from app.services.delivery import events as outbox
from app.services.errors import Forbidden, Invalid, NotFound, ServiceError
from app.services.queue import core as queue_core
from app.services.queue import overlap
from app.services.queue.audit import (
    Labelled,
    adjudicating,
    attempted,
    checked_note,
    event_values,
    holds,
    is_lead,
    locked_miss,
    record_event,
    snapshot,
    stale,
)
from app.services.queue.core import OPEN_LITERAL
from app.services.queue.reads import Progress, audit_page, audit_trail, progress, who_did
from app.services.queue.returns import release, skip, undo

__all__ = [
    "LabelledAndNext",
    "Progress",
    "audit_page",
    "audit_trail",
    "claim",
    "claim_in_triage",
    "current",
    "label",
    "label_and_claim",
    "progress",
    "release",
    "renew",
    "skip",
    "undo",
    "who_did",
]


def current(*, session: Session, triage: Triage, user: User, now: datetime) -> MissPublic | None:
    """The miss the caller holds a live lease on, if any: read only (showing the review page
    claims nothing; ``claim`` does, on a POST)."""
    if triage.reviewers > 1:
        return overlap.current(session, triage, user, now)
    held = session.exec(
        select(Miss)
        .where(
            Miss.triage_id == triage.id,
            col(Miss.state) == OPEN_LITERAL,
            Miss.lease_holder_id == user.id,
            col(Miss.lease_expires_at) > now,
        )
        .order_by(col(Miss.position))
        .limit(1)
    ).first()
    return None if held is None else MissPublic.of(held)


def claim(
    *, session: Session, triage: Triage, user: User, now: datetime, lease: timedelta
) -> MissPublic | None:
    """The caller's current miss, or the next unlabelled one whose lease is free or expired
    (queue order: one query's misses together, grade descending), leased to the caller.
    Misses the caller skipped go to other reviewers. None when nothing is left.

    With overlap (``triage.reviewers`` > 1) a sampled miss is offered to distinct reviewers
    until it has its labels (``app.services.queue.overlap``)."""
    assert triage.id is not None
    with writing(session):
        return _claim_in(session, triage.id, triage.reviewers, user, now, lease, triage)


def claim_in_triage(
    *, session: Session, triage_id: int, user: User, now: datetime, lease: timedelta
) -> MissPublic | None:
    """``claim`` in the triage ``triage_id``, read in the claim's own transaction (the API's
    claim: one transaction per request). 404 ``triage_not_found``."""
    assert user.id is not None
    with writing(session):
        conn = session.connection()
        # a single-review triage's claim in one statement; only when it leases nothing is
        # the triage read (no such triage: 404; double review: overlap; else none is left)
        row = queue_core.lease_next(
            conn, triage_id=triage_id, user_id=user.id, now=now, lease=lease, checked=True
        )
        if row is not None:
            return row.public()
        reviewers = queue_core.triage_reviewers(conn, triage_id)
        if reviewers is None:
            raise NotFound(f"no triage {triage_id}", code="triage_not_found")
        if reviewers == 1:
            return None
        return _claim_in(session, triage_id, reviewers, user, now, lease, None)


def _claim_in(
    session: Session,
    triage_id: int,
    reviewers: int,
    user: User,
    now: datetime,
    lease: timedelta,
    triage: Triage | None,
) -> MissPublic | None:
    """Inside the caller's writing block: ``claim`` (``triage``: the ``Triage`` when the
    caller has it; the overlap path needs one)."""
    if reviewers > 1:
        if triage is None or triage.id != triage_id:
            triage = session.get(Triage, triage_id)
        assert triage is not None  # the caller read its reviewers in this transaction
        return overlap.claim(session, triage, user, now, lease)
    assert user.id is not None
    row = queue_core.lease_next(
        session.connection(), triage_id=triage_id, user_id=user.id, now=now, lease=lease
    )
    return None if row is None else row.public()


def renew(
    *, session: Session, miss_id: int, user: User, now: datetime, lease: timedelta
) -> MissPublic:
    """Extend the caller's lease on a miss (a review, an overlap review or an adjudication)."""
    assert user.id is not None
    with writing(session):
        # the common case in one statement: the caller's lease on a single-review miss
        held = queue_core.renew_held(
            session.connection(), miss_id=miss_id, user_id=user.id, now=now, lease=lease
        )
        if held is not None:
            return held.public()
        miss = locked_miss(session, miss_id)
        if miss.reviewers > 1 and miss.state == MissState.OPEN.value:
            review = overlap.my_review(session, miss, user)
            if review is None:
                raise Forbidden("this miss is no longer leased to you", code="lease_not_held")
            review.lease_expires_at = now + lease
            session.add(review)
            return overlap.viewed(miss, review)
        if not (holds(miss, user) or adjudicating(miss, user)):
            raise Forbidden("this miss is no longer leased to you", code="lease_not_held")
        miss.lease_expires_at = now + lease
        session.add(miss)
    return MissPublic.of(miss)


def label(
    *,
    session: Session,
    miss_id: int,
    user: User,
    category: str,
    note: str,
    version: int,
    now: datetime,
    causes: list[str] | None = None,
) -> MissPublic:
    """Label (or, for a lead, relabel) a miss at its current version. ``causes``: the golden
    set's, when the caller has them (else read with the miss)."""
    with writing(session):
        done = _label_in(session, miss_id, user, category, note, version, causes, now)
        if done.closure is not None:
            outbox.after_label(session, *done.closure[:2], still_open=done.closure[2])
    if done.refusal is not None:
        raise done.refusal[1]
    return done.miss


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
    now: datetime,
    lease: timedelta,
    causes: list[str] | None = None,
    triage: Triage | None = None,
) -> LabelledAndNext:
    """``label``, then ``claim`` in the miss's triage, in one transaction: a reviewer working
    back to back pays for one request, one BEGIN/COMMIT. A refused label (409, 403) claims
    nothing and answers as ``label`` does. ``triage``: the miss's, when the caller has it."""
    following: MissPublic | None = None
    with writing(session):
        done = _label_in(session, miss_id, user, category, note, version, causes, now)
        if done.refusal is None:
            following = _claim_in(
                session, done.triage_id, done.triage_reviewers, user, now, lease, triage
            )
        if done.closure is not None:
            outbox.after_label(session, *done.closure[:2], still_open=done.closure[2])
    if done.refusal is not None:
        raise done.refusal[1]
    return LabelledAndNext(labelled=done.miss, next=following)


@dataclass(frozen=True)
class _Labelled:
    """What a label did: the miss as it now stands, its triage, and the refusal if any."""

    miss: MissPublic
    triage_id: int
    triage_reviewers: int
    refusal: tuple[LabelAction, ServiceError] | None
    #: A single-review label's closure and outbox step, left to the caller (``after_label``):
    #: the miss, its context, and whether the triage stays open
    closure: tuple[queue_core.MissRow, outbox.LabelContext, bool] | None = None


def _label_in(
    session: Session,
    miss_id: int,
    user: User,
    category: str,
    note: str,
    version: int,
    causes: list[str] | None,
    now: datetime,
) -> _Labelled:
    """Inside the caller's writing block: label the miss, or record the refused attempt and
    return why (the caller raises the error once the block has committed the attempt).
    A single-review miss takes the hot path (``queue_core``: one locked read of the miss
    with its triage and golden set, one update that also answers the closure check, one
    insert)."""
    target = queue_core.load_for_label(session.connection(), miss_id)
    if target is None:
        raise NotFound(f"no miss {miss_id}", code="miss_not_found")
    known = target.causes if causes is None else causes
    note = checked_note(category, note, [*known, CANT_TELL])
    miss = target.miss
    closure: tuple[queue_core.MissRow, outbox.LabelContext, bool] | None = None
    if category == CANT_TELL and (miss.reviewers == 1 or miss.state != MissState.OPEN.value):
        raise Invalid(
            f"{CANT_TELL!r} is for reviewers of a miss with more than one reviewer",
            code="unknown_category",
        )
    if miss.reviewers > 1:
        overlapped, refusal = _label_overlap(session, miss_id, user, category, note, version, now)
        public = MissPublic.of(overlapped)
    else:
        refusal = _refusal(miss, user, version)
        conn = session.connection()
        if refusal is not None:
            # the refused attempt is kept in the audit log (committed), then answered
            attempt = attempted(category, note, version)
            queue_core.append_event(
                conn, event_values(miss, user, refusal[0], now=now, after=attempt)
            )
        else:
            action = LabelAction.RELABEL if miss.state == MissState.LABELLED else LabelAction.LABEL
            before = snapshot(miss)
            still_open = queue_core.set_label(
                conn, miss, user_id=user.id, category=category, note=note, now=now
            )
            queue_core.append_event(
                conn, event_values(miss, user, action, now=now, before=before, note=note)
            )
            context = outbox.LabelContext(
                triage_id=miss.triage_id,
                closed_at=target.closed_at,
                misses=target.misses,
                golden_id=target.golden_id,
                webhook_url=target.webhook_url,
                webhook_events=target.webhook_events,
            )
            closure = (miss, context, still_open)
        public = miss.public()
    return _Labelled(public, miss.triage_id, target.triage_reviewers, refusal, closure)


def _label_overlap(
    session: Session,
    miss_id: int,
    user: User,
    category: str,
    note: str,
    version: int,
    now: datetime,
) -> tuple[Miss, tuple[LabelAction, ServiceError] | None]:
    """``_label_in`` for a miss with more than one reviewer (``overlap``): the reviewer's
    own blind label, or the refused attempt recorded."""
    miss = locked_miss(session, miss_id)
    refusal = overlap.refusal(session, miss, user, version, now)
    if refusal is not None:
        attempt = attempted(category, note, version)
        record_event(session, miss, user, refusal[0], now=now, after=attempt)
    else:
        overlap.add_label(session, miss, user, category=category, note=note, now=now)
    return miss, refusal


def _refusal(miss: Labelled, user: User, version: int) -> tuple[LabelAction, ServiceError] | None:
    """Why ``user`` may not label ``miss`` at ``version`` (the audit action and the error),
    or None when they may."""
    conflict = stale(miss, version)
    if conflict is not None:
        return LabelAction.CONFLICT, conflict
    relabel = miss.state == MissState.LABELLED
    if is_lead(user) or (not relabel and holds(miss, user)):
        return None
    if relabel:
        return LabelAction.REFUSED, Forbidden(
            "relabelling needs the lead role", code="lead_required"
        )
    return LabelAction.REFUSED, Forbidden("this miss is not leased to you", code="lease_not_held")
