"""Agreement between the reviewers of a double-reviewed triage (issue 16): the statistics of
``app.eval.agreement`` over the labels of its overlap misses, and the phrase the closure
sentence quotes.

Computing them at 100,000 misses takes about a second (the bootstrap's 1,000 resamples), so
each process keeps the last answer per triage until its labels change (app/services/kept.py).
The API always answers with the current figures; the dashboard, once a computation has taken
longer than ``BACKGROUND_AFTER``, shows the figures it has while the new ones are computed in
the background, and says so.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from app.eval.agreement import Unit, measure_agreement
from app.models import CANT_TELL, Miss, MissState, Review, Triage, User
from app.models.agreement_public import AgreementPublic, EstimatePublic
from app.models.triage_public import UnitLabels
from app.services.triage.kept import Kept, LabelKey, Slot, label_key, slot_of

log = logging.getLogger(__name__)

#: Bootstrap replicates behind every interval, and their seed: the same labels always give
#: the same intervals.
RESAMPLES = 1000
SEED = 0
#: A computation that took longer than this (seconds) is done in the background for the
#: dashboard next time (``dashboard_agreement``).
BACKGROUND_AFTER = 0.5

#: The answers, and how long each took to compute.
_kept: Kept[tuple[AgreementPublic, float]] = Kept()
#: Slots whose answer is being computed in the background.
_computing: set[Slot] = set()
_computing_lock = threading.Lock()


def review_labels(*, session: Session, triage: Triage) -> list[UnitLabels]:
    """Every overlap miss whose labels are all in (agreed, disputed or adjudicated), with each
    reviewer's label, its hints' suggestion and its final label (None while disputed), in
    queue order. Misses still collecting labels are left out: a unit is counted once it is
    complete. Columns, not objects: a triage of 100,000 misses has 200,000 labels at
    overlap 2."""
    # Two plain reads joined here, on the session's connection (Core rows, not ORM loading):
    # one join sorted by queue order took 2.6 s on SQLite at 200,000 labels, this 0.3 s.
    connection = session.connection()
    labels: dict[int, dict[int, str]] = {}
    reviews = connection.execute(
        sa_select(
            col(Review.miss_id), col(Review.id), col(Review.reviewer_id), col(Review.category)
        )
        .where(col(Review.triage_id) == triage.id, col(Review.category).is_not(None))
        .order_by(col(Review.id))
    ).all()
    for miss_id, review_id, reviewer_id, label in reviews:
        # a deleted reviewer's label still counts, under a key no user has
        key = reviewer_id if reviewer_id is not None else -(review_id or 0)
        labels.setdefault(miss_id, {})[key] = label or ""
    misses = connection.execute(
        sa_select(col(Miss.id), col(Miss.hint), col(Miss.state), col(Miss.category))
        .where(
            col(Miss.triage_id) == triage.id,
            col(Miss.reviewers) > 1,
            col(Miss.state) != MissState.OPEN.value,
        )
        .order_by(col(Miss.position))
    ).all()
    labelled = MissState.LABELLED.value
    return [
        UnitLabels(miss_id, hint, labels[miss_id], final if state == labelled else None)
        for miss_id, hint, state, final in misses
        if miss_id in labels
    ]


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


def triage_agreement(
    *, session: Session, triage: Triage, causes: list[str], key: LabelKey | None = None
) -> AgreementPublic:
    """How often the reviewers of ``triage`` agreed (``GET /triages/{id}/agreement``), over
    its overlap misses whose labels are all in; ``causes``: the taxonomy, in display order.
    Always the current figures. ``key``: the triage's ``label_key`` when the caller has it."""
    slot = slot_of(session, triage)
    key = key if key is not None else label_key(session, triage)
    hit = _kept.get(slot, key)
    if hit is not None:
        return hit[0]
    return _compute(session, triage, causes, slot, key)


def dashboard_agreement(
    *, session: Session, triage: Triage, causes: list[str], key: LabelKey | None = None
) -> tuple[AgreementPublic, bool]:
    """The agreement for the dashboard and whether it is current. When the labels changed
    since the kept answer and computing it took longer than ``BACKGROUND_AFTER``, the kept
    answer is shown (not current) while a thread computes the new one. ``key``: the
    triage's ``label_key`` when the caller has it."""
    slot = slot_of(session, triage)
    key = key if key is not None else label_key(session, triage)
    latest = _kept.latest(slot)
    if latest is not None:
        kept_key, (answer, seconds) = latest
        if kept_key == key:
            return answer, True
        if seconds > BACKGROUND_AFTER:
            _start_background(session, triage, causes, slot)
            return answer, False
    return _compute(session, triage, causes, slot, key), True


def _compute(
    session: Session, triage: Triage, causes: list[str], slot: Slot, key: LabelKey
) -> AgreementPublic:
    assert triage.id is not None
    began = time.perf_counter()
    labels = review_labels(session=session, triage=triage)
    units = units_of(labels)
    measured = measure_agreement(units, categories=causes, resamples=RESAMPLES, seed=SEED)
    cant_tell = Counter(who for u in labels for who, said in u.labels.items() if said == CANT_TELL)
    ids = [r for r in {*measured.reviewers, *cant_tell} if isinstance(r, int) and r > 0]
    names: dict[object, str] = {}
    for start in range(0, len(ids), 1000):
        chunk = ids[start : start + 1000]
        found = session.exec(select(User.id, User.email).where(col(User.id).in_(chunk))).all()
        names.update((user_id, email) for user_id, email in found)
    answer = AgreementPublic.of(
        measured, triage_id=triage.id, names=names, cant_tell={k: v for k, v in cant_tell.items()}
    )
    _kept.put(slot, key, (answer, time.perf_counter() - began))
    return answer


def _start_background(session: Session, triage: Triage, causes: list[str], slot: Slot) -> None:
    """Compute the triage's agreement in a thread of its own (one per triage at a time)."""
    with _computing_lock:
        if slot in _computing:
            return
        _computing.add(slot)
    engine, triage_id = session.get_bind().engine, triage.id

    def run() -> None:
        try:
            with Session(engine) as own:
                current = own.get(Triage, triage_id)
                if current is not None:
                    _compute(own, current, causes, slot, label_key(own, current))
        except Exception:  # the next request computes it, or tries again
            log.exception("agreement of triage %s: the background computation failed", triage_id)
        finally:
            with _computing_lock:
                _computing.discard(slot)

    threading.Thread(target=run, name=f"agreement-{triage_id}", daemon=True).start()


def wait_for_background(timeout: float = 30.0) -> bool:
    """Wait until no agreement is being computed in the background (tests, benchmarks):
    whether that happened within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with _computing_lock:
            if not _computing:
                return True
        time.sleep(0.01)
    return False


def kappa_phrase(kappa: EstimatePublic) -> str:
    """ "Fleiss' kappa 0.81 [0.66, 0.93]" for the closure sentence, or why there is none."""
    if kappa.value is None:
        return f"Fleiss' kappa n/a ({kappa.reason})" if kappa.reason else "Fleiss' kappa n/a"
    return f"Fleiss' kappa {kappa.shown}"
