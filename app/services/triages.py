"""Triages: the misses of a run at a candidate depth, materialised for the work queue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl
from sqlalchemy import func, update
from sqlmodel import Session, col, select

from app.db import writing
from app.eval import misses_frame
from app.eval.conventions import CutoffError, check_cutoffs
from app.models import OTHER, GoldenSet, Miss, MissState, Run, Triage, User
from app.services.bulk import bulk_insert
from app.services.errors import Conflict, Invalid, NotFound
from app.services.golden_sets import eval_golden_set
from app.services.hints import context_for, hint_columns
from app.services.runs import stored_ranking


def create_triage(
    *, session: Session, run: Run, golden: GoldenSet, depth: int, k: int, user: User | None
) -> Triage:
    """Enumerate the run's misses at ``depth`` and put them on a new queue, in queue order:
    the misses of one query together (golden-set order), then grade descending.

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
    triage = Triage(
        run_id=run.id,  # type: ignore[arg-type]
        depth=depth,
        k=k,
        misses=misses.height,
        created_by_id=user.id if user else None,
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
            ),
        )
    session.refresh(triage)
    return triage


def include_covered(*, session: Session, triage: Triage, include: bool) -> int:
    """Put the misses covered by a duplicate on the queue (``include``), or take those not yet
    labelled back off it. Returns how many misses moved. Labelled misses keep their label."""
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
            )
            .values(state=MissState.COVERED.value)
        )
    with writing(session):
        count = session.execute(moved).rowcount  # type: ignore[attr-defined]
    return int(count)


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


def causes_of(*, session: Session, triage_id: int) -> list[str]:
    """The named causes of the golden set a triage belongs to."""
    row = session.exec(
        select(GoldenSet.causes)
        .join(Run, col(Run.golden_set_id) == col(GoldenSet.id))
        .join(Triage, col(Triage.run_id) == col(Run.id))
        .where(Triage.id == triage_id)
    ).first()
    if row is None:
        raise NotFound(f"no triage {triage_id}", code="triage_not_found")
    return list(row)


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


def list_triages(*, session: Session, run: Run) -> list[Triage]:
    return list(
        session.exec(select(Triage).where(Triage.run_id == run.id).order_by(col(Triage.id)))
    )


@dataclass(frozen=True)
class Summary:
    """Counts per cause and whether the categories close (DESIGN.md)."""

    misses: int
    counts: dict[str, int]
    other: int
    unlabelled: int
    #: Misses covered by a duplicate and left off the queue: counted apart, outside closure.
    covered: int = 0

    @property
    def closes(self) -> bool:
        return self.other == 0 and self.unlabelled == 0

    @property
    def closure(self) -> str:
        return closure_sentence(
            self.counts, other=self.other, unlabelled=self.unlabelled, covered=self.covered
        )


def closure_sentence(
    counts: dict[str, int], *, other: int, unlabelled: int, covered: int = 0
) -> str:
    """ "12 + 9 + 8 = 29 of 29 misses accounted for: the categories close", or what is left;
    misses covered by a duplicate and not queued are counted apart."""
    named = sum(counts.values())
    total = named + other + unlabelled
    terms = " + ".join(str(n) for n in counts.values()) or "0"
    misses = "miss" if total == 1 else "misses"
    apart = f" ({covered} more covered by a duplicate, not queued)" if covered else ""
    if other == 0 and unlabelled == 0:
        return f"{terms} = {named} of {total} {misses} accounted for: the categories close{apart}"
    left = [f"{n} {what}" for n, what in ((other, OTHER), (unlabelled, "unlabelled")) if n]
    return (
        f"{terms} = {named} of {total} {misses} in named causes: does not close: "
        + ", ".join(left)
        + apart
    )


def summarise(*, session: Session, triage: Triage, causes: list[str]) -> Summary:
    """One aggregate query: misses by state and category."""
    rows = session.exec(
        select(Miss.state, Miss.category, func.count())
        .where(Miss.triage_id == triage.id)
        .group_by(col(Miss.state), col(Miss.category))
    ).all()
    counts = dict.fromkeys(causes, 0)
    other = unlabelled = covered = 0
    for state, category, n in rows:
        if state == MissState.COVERED.value:
            covered += n
        elif state != MissState.LABELLED.value or category is None:
            unlabelled += n
        elif category == OTHER:
            other += n
        else:
            counts[category] = counts.get(category, 0) + n
    return Summary(
        misses=triage.misses, counts=counts, other=other, unlabelled=unlabelled, covered=covered
    )


def list_misses(
    *,
    session: Session,
    triage: Triage,
    state: str | None = None,
    category: str | None = None,
    qid: str | None = None,
    page: int = 1,
    per_page: int = 50,
) -> tuple[list[Miss], int]:
    if page < 1 or not 1 <= per_page <= 1000:
        raise Invalid("page >= 1 and per_page within 1..1000", code="invalid_page")
    where: list[Any] = [Miss.triage_id == triage.id]
    if state:
        where.append(Miss.state == state)
    if category:
        where.append(Miss.category == category)
    if qid:
        where.append(Miss.qid == qid)
    total = session.exec(select(func.count()).select_from(Miss).where(*where)).one()
    items = session.exec(
        select(Miss)
        .where(*where)
        .order_by(col(Miss.position))
        .offset((page - 1) * per_page)
        .limit(per_page)
    ).all()
    return list(items), int(total)


def public(triage: Triage, summary: Summary | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": triage.id,
        "run_id": triage.run_id,
        "depth": triage.depth,
        "k": triage.k,
        "misses": triage.misses,
        "created_at": triage.created_at.isoformat(),
    }
    if summary is not None:
        data |= {
            "counts": summary.counts,
            "other": summary.other,
            "unlabelled": summary.unlabelled,
            "covered": summary.covered,
            "closes": summary.closes,
            "closure": summary.closure,
        }
    return data


def public_miss(miss: Miss) -> dict[str, Any]:
    return {
        "id": miss.id,
        "qid": miss.qid,
        "doc_id": miss.doc_id,
        "grade": miss.grade,
        "rank": miss.rank,
        "state": miss.state,
        "category": miss.category,
        "note": miss.note,
        "version": miss.version,
        "hint": miss.hint,
        "covered_by": miss.covered_by,
        "lease_holder": miss.lease_holder_id,
        "lease_expires_at": miss.lease_expires_at.isoformat() if miss.lease_expires_at else None,
    }
