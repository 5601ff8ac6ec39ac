"""What the API answers and the pages show of detector runs and the pair-review queue."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from app.models.dedup import DetectorRun, DetectorSource
from app.provenance import DetectorRunRef as DetectorRunRef
from app.provenance import Interval as Interval
from app.readmodel import IsoDateTime, ReadModel


class EstimatePublic(Interval):
    reviewed: int
    how: str
    #: bands at or above the threshold (precision) or anywhere (recall) with pairs and no
    #: review: the value waits for them
    unreviewed_bands: list[str] = Field(default_factory=list)


class CandidateRecall(Interval):
    #: "exact" (every pair of the corpus compared), "sample" (the pairs among a sample of
    #: documents) or "not measured"
    how: str
    #: pairs of documents at similarity >= the run's lowest band that the exact join found,
    #: the n(n - 1)/2 pairs within a group of n identical copies counted (never listed)
    pairs: int
    #: of ``pairs``, those within groups of identical copies: found by construction (None for
    #: runs measured before copies were grouped)
    copy_pairs: int | None = None


class BandPublic(ReadModel):
    low: float
    high: float
    label: str
    pairs: int
    sampled: int
    reviewed: int
    same: int
    share: Interval
    candidate_recall: float | None
    #: the documents the band's pairs join, every copy of a group counted, and the groups
    #: (distinct texts: a group of identical copies is one) they make; on a run's page and
    #: answer (None in a list of runs, which reads no pair)
    documents: int | None = None
    groups: int | None = None


class ThresholdPublic(ReadModel):
    """What applying this threshold would give."""

    threshold: float
    pairs: int
    clusters: int
    clustered_documents: int
    precision: EstimatePublic
    recall: EstimatePublic


class ApplicationPublic(ReadModel):
    """One time a threshold was applied, as it stood then."""

    threshold: float | None
    at: str
    by: int | None
    clusters: int | None
    clustered_documents: int | None
    precision: EstimatePublic | None
    recall: EstimatePublic | None


class DetectorRunPublic(ReadModel):
    id: int
    golden_set_id: int
    source: str
    #: "reviewing" (found, not applied), "applied" (the corpus carries its clusters) or
    #: "earlier" (applied once, replaced by a later run)
    state: str
    parameters: dict[str, object]
    low: float | None
    documents: int
    pairs: int
    seconds: float
    created_at: IsoDateTime
    created_by: int | None
    threshold: float | None
    clusters: int | None
    clustered_documents: int | None
    precision: EstimatePublic | None
    recall: EstimatePublic | None
    applied_at: IsoDateTime | None
    applied_by: int | None
    #: every threshold applied, oldest first (the last one is in force when ``applied``)
    applications: list[ApplicationPublic]
    bands: list[BandPublic]
    candidate_recall: CandidateRecall | None
    #: the thresholds the lead can pick, with what each would give
    thresholds: list[ThresholdPublic]
    #: sampled pairs: on the queue, reviewed
    sampled: int
    reviewed: int
    sentence: str


class PairDocument(ReadModel):
    doc_id: str
    title: str
    text: str


class PairPublic(ReadModel):
    id: int
    detector_run_id: int
    a: PairDocument
    b: PairDocument
    similarity: float
    band: str
    version: int
    labelled: bool
    same: bool | None
    lease_expires_at: IsoDateTime | None


class PairSnapshot(ReadModel):
    """A pair as an audit event saw it (a refused attempt: what was asked, same and
    version)."""

    labelled: bool | None = None
    same: bool | None = None
    version: int | None = None
    lease_holder: int | None = None


class PairEventPublic(ReadModel):
    id: int
    pair_id: int
    user_id: int | None
    at: IsoDateTime
    action: str
    before: PairSnapshot
    after: PairSnapshot
    note: str


def _fmt(value: float | None) -> str:
    return "\u2013" if value is None else f"{value:.2f}"


def sentence(
    run: DetectorRun,
    *,
    threshold: float | None = None,
    precision: dict[str, Any] | None = None,
    recall: dict[str, Any] | None = None,
) -> str:
    """How a cluster figure names the run it rests on, at ``threshold`` with the estimates
    there (the run's applied ones when not given)."""
    if run.source == DetectorSource.IMPORTED.value:
        where = run.parameters.get("file") or "the corpus"
        return f"clusters from detector run {run.id} (imported with {where}): not calibrated"
    threshold = run.threshold if threshold is None else threshold
    p = run.precision if precision is None else precision
    r = (run.recall if recall is None else recall) or {}
    at = "" if threshold is None else f" (J >= {threshold:.2f})"
    if p is None or not p.get("reviewed"):
        return f"clusters from detector run {run.id}{at}: not calibrated yet (no pair reviewed)"
    lo, hi = p["ci"]
    shown = f"precision {_fmt(p.get('value'))} [{lo:.2f}, {hi:.2f}]"
    return f"clusters from detector run {run.id}{at}: {shown}, recall {_fmt(r.get('value'))}"


def ref_of(
    run: DetectorRun | None,
    *,
    threshold: float | None = None,
    precision: dict[str, Any] | None = None,
    recall: dict[str, Any] | None = None,
) -> DetectorRunRef | None:
    """The reference a cluster figure carries (at ``threshold`` with its estimates, else the
    run's applied ones)."""
    if run is None:
        return None
    threshold = run.threshold if threshold is None else threshold
    p = run.precision if precision is None else precision
    r = run.recall if recall is None else recall
    return DetectorRunRef(
        id=run.id,
        source=run.source,
        threshold=threshold,
        precision=None if p is None else Interval(value=p.get("value"), ci=p["ci"]),
        recall=None if r is None else Interval(value=r.get("value"), ci=r["ci"]),
        sentence=sentence(run, threshold=threshold, precision=p, recall=r),
    )
