"""Agreement between the reviewers of a double-reviewed triage (issue 16): the statistics of
``app.eval.agreement`` over the labels of its overlap misses, and the phrase the closure
sentence quotes.

Computing them at 100,000 misses takes about a second (the bootstrap's 1,000 resamples), so
each process keeps the last answer per triage and computes again only when the triage's labels
have changed: every label, agreement, dispute and adjudication writes a label event, so the
newest event's time and the final-label counts say whether anything changed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from app.eval.agreement import Unit, measure_agreement
from app.models import CANT_TELL, LabelEvent, Miss, MissState, Review, Triage, User
from app.models.agreement_public import AgreementPublic, EstimatePublic
from app.models.triage_public import UnitLabels

#: Bootstrap replicates behind every interval, and their seed: the same labels always give
#: the same intervals.
RESAMPLES = 1000
SEED = 0
#: Triages whose agreement each process keeps.
CACHED_TRIAGES = 32

_Key = tuple[datetime | None, datetime, int, int]
#: (database, triage id) -> (key, answer): a process may serve more than one database (the
#: tests do), and triage ids repeat across databases.
_cache: OrderedDict[tuple[str, int], tuple[_Key, AgreementPublic]] = OrderedDict()
_lock = threading.Lock()


def forget() -> None:
    """Drop every kept answer (a database emptied and filled again under the same ids)."""
    with _lock:
        _cache.clear()


def review_labels(*, session: Session, triage: Triage) -> list[UnitLabels]:
    """Every overlap miss whose labels are all in (agreed, disputed or adjudicated), with each
    reviewer's label, its hints' suggestion and its final label (None while disputed), in
    queue order. Misses still collecting labels are left out: a unit is counted once it is
    complete. Columns, not objects: a triage of 100,000 misses has 200,000 labels at
    overlap 2."""
    # seven columns: more than sqlmodel's typed select() takes, so SQLAlchemy's
    rows = session.execute(
        sa_select(
            col(Miss.id),
            col(Miss.hint),
            col(Miss.state),
            col(Miss.category),
            col(Review.id),
            col(Review.reviewer_id),
            col(Review.category),
        )
        .join(Review, col(Review.miss_id) == col(Miss.id))
        .where(
            col(Review.triage_id) == triage.id,
            col(Miss.triage_id) == triage.id,
            col(Miss.reviewers) > 1,
            col(Miss.state) != MissState.OPEN.value,
            col(Review.category).is_not(None),
        )
        .order_by(col(Miss.position), col(Review.id))
    ).all()
    units: dict[int, UnitLabels] = {}
    for miss_id, hint, state, final, review_id, reviewer_id, label in rows:
        unit = units.get(miss_id)
        if unit is None:
            unit = units[miss_id] = UnitLabels(
                miss_id, hint, {}, final if state == MissState.LABELLED.value else None
            )
        # a deleted reviewer's label still counts, under a key no user has
        unit.labels[reviewer_id if reviewer_id is not None else -review_id] = label
    return list(units.values())


def units_of(labels: list[UnitLabels]) -> list[Unit]:
    """The statistics' units. "Can't tell" is no label (Krippendorff's "not codable"): it
    sends a miss to adjudication but says nothing about which cause the reviewer saw."""
    return [
        Unit(
            unit_id=unit.miss_id,
            labels={who: label for who, label in unit.labels.items() if label != CANT_TELL},
            final=unit.final,
        )
        for unit in labels
    ]


def _key(session: Session, triage: Triage) -> _Key:
    """What changes whenever a label of the triage does (see the module docstring). The
    counts take every miss off the queue, not only the overlap ones: read from an index
    alone (ix_miss_summary), they cost a few ms at 100,000 misses where the overlap ones
    cost a scan of the table on every page; a single review's label changes the key too,
    which only costs a computation the newest event's time asked for anyway."""
    newest = session.exec(
        select(func.max(LabelEvent.at)).where(LabelEvent.triage_id == triage.id)
    ).one()
    resolved = session.exec(
        select(func.count(), func.count(col(Miss.category))).where(
            Miss.triage_id == triage.id,
            Miss.state != MissState.OPEN.value,
        )
    ).one()
    # the triage's creation too: ids repeat when a database is emptied and filled again
    return newest, triage.created_at, int(resolved[0]), int(resolved[1])


def triage_agreement(*, session: Session, triage: Triage, causes: list[str]) -> AgreementPublic:
    """How often the reviewers of ``triage`` agreed (``GET /triages/{id}/agreement``), over
    its overlap misses whose labels are all in; ``causes``: the taxonomy, in display order."""
    assert triage.id is not None
    slot = (session.get_bind().engine.url.render_as_string(hide_password=True), triage.id)
    key = _key(session, triage)
    with _lock:
        hit = _cache.get(slot)
        if hit is not None and hit[0] == key:
            _cache.move_to_end(slot)
            return hit[1]
    units = units_of(review_labels(session=session, triage=triage))
    measured = measure_agreement(units, categories=causes, resamples=RESAMPLES, seed=SEED)
    ids = [r for r in measured.reviewers if isinstance(r, int) and r > 0]
    names: dict[object, str] = {}
    for start in range(0, len(ids), 1000):
        chunk = ids[start : start + 1000]
        found = session.exec(select(User.id, User.email).where(col(User.id).in_(chunk))).all()
        names.update((user_id, email) for user_id, email in found)
    answer = AgreementPublic.of(measured, triage_id=triage.id, names=names)
    with _lock:
        _cache[slot] = (key, answer)
        _cache.move_to_end(slot)
        while len(_cache) > CACHED_TRIAGES:
            _cache.popitem(last=False)
    return answer


def kappa_phrase(kappa: EstimatePublic) -> str:
    """ "Fleiss' kappa 0.81 [0.66, 0.93]" for the closure sentence, or why there is none."""
    if kappa.value is None:
        return f"Fleiss' kappa n/a ({kappa.reason})" if kappa.reason else "Fleiss' kappa n/a"
    return f"Fleiss' kappa {kappa.shown}"
