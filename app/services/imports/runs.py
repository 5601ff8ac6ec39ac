"""Runs: import (all or nothing: app.services.imports.run_import), list, get, delete, and metrics at
any k and depth."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl
from sqlmodel import Session, col, select

from app.db import writing
from app.eval import (
    Conventions,
    Gain,
    Order,
    RankedRun,
    RunEvaluation,
    RunReport,
    Thresholds,
    evaluate_run,
)
from app.eval.conventions import (
    DEFAULT_DEPTH,
    DEFAULT_DEPTHS,
    DEFAULT_K,
    CutoffError,
    check_cutoffs,
)
from app.eval.depth_cost import DEFAULT_TOLERANCE, advise_depth
from app.eval.golden import Judgments
from app.models import (
    Document,
    GoldenSet,
    Run,
    RunHead,
    RunJudged,
    RunQuery,
)
from app.services.errors import Invalid, NotFound
from app.services.imports.clusters import (
    cluster_evaluation,
    detector_run_of,
    require_judged,
)
from app.services.imports.golden_sets import (
    eval_golden_set,
    get_golden_set,
)
from app.services.imports.metrics import RunMetrics
from app.services.imports.run_import import RUN_FORMATS as RUN_FORMATS
from app.services.imports.run_import import heads as heads
from app.services.imports.run_import import import_run as import_run
from app.services.imports.run_import import parse_columns as parse_columns
from app.services.imports.run_import import sha256_of as sha256_of


def head_of(*, session: Session, run: Run, qid: str) -> list[tuple[int, str, float | None]]:
    """The first results of one query as (rank, doc_id, score)."""
    row = session.get(RunHead, (run.id, qid))
    if row is None:
        return []
    ranking = row.ranking
    return [
        (rank, doc_id, score)
        for rank, (doc_id, score) in enumerate(
            zip(ranking["doc_ids"], ranking["scores"], strict=True), start=1
        )
    ]


def list_runs(*, session: Session, golden: GoldenSet, kind: str | None = None) -> list[Run]:
    """The golden set's runs, oldest first; of one ``kind`` (judged or log) when given."""
    where: list[Any] = [Run.golden_set_id == golden.id]
    if kind is not None:
        where.append(Run.kind == kind)
    return list(session.exec(select(Run).where(*where).order_by(col(Run.id))))


def get_run(*, session: Session, run_id: int) -> Run:
    run = session.get(Run, run_id)
    if run is None:
        raise NotFound(f"no run {run_id}", code="run_not_found")
    return run


@dataclass(frozen=True)
class RunContext:
    """A run and its golden set: what every use case about a run starts from."""

    run: Run
    golden: GoldenSet


def run_context(*, session: Session, run_id: int) -> RunContext:
    """The run ``run_id`` with its golden set; 404 ``run_not_found`` when there is none."""
    run = get_run(session=session, run_id=run_id)
    return RunContext(
        run=run, golden=get_golden_set(session=session, golden_set_id=run.golden_set_id)
    )


def delete_run(*, session: Session, run_id: int) -> None:
    with writing(session):
        session.delete(get_run(session=session, run_id=run_id))


def stored_ranking(*, session: Session, run: Run, gold: Judgments) -> RankedRun:
    """The run as app.eval sees it, rebuilt from the stored ranks (a log run: 409)."""
    require_judged(run)
    judged_rows = session.exec(
        select(RunJudged.qid, RunJudged.doc_id, RunJudged.rank).where(RunJudged.run_id == run.id)
    ).all()
    judged = (
        pl.DataFrame(
            judged_rows,
            schema={"qid": pl.String, "doc_id": pl.String, "rank": pl.UInt32},
            orient="row",
        )
        .join(gold.judgments, on=["qid", "doc_id"])
        .select("qid", "doc_id", "grade", "rank")
    )
    retrieved = dict(
        session.exec(
            select(RunQuery.qid, RunQuery.retrieved).where(RunQuery.run_id == run.id)
        ).all()
    )
    fields = RunReport.__dataclass_fields__
    report = RunReport(**{k: v for k, v in run.report.items() if k in fields})
    return RankedRun(
        name=run.name, order=Order(run.order), judged=judged, retrieved=retrieved, report=report
    )


def evaluate_stored_run(
    *,
    session: Session,
    run: Run,
    golden: GoldenSet,
    k: int = DEFAULT_K,
    depth: int = DEFAULT_DEPTH,
    gain: Gain = Gain.EXP,
    depths: tuple[int, ...] = DEFAULT_DEPTHS,
    thresholds: Thresholds | None = None,
    all_judged_queries: bool = False,
    gold: Judgments | None = None,
    ranked: RankedRun | None = None,
) -> RunEvaluation:
    """Every measure of a stored run, under the same conventions as ``misstriage evaluate``
    (``all_judged_queries``: also average the judged queries without a relevant document, as
    trec_eval ``-c`` and ``evaluate --all-judged-queries``). ``gold`` and ``ranked``: the
    golden set and the run as app.eval sees them, when the caller rebuilt them already (the
    gate needs both too); rebuilt here otherwise."""
    if k < 1 or depth < 1 or any(d < 1 for d in depths):
        raise Invalid("k, depth and depths must be positive integers", code="invalid_cutoff")
    try:
        check_cutoffs(k=k, depth=depth)
    except CutoffError as exc:
        raise Invalid(str(exc), code=exc.code) from None
    if gold is None:
        gold = eval_golden_set(session=session, golden=golden)
    if ranked is None:
        ranked = stored_ranking(session=session, run=run, gold=gold)
    conventions = Conventions(
        order=Order(run.order),
        gain=gain,
        min_grade=golden.min_grade,
        all_judged_queries=all_judged_queries,
    )
    return evaluate_run(
        gold,
        ranked,
        k=k,
        depth=depth,
        depths=depths,
        conventions=conventions,
        thresholds=thresholds,
        indexed=indexed_relevant(session=session, golden=golden, gold=gold),
    )


def indexed_relevant(*, session: Session, golden: GoldenSet, gold: Judgments) -> set[str] | None:
    """The relevant documents the index holds, the evidence of the diagnosis: those of the
    corpus marked indexed (in the index manifest, or every corpus document when there is no
    separate manifest), as the not-indexed hint decides; None without a corpus (nothing says
    what the index holds)."""
    if golden.documents == 0:
        return None
    relevant = gold.relevant.get_column("doc_id").unique().to_list()
    found: set[str] = set()
    for start in range(0, len(relevant), 5000):  # a bounded IN list
        chunk = relevant[start : start + 5000]
        found.update(
            session.exec(
                select(Document.doc_id).where(
                    Document.golden_set_id == golden.id,
                    col(Document.indexed),
                    col(Document.doc_id).in_(chunk),
                )
            ).all()
        )
    return found


def run_metrics(
    *,
    session: Session,
    context: RunContext,
    evaluation: RunEvaluation,
    cost_ms: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    retrieval_p95: Mapping[int, float] | None = None,
) -> RunMetrics:
    """The metrics of an evaluated stored run, with its duplicate clusters at k (null only
    for a run imported before cluster ranks were stored, when k is deeper than the kept head
    of its rankings) and, for a reranking cost per candidate
    ``cost_ms``, the depth advisor over its depth curve (null without a cost), with the
    retrieval p95 measured at some depths (``retrieval_p95``, filled in between) added."""
    assert context.run.id is not None
    clusters = cluster_evaluation(
        session=session, run=context.run, golden=context.golden, k=evaluation.k
    )
    curve = evaluation.depth_curve
    advice = advise_depth(
        curve,
        cost_per_candidate_ms=cost_ms,
        tolerance=tolerance,
        retrieval_p95_ms=retrieval_p95 or None,
    )
    return RunMetrics.of_run(
        evaluation,
        run_id=context.run.id,
        clusters=clusters,
        cost=advice,
        detector_run=None
        if clusters is None
        else detector_run_of(session=session, run=context.run),
    )
