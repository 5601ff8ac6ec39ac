"""What a golden set's cluster figures rest on: a detector run's calibration table from its
reviewed sample (``band_rows``), the estimates at a threshold, and the reference every
cluster figure carries (``live_ref``), computed from the reviews as they stand, so a figure
made before the sample was reviewed says what the sample says now."""

from __future__ import annotations

from sqlalchemy import func
from sqlalchemy import select as sa_select
from sqlmodel import Session, col

from app.eval import calibration as cal
from app.models import Clustering, DetectorRun, DocPair
from app.models.dedup_public import ref_of
from app.provenance import DetectorRunRef


def band_rows(*, session: Session, run: DetectorRun) -> list[cal.BandRow]:
    if run.low is None:
        return []
    table = cal.bands(run.low)
    counts: dict[int, list[int]] = {b.index: [0, 0, 0, 0] for b in table}
    # counted by the database, a row per (band, sampled, labelled, same): every figure resting
    # on the run asks this, and a detection may keep a hundred thousand pairs
    for band, sampled, labelled, same, n in session.connection().execute(
        sa_select(
            col(DocPair.band),
            col(DocPair.sampled),
            col(DocPair.labelled),
            col(DocPair.same),
            func.count(),
        )
        .where(col(DocPair.detector_run_id) == run.id)
        .group_by(col(DocPair.band), col(DocPair.sampled), col(DocPair.labelled), col(DocPair.same))
    ):
        row = counts.setdefault(band, [0, 0, 0, 0])
        row[0] += n
        row[1] += n if sampled else 0
        row[2] += n if labelled else 0
        row[3] += n if labelled and same else 0
    recall = (run.candidate_recall or {}).get("bands") or []
    return [
        cal.BandRow(
            band=b,
            pairs=counts[b.index][0],
            sampled=counts[b.index][1],
            reviewed=counts[b.index][2],
            same=counts[b.index][3],
            candidate_recall=recall[b.index] if b.index < len(recall) else None,
        )
        for b in table
    ]


def _candidate_share(run: DetectorRun) -> cal.Share | None:
    c = run.candidate_recall
    if not c or c.get("value") is None:
        return None
    lo, hi = c["ci"]
    return cal.Share(float(c["value"]), float(lo), float(hi))


def estimates(
    run: DetectorRun, rows: list[cal.BandRow], threshold: float
) -> tuple[cal.Estimate, cal.Estimate]:
    return cal.precision_at(rows, threshold), cal.recall_at(rows, threshold, _candidate_share(run))


def live_ref(
    *,
    session: Session,
    detector_run_id: int | None,
    threshold: float | None = None,
    clustering: int | None = None,
) -> DetectorRunRef | None:
    """The reference of a figure resting on a detector run at ``threshold`` (its applied one
    when None), with the estimates from its reviews now. ``clustering``: the figure was
    measured with that clustering of the run; one the run was applied again after, at
    another threshold, names the threshold of its own clusters and says they are not the
    run's current ones (at the same threshold, the clusters are the same)."""
    if detector_run_id is None:
        return None
    run = session.get(DetectorRun, detector_run_id)
    if run is None:
        return None
    measured = None if clustering is None else session.get(Clustering, clustering)
    earlier = (
        threshold is None
        and measured is not None
        and measured.threshold is not None
        and measured.threshold != run.threshold
    )
    if earlier:
        assert measured is not None
        threshold = measured.threshold
    at = run.threshold if threshold is None else threshold
    if run.low is None or at is None:
        return ref_of(run)
    rows = band_rows(session=session, run=run)
    precision, recall = estimates(run, rows, at)
    ref = ref_of(run, threshold=at, precision=precision.as_json(), recall=recall.as_json())
    if ref is None or not earlier or run.threshold is None:
        return ref
    return ref.model_copy(
        update={
            "sentence": f"{ref.sentence} (the clusters applied then; the run was applied again "
            f"since, at J >= {run.threshold:.2f}: import this run again to measure it with them)"
        }
    )
