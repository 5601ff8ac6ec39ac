"""Whether a triage's categories close, and the one sentence that says so: read from the
queue's tally (``app.services.queue.tally``), the same for the API, the dashboard, the backlog
download, the exported issues and the webhook.
"""

from __future__ import annotations

from sqlmodel import Session

from app.models import OTHER, Triage
from app.models.agreement_public import AgreementPublic
from app.models.triage_public import ClosureReport, FinalCounts, TriageDetail
from app.services.imports.detector_refs import live_ref
from app.services.queue.lifecycle import Stage
from app.services.queue.tally import Tally, triage_tally
from app.services.triage.agreement import kappa_phrase, triage_agreement
from app.services.triage.kept import label_key
from app.services.triage.triages import triage_context


def tally_of(*, session: Session, triage: Triage, causes: list[str]) -> Tally:
    assert triage.id is not None
    return triage_tally(session=session, triage_id=triage.id, causes=causes)


def closure_sentence(tally: Tally, *, agreement: str = "", carried_from: int | None = None) -> str:
    """ "12 + 9 + 8 = 29 of 29 misses accounted for: the categories close", or what is left
    ("does not close: 1 other, 4 unlabelled (3 waiting for another reviewer, 1 awaiting
    adjudication)"); misses covered by a duplicate and not queued are counted apart. With
    labels carried from the triage ``carried_from``, the sum is of the labels given here and
    those carried ("4 labelled here + 19 carried from triage 3 = 23 of 23 misses accounted
    for"). With double review, what the final labels rest on and ``agreement``
    (``kappa_phrase``) after them. The only wording of it."""
    named = sum(tally.causes.values())
    total = tally.queued
    terms = " + ".join(str(n) for n in tally.causes.values()) or "0"
    carried = tally.stages[Stage.CARRIED]
    if carried:
        origin = f"triage {carried_from}" if carried_from is not None else "an earlier triage"
        terms = f"{tally.labelled_here} labelled here + {carried} carried from {origin}"
    misses = "miss" if total == 1 else "misses"
    covered = tally.stages[Stage.COVERED]
    apart = f" ({covered} more covered by a duplicate, not queued)" if covered else ""
    rests = rests_on(FinalCounts(**tally.rests_on))
    after = (f"; {rests}" if rests else "") + (f"; {agreement}" if agreement else "")
    if tally.closes:
        accounted = f"{terms} = {named} of {total} {misses} accounted for"
        return f"{accounted}: the categories close{after}{apart}"
    other, unlabelled = tally.stages[Stage.OTHER], tally.unlabelled
    why = [
        f"{n} {what}"
        for n, what in (
            (tally.stages[Stage.REVIEWING], "waiting for another reviewer"),
            (tally.stages[Stage.DISPUTED], "awaiting adjudication"),
        )
        if n
    ]
    waiting = f" ({', '.join(why)})" if why else ""
    parts = ((other, OTHER), (unlabelled, f"unlabelled{waiting}"))
    left = [f"{n} {what}" for n, what in parts if n]
    return (
        f"{terms} = {named} of {total} {misses} in named causes: does not close: "
        + ", ".join(left)
        + after
        + apart
    )


def rests_on(final: FinalCounts) -> str:
    """ "18 agreed, 5 adjudicated" (and "3 single-reviewed" beside them): empty when every
    final label rests on one reviewer, as before double review. The closure sentence and
    the tracker issues say it in these words."""
    if not (final.agreed or final.adjudicated):
        return ""
    parts = [(final.single, "single-reviewed"), (final.agreed, "agreed")]
    parts.append((final.adjudicated, "adjudicated"))
    return ", ".join(f"{n} {what}" for n, what in parts if n)


def closure_report(
    *,
    session: Session,
    triage: Triage,
    causes: list[str],
    agreement: bool = False,
    measured: AgreementPublic | None = None,
    tally: Tally | None = None,
) -> ClosureReport:
    """Counts per cause and stage, the residue and whether the categories close, from the
    tally. With ``agreement`` (pages and downloads), a double-reviewed triage's sentence also
    quotes its reviewers' agreement: ``measured`` when the caller has it, else asked for."""
    tally = tally or tally_of(session=session, triage=triage, causes=causes)
    kappa = ""
    if agreement and triage.reviewers > 1:
        if measured is None:
            key = label_key(session, triage, tally)  # from the tally already read
            measured = triage_agreement(session=session, triage=triage, causes=causes, key=key)
        kappa = kappa_phrase(measured.fleiss_kappa)
    return ClosureReport(
        misses=tally.misses,
        counts=dict(tally.causes),
        other=tally.stages[Stage.OTHER],
        unlabelled=tally.unlabelled,
        covered=tally.stages[Stage.COVERED],
        adjudication=tally.stages[Stage.DISPUTED],
        final=FinalCounts(**tally.rests_on),
        states={stage.value: n for stage, n in tally.stages.items()},
        residue=tally.residue,
        carried=tally.stages[Stage.CARRIED],
        carried_counts=dict(tally.carried),
        carried_from=triage.carried_from_id,
        closes=tally.closes,
        closure=closure_sentence(tally, agreement=kappa, carried_from=triage.carried_from_id),
        covered_from=live_ref(
            session=session,
            detector_run_id=triage.detector_run_id,
            threshold=triage.detector_threshold,
        ),
    )


def triage_detail(*, session: Session, triage_id: int) -> TriageDetail:
    """A triage with its closure report (``GET /triages/{id}``)."""
    ctx = triage_context(session=session, triage_id=triage_id)
    report = closure_report(session=session, triage=ctx.triage, causes=ctx.causes, agreement=True)
    return TriageDetail.of_report(ctx.triage, report)
