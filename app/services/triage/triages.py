"""Triages: the misses of a run at a candidate depth, materialised for the work queue."""

from __future__ import annotations

import polars as pl
from sqlmodel import Session, col, select

from app.db import end_reading, writing
from app.eval import misses_frame
from app.eval.conventions import CutoffError, check_cutoffs
from app.eval.overlap import overlap_sample
from app.models import DetectorRun, GoldenSet, Miss, MissState, Run, Triage, User
from app.models.triage_public import (
    MissPublic,
    Overlap,
    TriageContext,
)
from app.readmodel import PageOf
from app.services.errors import Conflict, Invalid, NotFound
from app.services.imports.bulk import bulk_insert
from app.services.imports.golden_sets import eval_golden_set
from app.services.imports.runs import stored_ranking
from app.services.paging import DEFAULT_PER_PAGE, page_rows
from app.services.queue.lifecycle import Stage, stage_of
from app.services.triage.carry import Carry, labels_to_carry
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
    in the candidates is "covered" and stays off the queue until a lead includes it. In a
    series, a miss whose pair has a final label in a named cause in the series' latest
    earlier triage carries that label (app/services/triage/carry.py) and is not queued.

    The misses are decided in one snapshot of the database: the detector run the triage
    names, its threshold and the cluster ids that decide its covered misses are one apply's,
    whatever is applied meanwhile."""
    try:
        check_cutoffs(k=k, depth=depth)
    except CutoffError as exc:
        raise Invalid(str(exc), code=exc.code) from None
    # Everything the misses are decided with is read at one moment: the golden set's applied
    # detector run, its threshold and the corpus's cluster ids (an apply writes them
    # together, and may commit while this triage reads).
    _read_in_one_snapshot(session)
    golden = _golden_now(session, golden)
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
    carry = labels_to_carry(session=session, run=run, causes=list(golden.causes))
    misses = _with_carried(misses, carry)
    triage = Triage(
        run_id=run.id,  # type: ignore[arg-type]
        depth=depth,
        k=k,
        misses=misses.height,
        created_by_id=user.id if user else None,
        reviewers=overlap.reviewers,
        overlap_fraction=overlap.fraction,
        overlap_seed=overlap.seed,
        detector_run_id=golden.detector_run_id,
        detector_threshold=_applied_threshold(session, golden),
        carried_from_id=carry.origin if carry is not None else None,
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
                "state",
                "category",
                "note",
                "carried_from",
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


def _read_in_one_snapshot(session: Session) -> None:
    """End the session's read transaction and begin one whose reads all see the database as
    it was at one moment: REPEATABLE READ on PostgreSQL (its default, READ COMMITTED, reads
    each statement at a moment of its own); SQLite's read transaction sees one snapshot from
    its first read to its end already (WAL)."""
    end_reading(session)
    if session.get_bind().dialect.name == "postgresql":
        session.connection(execution_options={"isolation_level": "REPEATABLE READ"})


def _golden_now(session: Session, golden: GoldenSet) -> GoldenSet:
    """The golden set as the current transaction sees it (its applied detector run)."""
    found = session.exec(
        select(GoldenSet).where(GoldenSet.id == golden.id).execution_options(populate_existing=True)
    ).first()
    if found is None:
        raise NotFound(f"no golden set {golden.id}", code="golden_set_not_found")
    return found


def _with_carried(misses: pl.DataFrame, carry: Carry | None) -> pl.DataFrame:
    """The misses' state, category, note and origin: covered (a copy was retrieved), carried
    (its pair's label in ``carry``; one reviewer, off the queue) or open."""
    labels = pl.DataFrame(
        {
            "qid": [q for q, _ in (carry.labels if carry else {})],
            "doc_id": [d for _, d in (carry.labels if carry else {})],
            "category": [c.category for c in (carry.labels.values() if carry else [])],
            "note": [c.note for c in (carry.labels.values() if carry else [])],
        },
        schema={"qid": pl.String, "doc_id": pl.String, "category": pl.String, "note": pl.String},
    )
    joined = misses.join(labels, on=["qid", "doc_id"], how="left")
    carried = pl.col("covered_by").is_null() & pl.col("category").is_not_null()
    return joined.with_columns(
        pl.when(pl.col("covered_by").is_not_null())
        .then(pl.lit(MissState.COVERED.value))
        .when(carried)
        .then(pl.lit(MissState.CARRIED.value))
        .otherwise(pl.lit(MissState.OPEN.value))
        .alias("state"),
        pl.when(carried).then(pl.col("category")).otherwise(None).alias("category"),
        pl.when(carried).then(pl.col("note")).otherwise(pl.lit("")).alias("note"),
        pl.when(carried)
        .then(pl.lit(carry.origin if carry else None, dtype=pl.Int64))
        .otherwise(None)
        .alias("carried_from"),
        pl.when(carried).then(1).otherwise(pl.col("reviewers")).alias("reviewers"),
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


def miss_context(*, session: Session, miss_id: int) -> tuple[MissPublic, TriageContext, Stage]:
    """A miss, the context of its triage and where the miss stands in its life cycle. 404
    ``miss_not_found``."""
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
    stage = stage_of(miss.state, miss.category, miss.reviewed)
    return MissPublic.of(miss), TriageContext(triage=triage, run=run, golden=golden), stage


def find_miss(*, session: Session, miss_id: int) -> MissPublic | None:
    """One miss as the pages and the API show it, if there is one."""
    miss = session.get(Miss, miss_id)
    return None if miss is None else MissPublic.of(miss)


def list_triages(*, session: Session, run: Run) -> list[Triage]:
    return list(
        session.exec(select(Triage).where(Triage.run_id == run.id).order_by(col(Triage.id)))
    )


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


def _applied_threshold(session: Session, golden: GoldenSet) -> float | None:
    if golden.detector_run_id is None:
        return None
    # read in the triage's snapshot, not as the session may hold it from before
    applied = session.get(DetectorRun, golden.detector_run_id, populate_existing=True)
    return None if applied is None else applied.threshold
