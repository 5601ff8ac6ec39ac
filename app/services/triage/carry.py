"""Labels that carry forward: a triage of a run in a series takes, for each miss whose
(query, document) pair has a final label in a named cause in the series' latest earlier
triage, that label as ``carried`` (``lifecycle.Stage.CARRIED``).

"Latest earlier triage" is the most recently made triage of a run imported before this
one in the same series (the same golden set), at any depth: a pair's cause does not depend
on the candidate depth. Its labels in a named cause carry, its own carried labels too (a
label carries through a series until someone sends it back to the queue); a label "other"
does not (it names no cause, and the pair needs a fresh look), nor a cause the golden set
no longer has. A run outside a series carries nothing. Carried misses are not on the queue,
have no label events here and count in no agreement figure: those are of labels given in
the triage.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, col, select

from app.models import OTHER, GoldenSet, Miss, MissState, Run, Triage, User
from app.models.triage_public import TriageContext
from app.services import queue
from app.services.errors import Conflict, Invalid, NotFound


@dataclass(frozen=True)
class CarriedLabel:
    category: str
    note: str


@dataclass(frozen=True)
class Carry:
    """What a new triage carries: the triage it carries from and the labels by pair."""

    origin: int
    labels: dict[tuple[str, str], CarriedLabel]


def origin_triage(*, session: Session, run: Run) -> Triage | None:
    """The series' latest earlier triage for a triage of ``run``, if any."""
    if run.series is None:
        return None
    return session.exec(
        select(Triage)
        .join(Run, col(Run.id) == col(Triage.run_id))
        .where(
            Run.golden_set_id == run.golden_set_id,
            Run.series == run.series,
            col(Run.id) < run.id,
        )
        .order_by(col(Triage.id).desc())
        .limit(1)
    ).first()


def labels_to_carry(*, session: Session, run: Run, causes: list[str]) -> Carry | None:
    """The final labels in a named cause (of ``causes``) of the origin triage, by pair;
    None when the run's triage has no origin."""
    origin = origin_triage(session=session, run=run)
    if origin is None or origin.id is None:
        return None
    named = [c for c in causes if c != OTHER]
    found = session.exec(
        select(Miss.qid, Miss.doc_id, Miss.category, Miss.note).where(
            Miss.triage_id == origin.id,
            col(Miss.state).in_([MissState.LABELLED.value, MissState.CARRIED.value]),
            col(Miss.category).in_(named),
        )
    ).all()
    labels = {
        (q, d): CarriedLabel(category, note or "") for q, d, category, note in found if category
    }
    return Carry(origin=origin.id, labels=labels)


def send_back(
    *,
    session: Session,
    ctx: TriageContext,
    user: User,
    now: datetime,
    category: str | None = None,
    miss_id: int | None = None,
) -> int:
    """A lead sends the triage's carried misses back to the queue: all, those carried in
    ``category`` (one of the golden set's causes: 422 ``unknown_category``) or the one miss
    ``miss_id`` (404 ``miss_not_found`` when not of the triage, 409 ``not_carried`` when it
    carries no label). Answers how many went back."""
    assert ctx.triage.id is not None
    if category is not None and category not in ctx.causes:
        raise Invalid(
            f"{category[:100]!r} is not a cause of golden set {ctx.golden.name!r}",
            code="unknown_category",
        )
    moved = queue.requeue_carried(
        session=session,
        triage_id=ctx.triage.id,
        user=user,
        now=now,
        category=category,
        miss_id=miss_id,
    )
    if miss_id is not None and not moved:
        miss = session.get(Miss, miss_id)
        if miss is None or miss.triage_id != ctx.triage.id:
            raise NotFound(f"triage {ctx.triage.id} has no miss {miss_id}", code="miss_not_found")
        if miss.state != MissState.CARRIED.value:
            raise Conflict(f"miss {miss_id} carries no label", code="not_carried")
    return moved


def origin_context(*, session: Session, triage: Triage) -> TriageContext | None:
    """The triage ``triage`` carries labels from, with its run and golden set (None: it
    carries none, or that triage was deleted)."""
    if triage.carried_from_id is None:
        return None
    origin = session.get(Triage, triage.carried_from_id)
    run = session.get(Run, origin.run_id) if origin is not None else None
    if origin is None or run is None:
        return None
    golden = session.get(GoldenSet, run.golden_set_id)
    assert golden is not None
    return TriageContext(triage=origin, run=run, golden=golden)
