"""Runs: import (all or nothing), list, get, delete, and metrics at any k and depth."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from sqlmodel import Session, col, select

from app.db import writing
from app.eval import (
    Conventions,
    Gain,
    InputError,
    Order,
    RankedRun,
    RunEvaluation,
    RunReport,
    Thresholds,
    evaluate_run,
)
from app.eval.cluster_profile import CorpusSource
from app.eval.conventions import (
    DEFAULT_DEPTH,
    DEFAULT_DEPTHS,
    DEFAULT_K,
    CutoffError,
    check_cutoffs,
)
from app.eval.depth_cost import DEFAULT_TOLERANCE, advise_depth
from app.eval.errors import printable_name
from app.eval.golden import Judgments
from app.eval.sources import load_log_traces
from app.eval.streaming import load_run_heads
from app.eval.textio import ProgressFn
from app.models import (
    JUDGED,
    LOG,
    RUN_KINDS,
    Document,
    GoldenSet,
    Run,
    RunHead,
    RunJudged,
    RunQuery,
    User,
    column_width,
)
from app.services.bulk import bulk_insert
from app.services.clusters import (
    cluster_evaluation,
    corpus_source,
    require_judged,
    store_traces,
)
from app.services.errors import Conflict, Invalid, NotFound
from app.services.golden_sets import (
    ID_LIMITS,
    bad_input,
    eval_golden_set,
    get_golden_set,
)
from app.services.metrics import RunMetrics
from app.services.names import check_name
from app.settings import DEFAULT_KEEP_DEPTH

RUN_FORMATS = ("trec", "jsonl")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def import_run(
    *,
    session: Session,
    golden: GoldenSet,
    name: str,
    path: Path,
    source_name: str,
    fmt: str | None = None,
    order: Order = Order.TREC_EVAL,
    description: str = "",
    keep_depth: int = DEFAULT_KEEP_DEPTH,
    user: User | None = None,
    progress: ProgressFn | None = None,
    kind: str = JUDGED,
) -> Run:
    """Parse and rank the file first, then write in one transaction: a bad file leaves no
    rows. Keeps the rank of every judged document and the first ``keep_depth`` results, the
    cluster traces of every query the run answers and the judged documents' cluster ranks
    (cluster measures at any k). A ``log`` run (production query-log
    results, no judgments) keeps every query and only its cluster traces.
    ``progress`` is called with the bytes read as the file is read."""
    name = check_name(name, what="a run name", max_length=column_width(Run, "name"))
    if fmt is not None and fmt not in RUN_FORMATS:
        raise Invalid(f"format must be one of {', '.join(RUN_FORMATS)}", code="invalid_format")
    if kind not in RUN_KINDS:
        raise Invalid(f"kind must be one of {', '.join(RUN_KINDS)}", code="invalid_kind")
    taken = session.exec(
        select(Run).where(Run.golden_set_id == golden.id, Run.name == name)
    ).first()
    if taken is not None:
        raise Conflict(f"golden set {golden.name!r} has a run named {name!r}", code="name_taken")
    corpus = corpus_source(session=session, golden=golden)
    source_name = printable_name(source_name)
    if kind == LOG:
        return _import_log_run(
            session=session,
            golden=golden,
            name=name,
            path=path,
            source_name=source_name,
            fmt=fmt,
            order=order,
            description=description,
            user=user,
            progress=progress,
            corpus=corpus,
        )
    gold = eval_golden_set(session=session, golden=golden)
    try:
        # Block by block of whole queries where the file allows: the heads of the rankings
        # are kept, not the run's lines (app.eval.streaming).
        ranked, ranking_heads = load_run_heads(
            path,
            gold,
            name=name,
            keep_depth=keep_depth,
            shape=heads,
            order=order,
            fmt=fmt,
            id_limits=ID_LIMITS,
            progress=progress,
            corpus=corpus,
        )
    except InputError as error:
        raise bad_input(error, {str(path): source_name}) from None
    # The uploaded file's name, cut to its column (the end, which has the extension).
    source_name = source_name[-column_width(Run, "source_name") :]
    report = ranked.report.as_dict()
    report["source"] = source_name
    run = Run(
        golden_set_id=golden.id,  # type: ignore[arg-type]
        name=name,
        description=description.strip(),
        source_name=source_name,
        sha256=sha256_of(path),
        format=ranked.report.format,
        order=ranked.order.value,
        lines=ranked.report.lines,
        queries=ranked.report.queries,
        keep_depth=keep_depth,
        report=report,
        created_by_id=user.id if user else None,
    )
    with writing(session):
        session.add(run)
        session.flush()
        run_id = pl.lit(run.id, dtype=pl.Int64).alias("run_id")
        bulk_insert(
            session,
            RunQuery,
            pl.DataFrame(
                {"qid": list(ranked.retrieved), "retrieved": list(ranked.retrieved.values())},
                schema={"qid": pl.String, "retrieved": pl.Int64},
            ).select(run_id, pl.all()),
        )
        bulk_insert(
            session,
            RunJudged,
            ranked.judged.select(run_id, "qid", "doc_id", pl.col("rank").cast(pl.Int64)),
        )
        bulk_insert(session, RunHead, ranking_heads.select(run_id, "qid", "ranking"))
        assert ranked.traces is not None  # asked for with the corpus
        store_traces(session=session, run_id=run.id, traces=ranked.traces)  # type: ignore[arg-type]
    session.refresh(run)
    return run


def _import_log_run(
    *,
    session: Session,
    golden: GoldenSet,
    name: str,
    path: Path,
    source_name: str,
    fmt: str | None,
    order: Order,
    description: str,
    user: User | None,
    progress: ProgressFn | None,
    corpus: CorpusSource,
) -> Run:
    """A log run: every query kept, judged or not; only its cluster traces are stored."""
    try:
        report, traces = load_log_traces(
            path, corpus, order=order, fmt=fmt, progress=progress, id_limits=ID_LIMITS
        )
    except InputError as error:
        raise bad_input(error, {str(path): source_name}) from None
    source_name = source_name[-column_width(Run, "source_name") :]
    stored = report.as_dict()
    stored["source"] = source_name
    run = Run(
        golden_set_id=golden.id,  # type: ignore[arg-type]
        name=name,
        kind=LOG,
        description=description.strip(),
        source_name=source_name,
        sha256=sha256_of(path),
        format=report.format,
        order=report.order,
        lines=report.lines,
        queries=report.queries,
        keep_depth=0,  # no head is kept: a log run has no review
        report=stored,
        created_by_id=user.id if user else None,
    )
    with writing(session):
        session.add(run)
        session.flush()
        store_traces(session=session, run_id=run.id, traces=traces)  # type: ignore[arg-type]
    session.refresh(run)
    return run


def heads(top: pl.DataFrame) -> pl.DataFrame:
    """One row a query: qid and the JSON text {"doc_ids": [...], "scores": [...]}."""
    return (
        top.sort("qid", "rank")
        .group_by("qid", maintain_order=True)
        .agg(pl.col("doc_id").alias("doc_ids"), pl.col("score").alias("scores"))
        .select("qid", pl.struct("doc_ids", "scores").struct.json_encode().alias("ranking"))
    )


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
) -> RunEvaluation:
    """Every measure of a stored run, under the same conventions as ``misstriage evaluate``
    (``all_judged_queries``: also average the judged queries without a relevant document, as
    trec_eval ``-c`` and ``evaluate --all-judged-queries``)."""
    if k < 1 or depth < 1 or any(d < 1 for d in depths):
        raise Invalid("k, depth and depths must be positive integers", code="invalid_cutoff")
    try:
        check_cutoffs(k=k, depth=depth)
    except CutoffError as exc:
        raise Invalid(str(exc), code=exc.code) from None
    gold = eval_golden_set(session=session, golden=golden)
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
    return RunMetrics.of_run(evaluation, run_id=context.run.id, clusters=clusters, cost=advice)
