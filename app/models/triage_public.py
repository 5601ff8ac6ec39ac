"""Triages as the services answer them, the API declares them and the pages render them:
the read models of a triage, its misses, its audit trail and its closure."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field as PydanticField
from pydantic import computed_field

from app.models.golden import GoldenSet
from app.models.runs import Run
from app.models.triage import LabelEvent, Miss, MissState, Review, Triage, shown_cause
from app.provenance import DetectorRunRef
from app.readmodel import IsoDateTime, ReadModel, absent_when_none


@dataclass(frozen=True)
class TriageContext:
    """A triage with the run it triages and that run's golden set: loaded by one query
    (``app.services.triage.triages.triage_context``), read by every page and answer about it."""

    triage: Triage
    run: Run
    golden: GoldenSet

    @property
    def triage_id(self) -> int:
        assert self.triage.id is not None
        return self.triage.id

    @property
    def causes(self) -> list[str]:
        """The golden set's named causes, in taxonomy order."""
        return list(self.golden.causes)


class MissPublic(ReadModel):
    """A miss as the API answers it and the pages show it (API.md, "Triages and the queue")."""

    id: int
    qid: str
    doc_id: str
    grade: int
    #: Rank in the run when returned deeper than the triage's depth; None: not retrieved.
    rank: int | None
    state: MissState
    category: str | None
    note: str
    version: int
    #: The cause the hints suggest (app/eval/hints.py).
    hint: str | None
    #: The duplicate-cluster mate in the candidates that makes the miss "covered".
    covered_by: str | None
    #: The user id holding the miss's lease.
    lease_holder: int | None
    lease_expires_at: IsoDateTime | None
    #: How many distinct reviewers label the miss (more than one: double review, where
    #: ``cant-tell`` is a label too); its ``category`` is the final label only.
    reviewers: int = 1
    #: A carried miss (state ``carried``): the triage whose final label it carries.
    carried_from: int | None = None

    @property
    def cause(self) -> str:
        """Where the miss stands, in one word (``shown_cause``)."""
        return shown_cause(self.state, self.category)

    @classmethod
    def of(cls, miss: Miss) -> MissPublic:
        assert miss.id is not None
        return cls(
            id=miss.id,
            qid=miss.qid,
            doc_id=miss.doc_id,
            grade=miss.grade,
            rank=miss.rank,
            state=MissState(miss.state),
            category=miss.category,
            note=miss.note,
            version=miss.version,
            hint=miss.hint,
            covered_by=miss.covered_by,
            lease_holder=miss.lease_holder_id,
            lease_expires_at=miss.lease_expires_at,
            reviewers=miss.reviewers,
            carried_from=miss.carried_from,
        )


class LabelSnapshot(ReadModel):
    """A miss's label before or after an event (``queue.snapshot``)."""

    state: str
    category: str | None
    note: str
    version: int
    #: Written by a release only: whose lease was given back.
    lease_holder: int | None = PydanticField(default=None, exclude_if=absent_when_none)
    #: Written by a requeue only: the triage the carried label came from.
    carried_from: int | None = PydanticField(default=None, exclude_if=absent_when_none)

    @property
    def cause(self) -> str:
        """Where the miss stood, in one word (``shown_cause``)."""
        return shown_cause(self.state, self.category)


class LabelEventPublic(ReadModel):
    """One entry of a miss's audit trail."""

    id: int
    miss_id: int
    user_id: int | None
    at: IsoDateTime
    action: str
    before: LabelSnapshot
    after: LabelSnapshot
    note: str

    @classmethod
    def of(cls, event: LabelEvent) -> LabelEventPublic:
        return cls.model_validate(event)


class Overlap(ReadModel):
    """How many distinct reviewers label each miss of a triage: ``reviewers`` for a
    reproducible sample (``fraction`` of the misses, stratified by the hints' suggestion,
    drawn with ``seed``), one for the rest. The default is one reviewer for every miss."""

    reviewers: int = PydanticField(default=1, ge=1, le=3)
    fraction: float = PydanticField(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False)
    seed: int = PydanticField(default=0, ge=0, le=2**31 - 1)


class TriagePublic(ReadModel):
    """A triage without its counts (creating one, listing a run's triages)."""

    id: int
    run_id: int
    depth: int
    k: int
    misses: int
    created_at: IsoDateTime
    overlap: Overlap
    #: The triage whose final labels this one carries (its run's series' latest earlier
    #: triage when it was made); None: it carries none.
    carried_from: int | None = None

    @classmethod
    def of(cls, triage: Triage) -> TriagePublic:
        assert triage.id is not None
        return TriagePublic(
            id=triage.id,
            run_id=triage.run_id,
            depth=triage.depth,
            k=triage.k,
            misses=triage.misses,
            created_at=triage.created_at,
            overlap=Overlap(
                reviewers=triage.reviewers,
                fraction=triage.overlap_fraction,
                seed=triage.overlap_seed,
            ),
            carried_from=triage.carried_from_id,
        )


class FinalCounts(ReadModel):
    """What the final labels rest on: one reviewer's label, the overlap reviewers' agreement,
    or an adjudicator's decision."""

    single: int = 0
    agreed: int = 0
    adjudicated: int = 0


class ClosureReport(ReadModel):
    """Counts per cause and stage and whether the categories close (DESIGN.md): made by
    ``app.services.triage.closure.closure_report`` alone, from the queue's tally."""

    misses: int
    counts: dict[str, int]
    other: int
    #: No final label yet: open, waiting for another reviewer, or awaiting adjudication.
    unlabelled: int
    #: Misses covered by a duplicate and left off the queue: counted apart, outside closure.
    covered: int
    #: Of the unlabelled, those whose reviewers disagreed: waiting for adjudication.
    adjudication: int = 0
    #: The final labels (the named causes and other) by what they rest on.
    final: FinalCounts = FinalCounts()
    #: Every miss by its stage (``app.services.queue.lifecycle.Stage``): open, reviewing,
    #: disputed, final, other, covered; they add up to ``misses``.
    states: dict[str, int] = PydanticField(default_factory=dict)
    #: What keeps the categories open, exactly: the unlabelled and those in "other".
    residue: int = 0
    #: Of ``counts``, the labels carried from the triage ``carried_from`` (per cause in
    #: ``carried_counts``): counted apart from the labels given here.
    carried: int = 0
    carried_counts: dict[str, int] = PydanticField(default_factory=dict)
    carried_from: int | None = None
    closes: bool
    #: The closure sentence (``app.services.triage.closure.closure_sentence``).
    closure: str
    #: The clusters that decided which misses are covered (the detector run applied when
    #: the triage was made, at its threshold then, with its estimates now); absent: none.
    covered_from: DetectorRunRef | None = PydanticField(default=None, exclude_if=absent_when_none)


class TriageDetail(TriagePublic):
    """A triage with its closure report (``GET /triages/{id}``)."""

    counts: dict[str, int]
    other: int
    unlabelled: int
    covered: int
    adjudication: int
    final: FinalCounts
    #: Every miss by its stage; they add up to ``misses`` (``ClosureReport.states``).
    states: dict[str, int]
    #: What keeps the categories open, exactly (``ClosureReport.residue``).
    residue: int
    #: Of ``counts``, the labels carried from the triage ``carried_from``
    #: (``ClosureReport.carried``, per cause ``carried_counts``).
    carried: int
    carried_counts: dict[str, int]
    closes: bool
    closure: str
    covered_from: DetectorRunRef | None = PydanticField(default=None, exclude_if=absent_when_none)

    @classmethod
    def of_report(cls, triage: Triage, report: ClosureReport) -> TriageDetail:
        public = TriagePublic.of(triage)
        return cls(
            **{name: getattr(public, name) for name in TriagePublic.model_fields},
            **report.model_dump(include={"counts", "other", "unlabelled", "covered"}),
            adjudication=report.adjudication,
            final=report.final,
            states=report.states,
            residue=report.residue,
            carried=report.carried,
            carried_counts=report.carried_counts,
            closes=report.closes,
            closure=report.closure,
            covered_from=report.covered_from,
        )


class CoveredMoved(ReadModel):
    """How many covered misses a lead put on (or took off) the queue, and the new counts."""

    moved: int
    triage: TriageDetail


class CarriedMoved(ReadModel):
    """How many carried misses a lead sent back to the queue, and the new counts."""

    requeued: int
    triage: TriageDetail


class TakenBack(ReadModel):
    """How many skipped misses came back on the caller's queue."""

    taken_back: int


class HintAccuracy(ReadModel):
    """How one hint fared against the reviewers' labels.

    precision = labelled misses with the hint that reviewers put in its cause / labelled
    misses with the hint; recall = labelled misses of the cause that had the hint / labelled
    misses of the cause. None when there is nothing to divide by yet.
    """

    cause: str
    hinted: int
    agreed: int
    labelled_as_cause: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def precision(self) -> float | None:
        return self.agreed / self.hinted if self.hinted else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def recall(self) -> float | None:
        return self.agreed / self.labelled_as_cause if self.labelled_as_cause else None


class HintReport(ReadModel):
    """The hints' precision and recall in a triage, and how often a suggestion was taken."""

    triage_id: int
    hints: list[HintAccuracy]
    #: Labelled misses that had a suggestion, and how many got the suggested cause.
    suggested: int
    accepted: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.suggested if self.suggested else None


class ReviewPublic(ReadModel):
    """One reviewer's label on an overlap miss, as the adjudicator sees it beside the others."""

    reviewer: int | None
    #: The reviewer's email (None once the account is deleted).
    email: str | None
    category: str
    note: str
    labelled_at: IsoDateTime

    @classmethod
    def of(cls, review: Review, email: str | None) -> ReviewPublic:
        assert review.category is not None
        assert review.labelled_at is not None
        return cls(
            reviewer=review.reviewer_id,
            email=email,
            category=review.category,
            note=review.note,
            labelled_at=review.labelled_at,
        )


class AdjudicationCase(MissPublic):
    """A disputed miss as the adjudication queue hands it out: the miss (leased to the
    adjudicator) with every reviewer's label and note."""

    labels: list[ReviewPublic]


@dataclass(frozen=True)
class UnitLabels:
    """The agreement statistics' unit: one overlap miss with the label each reviewer gave it
    (``reviewer id -> category``; ``cant-tell`` included), its hints' suggested cause (the
    stratum) and its final label once resolved (None before)."""

    miss_id: int
    hint: str | None
    labels: dict[int, str]
    final: str | None
