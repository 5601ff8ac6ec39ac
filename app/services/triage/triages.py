"""Triages: the misses of a run at a candidate depth, materialised for the work queue."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl
from sqlalchemy import ColumnElement, and_, bindparam, exists, func, or_, update
from sqlmodel import Session, col, select

from app.db import writing
from app.eval import misses_frame
from app.eval.conventions import CutoffError, check_cutoffs
from app.eval.overlap import overlap_sample
from app.models import OTHER, GoldenSet, Miss, MissState, Resolution, Review, Run, Triage, User
from app.models.agreement_public import AgreementPublic
from app.models.triage_public import (
    ClosureReport,
    CoveredMoved,
    FinalCounts,
    MissPublic,
    Overlap,
    TriageContext,
    TriageDetail,
)
from app.readmodel import PageOf
from app.services.errors import Conflict, Invalid, NotFound
from app.services.imports.bulk import bulk_insert
from app.services.imports.golden_sets import eval_golden_set
from app.services.imports.runs import stored_ranking
from app.services.paging import DEFAULT_PER_PAGE, page_rows
from app.services.triage.agreement import kappa_phrase, triage_agreement
from app.services.triage.hints import context_for, hint_columns


def create_triage(
    *,
    session: Session,
    run: Run,
    golden: GoldenSet,
    depth: int,
    k: int,
    user: User | None,
    overlap: Overlap | None = None,
) -> Triage:
    """Enumerate the run's misses at ``depth`` and put them on a new queue, in queue order:
    the misses of one query together (golden-set order), then grade descending.

    With ``overlap`` (more than one reviewer), a reproducible sample of the misses,
    stratified by the hints' suggested cause (app/eval/overlap.py), gets that many distinct
    reviewers each; the others one.

    Each miss gets its cause hints (app/eval/hints.py); a miss whose duplicate-cluster mate is
    in the candidates is "covered" and stays off the queue until a lead includes it."""
    try:
        check_cutoffs(k=k, depth=depth)
    except CutoffError as exc:
        raise Invalid(str(exc), code=exc.code) from None
    existing = session.exec(
        select(Triage).where(Triage.run_id == run.id, Triage.depth == depth, Triage.k == k)
    ).first()
    if existing is not None:
        raise Conflict(
            f"run {run.name!r} has a triage at depth {depth}, k {k} already",
            code="triage_exists",
            details={"triage_id": existing.id},
        )
    gold = eval_golden_set(session=session, golden=golden)
    misses = misses_frame(gold, stored_ranking(session=session, run=run, gold=gold), depth)
    ctx = context_for(
        session=session,
        golden=golden,
        run=run,
        misses=misses,
        depth=depth,
        query_texts=gold.queries,
    )
    misses = hint_columns(misses, ctx, list(golden.causes))
    overlap = overlap or Overlap()
    sampled = (
        overlap_sample(misses["hint"].to_list(), fraction=overlap.fraction, seed=overlap.seed)
        if overlap.reviewers > 1
        else [False] * misses.height
    )
    misses = misses.with_columns(
        pl.Series("sampled", sampled, dtype=pl.Boolean)
        .replace_strict({True: overlap.reviewers, False: 1}, return_dtype=pl.Int64)
        .alias("reviewers")
    )
    triage = Triage(
        run_id=run.id,  # type: ignore[arg-type]
        depth=depth,
        k=k,
        misses=misses.height,
        created_by_id=user.id if user else None,
        reviewers=overlap.reviewers,
        overlap_fraction=overlap.fraction,
        overlap_seed=overlap.seed,
    )
    with writing(session):
        session.add(triage)
        session.flush()
        bulk_insert(
            session,
            Miss,
            misses.with_row_index("position", offset=1).select(
                pl.lit(triage.id, dtype=pl.Int64).alias("triage_id"),
                "qid",
                "doc_id",
                "grade",
                pl.col("rank").cast(pl.Int64),
                pl.col("position").cast(pl.Int64),
                pl.when(pl.col("covered_by").is_null())
                .then(pl.lit(MissState.OPEN.value))
                .otherwise(pl.lit(MissState.COVERED.value))
                .alias("state"),
                pl.lit("").alias("note"),
                pl.lit(1, dtype=pl.Int64).alias("version"),
                "hint",
                "hint_not_indexed",
                "hint_vocabulary",
                "hint_chunk",
                "evidence",
                "covered_by",
                "reviewers",
            ),
        )
    session.refresh(triage)
    return triage


def include_covered(*, session: Session, triage_id: int, include: bool) -> CoveredMoved:
    """Put the misses covered by a duplicate on the queue (``include``), or take those not yet
    labelled, leased or (with double review) reviewed back off it. Answers how many misses
    moved and the triage's new counts. Labelled misses keep their label."""
    triage = get_triage(session=session, triage_id=triage_id)
    if include:
        moved = (
            update(Miss)
            .where(col(Miss.triage_id) == triage.id, col(Miss.state) == MissState.COVERED.value)
            .values(state=MissState.OPEN.value)
        )
    else:
        moved = (
            update(Miss)
            .where(
                col(Miss.triage_id) == triage.id,
                col(Miss.state) == MissState.OPEN.value,
                col(Miss.covered_by).is_not(None),
                col(Miss.lease_holder_id).is_(None),
                # double review under way (a reviewer's label or lease): it stays on the queue
                ~exists().where(col(Review.miss_id) == col(Miss.id)),
            )
            .values(state=MissState.COVERED.value)
        )
    with writing(session):
        count = session.execute(moved).rowcount  # type: ignore[attr-defined]
    return CoveredMoved(
        moved=int(count), triage=triage_detail(session=session, triage_id=triage_id)
    )


def covered_on_queue(*, session: Session, triage: Triage) -> int:
    """Misses covered by a duplicate that a lead put on the queue (open or labelled)."""
    return int(
        session.exec(
            select(func.count())
            .select_from(Miss)
            .where(
                Miss.triage_id == triage.id,
                col(Miss.covered_by).is_not(None),
                Miss.state != MissState.COVERED.value,
            )
        ).one()
    )


def causes_of_miss(*, session: Session, miss_id: int) -> list[str]:
    """The named causes that apply to a miss (one query)."""
    row = session.exec(
        select(GoldenSet.causes)
        .join(Run, col(Run.golden_set_id) == col(GoldenSet.id))
        .join(Triage, col(Triage.run_id) == col(Run.id))
        .join(Miss, col(Miss.triage_id) == col(Triage.id))
        .where(Miss.id == miss_id)
    ).first()
    if row is None:
        raise NotFound(f"no miss {miss_id}", code="miss_not_found")
    return list(row)


def get_triage(*, session: Session, triage_id: int) -> Triage:
    triage = session.get(Triage, triage_id)
    if triage is None:
        raise NotFound(f"no triage {triage_id}", code="triage_not_found")
    return triage


def triage_context(*, session: Session, triage_id: int) -> TriageContext:
    """The triage with its run and golden set, in one query: what every page and answer
    about a triage starts from. 404 ``triage_not_found``."""
    found = session.exec(
        select(Triage, Run, GoldenSet)
        .join(Run, col(Run.id) == col(Triage.run_id))
        .join(GoldenSet, col(GoldenSet.id) == col(Run.golden_set_id))
        .where(Triage.id == triage_id)
    ).first()
    if found is None:
        raise NotFound(f"no triage {triage_id}", code="triage_not_found")
    triage, run, golden = found
    return TriageContext(triage=triage, run=run, golden=golden)


def miss_context(*, session: Session, miss_id: int) -> tuple[MissPublic, TriageContext]:
    """A miss and the context of its triage. 404 ``miss_not_found``."""
    found = session.exec(
        select(Miss, Triage, Run, GoldenSet)
        .join(Triage, col(Triage.id) == col(Miss.triage_id))
        .join(Run, col(Run.id) == col(Triage.run_id))
        .join(GoldenSet, col(GoldenSet.id) == col(Run.golden_set_id))
        .where(Miss.id == miss_id)
    ).first()
    if found is None:
        raise NotFound(f"no miss {miss_id}", code="miss_not_found")
    miss, triage, run, golden = found
    return MissPublic.of(miss), TriageContext(triage=triage, run=run, golden=golden)


def find_miss(*, session: Session, miss_id: int) -> MissPublic | None:
    """One miss as the pages and the API show it, if there is one."""
    miss = session.get(Miss, miss_id)
    return None if miss is None else MissPublic.of(miss)


def list_triages(*, session: Session, run: Run) -> list[Triage]:
    return list(
        session.exec(select(Triage).where(Triage.run_id == run.id).order_by(col(Triage.id)))
    )


def closure_sentence(
    counts: dict[str, int],
    *,
    other: int,
    unlabelled: int,
    covered: int = 0,
    final: FinalCounts | None = None,
    adjudication: int = 0,
    agreement: str = "",
) -> str:
    """ "12 + 9 + 8 = 29 of 29 misses accounted for: the categories close", or what is left;
    misses covered by a duplicate and not queued are counted apart. With double review, what
    the final labels rest on ("; 18 agreed, 5 adjudicated") and the misses waiting for
    adjudication, and ``agreement`` (``app.services.triage.agreement.kappa_phrase``) after them.
    The only wording of it."""
    named = sum(counts.values())
    total = named + other + unlabelled
    terms = " + ".join(str(n) for n in counts.values()) or "0"
    misses = "miss" if total == 1 else "misses"
    apart = f" ({covered} more covered by a duplicate, not queued)" if covered else ""
    rests = f"; {rests_on(final)}" if final is not None and rests_on(final) else ""
    rests += f"; {agreement}" if agreement else ""
    if other == 0 and unlabelled == 0:
        return (
            f"{terms} = {named} of {total} {misses} accounted for: the categories close"
            f"{rests}{apart}"
        )
    waiting = f" ({adjudication} awaiting adjudication)" if adjudication else ""
    left = [
        f"{n} {what}" for n, what in ((other, OTHER), (unlabelled, f"unlabelled{waiting}")) if n
    ]
    return (
        f"{terms} = {named} of {total} {misses} in named causes: does not close: "
        + ", ".join(left)
        + rests
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


#: The triage's misses counted by (state, category, resolution).
StateTally = tuple[str, str | None, str | None, int]


def state_tally(*, session: Session, triage: Triage) -> list[StateTally]:
    """The triage's misses counted by state, cause and resolution, from an index alone
    (ix_miss_summary): what closure_report and the kept answers' key both read."""
    rows = session.exec(
        select(Miss.state, Miss.category, Miss.resolution, func.count())
        .where(Miss.triage_id == triage.id)
        .group_by(col(Miss.state), col(Miss.category), col(Miss.resolution))
    ).all()
    return [(state, category, resolution, int(n)) for state, category, resolution, n in rows]


def closure_report(
    *,
    session: Session,
    triage: Triage,
    causes: list[str],
    agreement: bool = False,
    measured: AgreementPublic | None = None,
    tally: Sequence[StateTally] | None = None,
) -> ClosureReport:
    """Counts per cause, other, unlabelled and covered, and whether the categories close:
    the one place that decides closure (the API, the dashboard, the backlog download and the
    ``triage.closed`` webhook all ask it). One aggregate query: misses by state and category.
    With ``agreement`` (pages and downloads, not the label's own path), a double-reviewed
    triage's sentence also quotes its reviewers' agreement (Fleiss' kappa and its interval):
    ``measured`` when the caller has it already (the dashboard's panel), else asked for.

    The categories close when no miss is unlabelled (open, on the queue) and none is in
    "other"; misses covered by a duplicate and left off the queue are counted apart.
    ``tally``: the triage's ``state_tally`` when the caller has it."""
    rows = tally if tally is not None else state_tally(session=session, triage=triage)
    counts = dict.fromkeys(causes, 0)
    other = unlabelled = covered = adjudication = 0
    rests: dict[str, int] = {}
    for state, category, resolution, n in rows:
        if state == MissState.COVERED.value:
            covered += n
            continue
        if state != MissState.LABELLED.value or category is None:
            unlabelled += n
            adjudication += n if state == MissState.DISPUTED.value else 0
            continue
        if category == OTHER:
            other += n
        else:
            counts[category] = counts.get(category, 0) + n
        # a final label: one reviewer's (no resolution), agreed or adjudicated
        resolution = resolution or Resolution.SINGLE.value
        rests[resolution] = rests.get(resolution, 0) + n
    final = FinalCounts(**rests)
    kappa = ""
    if agreement and triage.reviewers > 1:
        if measured is None:
            measured = triage_agreement(session=session, triage=triage, causes=causes)
        kappa = kappa_phrase(measured.fleiss_kappa)
    return ClosureReport(
        misses=triage.misses,
        counts=counts,
        other=other,
        unlabelled=unlabelled,
        covered=covered,
        adjudication=adjudication,
        final=final,
        closes=other == 0 and unlabelled == 0,
        closure=closure_sentence(
            counts,
            other=other,
            unlabelled=unlabelled,
            covered=covered,
            final=final,
            adjudication=adjudication,
            agreement=kappa,
        ),
    )


def closes(*, session: Session, triage: Triage) -> bool:
    """``closure_report(...).closes``, asked as one EXISTS for the label's own path: a miss
    that keeps the categories open (unlabelled: open or disputed, or without a category; or
    in "other"; covered misses are off the queue) stops the search, so a triage far from
    closing answers at its first open miss instead of counting every miss. The rule is
    closure_report's (tests/services/test_closure.py checks they agree)."""
    assert triage.id is not None
    return closes_by_id(session=session, triage_id=triage.id)


def closes_by_id(*, session: Session, triage_id: int) -> bool:
    """``closes`` for a triage known by its id (the label's hot path holds no ``Triage``)."""
    found = session.execute(_KEEPS_OPEN, {"triage_id": triage_id}).first()
    return found is None


def keeps_open(miss: Any) -> ColumnElement[bool]:
    """The closure rule for one miss (of the ``miss`` table or an alias of it): it keeps its
    triage's categories open when it is unlabelled (open or disputed, or without a category)
    or in "other"; covered misses are off the queue. State is never null, so two
    inequalities say NOT IN without an expanding list (a fixed statement compiles once)."""
    return or_(
        and_(
            miss.c.state != MissState.LABELLED.value,
            miss.c.state != MissState.COVERED.value,
        ),
        and_(
            miss.c.state == MissState.LABELLED.value,
            or_(miss.c.category.is_(None), miss.c.category == OTHER),
        ),
    )


_MISS = Miss.__table__  # type: ignore[attr-defined]
#: The first miss keeping the triage's categories open, as one fixed statement.
_KEEPS_OPEN = (
    select(_MISS.c.id)
    .where(_MISS.c.triage_id == bindparam("triage_id"), keeps_open(_MISS))
    .limit(1)
)


def triage_detail(*, session: Session, triage_id: int) -> TriageDetail:
    """A triage with its closure report (``GET /triages/{id}``)."""
    ctx = triage_context(session=session, triage_id=triage_id)
    report = closure_report(session=session, triage=ctx.triage, causes=ctx.causes, agreement=True)
    return TriageDetail.of_report(ctx.triage, report)


def list_misses(
    *,
    session: Session,
    triage_id: int,
    state: str | None = None,
    category: str | None = None,
    qid: str | None = None,
    page: int = 1,
    per_page: int = DEFAULT_PER_PAGE,
) -> PageOf[MissPublic]:
    """One page of a triage's misses in queue order, filtered by state, cause or query."""
    triage = get_triage(session=session, triage_id=triage_id)
    query = select(Miss).where(Miss.triage_id == triage.id)
    if state:
        query = query.where(Miss.state == state)
    if category:
        query = query.where(Miss.category == category)
    if qid:
        query = query.where(Miss.qid == qid)
    items, total = page_rows(
        session=session, query=query.order_by(col(Miss.position)), page=page, per_page=per_page
    )
    return PageOf[MissPublic](items=[MissPublic.of(m) for m in items], total=total)
