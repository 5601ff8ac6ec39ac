"""Agreement between a triage's reviewers, as the API answers it and the dashboard shows it:
the read model of ``app.eval.agreement.Agreement`` with reviewers named by their email."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

from app.eval.agreement import Agreement, CauseAgreement, Estimate, ReviewerAgreement
from app.readmodel import ReadModel


class EstimatePublic(ReadModel):
    """A coefficient, its bootstrap percentile interval ``[lo, hi]``, the misses it rests on,
    and why the value or the interval is missing (null) when it is."""

    value: float | None
    ci: tuple[float, float] | None
    units: int
    reason: str | None

    @classmethod
    def of(cls, estimate: Estimate) -> Self:
        return cls(
            value=estimate.value, ci=estimate.ci, units=estimate.units, reason=estimate.reason
        )

    @property
    def shown(self) -> str:
        """``0.81 [0.66, 0.93]``, ``0.81`` without an interval, ``n/a`` when undefined."""
        if self.value is None:
            return "n/a"
        if self.ci is None:
            return f"{self.value:.2f}"
        return f"{self.value:.2f} [{self.ci[0]:.2f}, {self.ci[1]:.2f}]"


class CauseAgreementPublic(ReadModel):
    """One cause coded "this cause or not"; ``labels``: the labels naming it."""

    labels: int
    percent_agreement: EstimatePublic
    cohen_kappa: EstimatePublic
    fleiss_kappa: EstimatePublic
    krippendorff_alpha: EstimatePublic

    @classmethod
    def of(cls, cause: CauseAgreement) -> Self:
        return cls(
            labels=cause.labels,
            percent_agreement=EstimatePublic.of(cause.percent_agreement),
            cohen_kappa=EstimatePublic.of(cause.cohen_kappa),
            fleiss_kappa=EstimatePublic.of(cause.fleiss_kappa),
            krippendorff_alpha=EstimatePublic.of(cause.krippendorff_alpha),
        )


class ReviewerAgreementPublic(ReadModel):
    """One reviewer against the final labels of the misses they labelled (their labels on
    complete misses: ``labelled`` a cause, ``cant_tell`` the rest; together every label the
    reviewer gave on those misses, as the dashboard's reviewers table counts them)."""

    reviewer: str
    labelled: int
    compared: int
    equal: int
    share: float | None
    cohen_kappa: float | None
    reason: str | None
    #: "Can't tell" answers: no label for the statistics, a label the reviewer gave.
    cant_tell: int = 0

    @property
    def given(self) -> int:
        """Every label the reviewer gave on the complete misses."""
        return self.labelled + self.cant_tell

    @classmethod
    def of(cls, row: ReviewerAgreement, name: str, cant_tell: int = 0) -> Self:
        return cls(
            reviewer=name,
            cant_tell=cant_tell,
            labelled=row.labelled,
            compared=row.compared,
            equal=row.equal,
            share=row.share,
            cohen_kappa=row.cohen_kappa,
            reason=row.reason,
        )


class AgreementPublic(ReadModel):
    """How often the reviewers of a triage agreed, overall and per cause, with the confusion
    between causes and each reviewer against the final labels. ``units``: the misses with a
    label; ``compared_units``: those with labels from two reviewers or more (the rest cannot
    agree or disagree); ``reviewers_per_miss``: misses by their number of labels. Cohen's
    kappa is null unless exactly two reviewers labelled (Fleiss' kappa and Krippendorff's alpha
    take any number)."""

    triage_id: int
    units: int
    compared_units: int
    reviewers: int
    reviewers_per_miss: dict[int, int]
    causes: list[str]
    percent_agreement: EstimatePublic
    cohen_kappa: EstimatePublic | None
    fleiss_kappa: EstimatePublic
    fleiss_ratings: int | None
    krippendorff_alpha: EstimatePublic
    per_cause: dict[str, CauseAgreementPublic]
    #: ``{cause: {cause: pairs of labels on one miss}}``, symmetric; the diagonal agrees.
    confusion: dict[str, dict[str, int]]
    confusion_pairs: int
    per_reviewer: list[ReviewerAgreementPublic]
    confidence: float
    resamples: int
    seed: int

    @classmethod
    def of(
        cls,
        agreement: Agreement,
        *,
        triage_id: int,
        names: Mapping[object, str],
        cant_tell: Mapping[object, int] | None = None,
    ) -> Self:
        """``names``: each reviewer id's name (its email), shown instead of the id;
        ``cant_tell``: each reviewer's "can't tell" answers on the complete misses."""
        cohen = agreement.cohen_kappa
        cant_tell = cant_tell or {}
        rows = [
            ReviewerAgreementPublic.of(
                r, names.get(r.reviewer, str(r.reviewer)), cant_tell.get(r.reviewer, 0)
            )
            for r in agreement.per_reviewer
        ]
        listed = {r.reviewer for r in agreement.per_reviewer}
        rows += [  # a reviewer who answered only "can't tell" on these misses
            ReviewerAgreementPublic(
                reviewer=names.get(who, str(who)),
                labelled=0,
                compared=0,
                equal=0,
                share=None,
                cohen_kappa=None,
                reason='only "can\'t tell" answers',
                cant_tell=n,
            )
            for who, n in cant_tell.items()
            if who not in listed and n
        ]
        return cls(
            triage_id=triage_id,
            units=agreement.units,
            compared_units=agreement.compared_units,
            reviewers=len(agreement.reviewers),
            reviewers_per_miss=dict(agreement.reviewers_per_unit),
            causes=list(agreement.categories),
            percent_agreement=EstimatePublic.of(agreement.percent_agreement),
            cohen_kappa=EstimatePublic.of(cohen) if len(agreement.reviewers) == 2 else None,
            fleiss_kappa=EstimatePublic.of(agreement.fleiss_kappa),
            fleiss_ratings=agreement.fleiss_ratings,
            krippendorff_alpha=EstimatePublic.of(agreement.krippendorff_alpha),
            per_cause={c.category: CauseAgreementPublic.of(c) for c in agreement.per_cause},
            confusion=agreement.confusion.as_dict(),
            confusion_pairs=agreement.confusion.pairs,
            per_reviewer=rows,
            confidence=agreement.confidence,
            resamples=agreement.resamples,
            seed=agreement.seed,
        )
