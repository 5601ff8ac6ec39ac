"""The pair-review queue: reviewers judge sampled pairs of a detector run "same content" or
"different", with the miss queue's rules (app/services/queue):

- every step takes the person's lock on the detector run's pairs first, then the pair's row,
  in the order app/services/locks.py states for both review queues: a person's
  claims, labels, skips and releases run one after the other, never waiting in a circle;
- a claim answers the person's current pair (their lease, renewed), else the next sampled
  pair in queue order that nobody holds and they did not skip (``SKIP LOCKED``); a person
  holds at most one lease per detector run;
- a label names the version it was made on: a pair changed since answers 409
  ``stale_version`` with the pair as it stands, and the refused judgment is kept in the audit
  log beside the one in force; an unlabelled pair takes the label of its lease holder (or a
  lead), a labelled one is relabelled by a lead only;
- a skip passes the pair to the others; a release gives it back;
- every step is a ``PairEvent``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_
from sqlmodel import Session, col, select

from app.db import writing
from app.eval import calibration as cal
from app.models import DetectorRun, DocPair, Document, PairAction, PairEvent, PairSkip, User
from app.models.dedup_public import PairDocument, PairEventPublic, PairPublic
from app.services import locks
from app.services.errors import Conflict, Forbidden, NotFound, ServiceError
from app.services.queue.lifecycle import NOT_HELD, is_lead

NOT_HELD_PAIR = NOT_HELD.replace("miss", "pair")
#: The most characters of a document's text a pair shows (the rest is elided, and said).
SHOWN_CHARS = 20_000


def _locked_pair(session: Session, pair_id: int, user: User) -> DocPair:
    """Inside a ``writing`` block: the person's lock on the pair's detector run, then the
    pair, its row locked (404 ``pair_not_found``)."""
    assert user.id is not None
    conn = session.connection()
    if locks.person_on_pair(conn, pair_id=pair_id, user_id=user.id) is None:
        raise NotFound(f"no pair {pair_id}", code="pair_not_found")
    pair = session.exec(
        select(DocPair)
        .where(DocPair.id == pair_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).first()
    if pair is None:  # deleted with its detector run meanwhile
        raise NotFound(f"no pair {pair_id}", code="pair_not_found")
    return pair


def _snapshot(pair: DocPair) -> dict[str, Any]:
    return {
        "labelled": pair.labelled,
        "same": pair.same,
        "version": pair.version,
        "lease_holder": pair.lease_holder_id,
    }


def _event(
    session: Session,
    pair: DocPair,
    user: User,
    action: PairAction,
    *,
    now: datetime,
    before: dict[str, Any],
    after: dict[str, Any] | None = None,
    note: str = "",
) -> None:
    assert pair.id is not None
    session.add(
        PairEvent(
            pair_id=pair.id,
            detector_run_id=pair.detector_run_id,
            user_id=user.id,
            at=now,
            action=action.value,
            before=before,
            after=after if after is not None else _snapshot(pair),
            note=note,
        )
    )


def _document(session: Session, golden_set_id: int, doc_id: str) -> PairDocument:
    row = session.exec(
        select(Document.title, Document.text).where(
            Document.golden_set_id == golden_set_id, Document.doc_id == doc_id
        )
    ).first()
    title, text = row if row is not None else ("", "")
    if len(text) > SHOWN_CHARS:
        text = text[:SHOWN_CHARS] + f" … ({len(text) - SHOWN_CHARS:,} more characters)"
    return PairDocument(doc_id=doc_id, title=title, text=text)


def pair_public(*, session: Session, pair: DocPair) -> PairPublic:
    run = session.get(DetectorRun, pair.detector_run_id)
    assert run is not None
    assert pair.id is not None
    assert run.low is not None
    table = cal.bands(run.low)
    return PairPublic(
        id=pair.id,
        detector_run_id=pair.detector_run_id,
        a=_document(session, run.golden_set_id, pair.doc_a),
        b=_document(session, run.golden_set_id, pair.doc_b),
        similarity=pair.similarity,
        band=table[pair.band].label() if pair.band < len(table) else str(pair.band),
        version=pair.version,
        labelled=pair.labelled,
        same=pair.same,
        lease_expires_at=pair.lease_expires_at,
    )


def get_pair(*, session: Session, pair_id: int) -> DocPair:
    pair = session.get(DocPair, pair_id)
    if pair is None:
        raise NotFound(f"no pair {pair_id}", code="pair_not_found")
    return pair


def _reviewable(run: DetectorRun) -> None:
    if run.low is None:
        raise Conflict("imported cluster ids have no pairs to review", code="not_a_detection")


def claim(
    *, session: Session, run: DetectorRun, user: User, now: datetime, lease: timedelta
) -> DocPair | None:
    """The caller's current pair (renewed), else the next one they may take, leased to
    them; None when no sampled pair is left for them."""
    _reviewable(run)
    assert run.id is not None
    assert user.id is not None
    with writing(session):
        locks.person_on_detector_run(session.connection(), detector_run_id=run.id, user_id=user.id)
        base = select(DocPair).where(
            DocPair.detector_run_id == run.id,
            col(DocPair.sampled).is_(True),
            col(DocPair.labelled).is_(False),
        )
        pair = session.exec(
            base.where(DocPair.lease_holder_id == user.id)
            .order_by(col(DocPair.position))
            .limit(1)
            .with_for_update()
            .execution_options(populate_existing=True)
        ).first()
        if pair is None:
            skipped = select(PairSkip.pair_id).where(
                PairSkip.detector_run_id == run.id, PairSkip.user_id == user.id
            )
            pair = session.exec(
                base.where(
                    or_(
                        col(DocPair.lease_holder_id).is_(None),
                        col(DocPair.lease_expires_at) <= now,
                    ),
                    col(DocPair.id).not_in(skipped),
                )
                .order_by(col(DocPair.position))
                .limit(1)
                .with_for_update(skip_locked=True)
                .execution_options(populate_existing=True)
            ).first()
        if pair is None:
            return None
        pair.lease_holder_id = user.id
        pair.lease_expires_at = now + lease
        session.add(pair)
    session.refresh(pair)
    return pair


def current(*, session: Session, run: DetectorRun, user: User, now: datetime) -> DocPair | None:
    """The pair the caller holds a live lease on, if any (read only)."""
    return session.exec(
        select(DocPair).where(
            DocPair.detector_run_id == run.id,
            col(DocPair.labelled).is_(False),
            DocPair.lease_holder_id == user.id,
            col(DocPair.lease_expires_at) > now,
        )
    ).first()


@dataclass(frozen=True, slots=True)
class _Refused:
    action: PairAction
    error: ServiceError


def label(
    *, session: Session, pair_id: int, same: bool, version: int, user: User, now: datetime
) -> DocPair:
    """Judge a pair the same content or different, at ``version``."""
    refused: _Refused | None = None
    with writing(session):
        pair = _locked_pair(session, pair_id, user)
        before = _snapshot(pair)
        attempt = {"same": same, "version": version}
        if pair.version != version:
            refused = _Refused(
                PairAction.CONFLICT,
                Conflict(
                    f"this pair changed since you loaded it (version {version}, now "
                    f"{pair.version})",
                    code="stale_version",
                    details={"current": before},
                ),
            )
        elif pair.labelled and not is_lead(user):
            refused = _Refused(
                PairAction.CONFLICT,
                Forbidden("relabelling needs the lead role", code="lead_required"),
            )
        elif not pair.labelled and pair.lease_holder_id != user.id and not is_lead(user):
            refused = _Refused(PairAction.CONFLICT, Forbidden(NOT_HELD_PAIR, code="lease_not_held"))
        if refused is not None:
            _event(
                session, pair, user, refused.action, now=now, before=before, after=attempt,
                note=str(refused.error),
            )  # fmt: skip
        else:
            action = PairAction.RELABEL if pair.labelled else PairAction.LABEL
            pair.same = same
            pair.labelled = True
            pair.version += 1
            pair.labelled_by_id = user.id
            pair.labelled_at = now
            pair.lease_holder_id = None
            pair.lease_expires_at = None
            session.add(pair)
            session.flush()
            _event(session, pair, user, action, now=now, before=before)
    if refused is not None:
        raise refused.error
    session.refresh(pair)
    return pair


def _held(session: Session, pair_id: int, user: User, *, lead_may: bool) -> DocPair:
    pair = _locked_pair(session, pair_id, user)
    mine = pair.lease_holder_id == user.id and not pair.labelled
    if not (mine or (lead_may and is_lead(user) and pair.lease_holder_id is not None)):
        raise Forbidden(NOT_HELD_PAIR, code="lease_not_held")
    return pair


def skip(*, session: Session, pair_id: int, user: User, now: datetime, note: str = "") -> DocPair:
    """Pass the held pair on: it goes to the other reviewers."""
    with writing(session):
        pair = _held(session, pair_id, user, lead_may=False)
        assert user.id is not None
        before = _snapshot(pair)
        pair.lease_holder_id = None
        pair.lease_expires_at = None
        session.add(pair)
        if (
            session.exec(
                select(PairSkip).where(PairSkip.pair_id == pair_id, PairSkip.user_id == user.id)
            ).first()
            is None
        ):
            session.add(
                PairSkip(
                    pair_id=pair_id, detector_run_id=pair.detector_run_id, user_id=user.id, at=now
                )
            )
        session.flush()
        _event(session, pair, user, PairAction.SKIP, now=now, before=before, note=note[:500])
    session.refresh(pair)
    return pair


def release(*, session: Session, pair_id: int, user: User, now: datetime) -> DocPair:
    """Give the pair back to the queue (its holder, or a lead for anyone's lease)."""
    with writing(session):
        pair = _held(session, pair_id, user, lead_may=True)
        before = _snapshot(pair)
        pair.lease_holder_id = None
        pair.lease_expires_at = None
        session.add(pair)
        session.flush()
        _event(session, pair, user, PairAction.RELEASE, now=now, before=before)
    session.refresh(pair)
    return pair


def audit(*, session: Session, pair_id: int) -> list[PairEventPublic]:
    get_pair(session=session, pair_id=pair_id)
    return [
        PairEventPublic.model_validate(e)
        for e in session.exec(
            select(PairEvent).where(PairEvent.pair_id == pair_id).order_by(col(PairEvent.id))
        )
    ]


def left_for(*, session: Session, run: DetectorRun, user: User) -> int:
    """Sampled pairs not labelled yet that the caller did not skip."""
    skipped = select(PairSkip.pair_id).where(
        PairSkip.detector_run_id == run.id, PairSkip.user_id == user.id
    )
    return int(
        session.exec(
            select(func.count()).where(
                DocPair.detector_run_id == run.id,
                col(DocPair.sampled).is_(True),
                col(DocPair.labelled).is_(False),
                col(DocPair.id).not_in(skipped),
            )
        ).one()
    )
