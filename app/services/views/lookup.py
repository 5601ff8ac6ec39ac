"""One query under one run, and one document of a golden set: the pages every query id and
document id links to."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
from sqlmodel import Session, col, select

from app.eval import Gain
from app.eval.diagnosis import Thresholds
from app.eval.errors import shorten
from app.eval.hints import Ranked, hints_for
from app.models import JUDGED, Document, GoldenQuery, GoldenSet, Judgment, Run, RunJudged
from app.services.errors import NotFound
from app.services.imports.clusterings import clusters_of, members_of
from app.services.imports.golden_sets import get_golden_set
from app.services.imports.metrics import QueryRow
from app.services.imports.runs import (
    RunContext,
    evaluate_stored_run,
    head_of,
    list_runs,
    run_context,
)
from app.services.triage.hints import context_for

#: The most rows the document page lists of the runs that ranked it.
MAX_RANKED = 200
#: The most cluster-mates a document page names.
MAX_CLUSTER_MATES = 20
#: The head of the ranking a query page shows.
HEAD = 10


@dataclass(frozen=True)
class JudgedDocument:
    """A judged document of a query, with the rank the run gave it (None: not retrieved)."""

    doc_id: str
    title: str
    grade: int
    relevant: bool
    rank: int | None
    missed: bool
    #: A missed document whose duplicate-cluster mate is in the run's top depth: covered, as
    #: the triage counts it (the triages' own rule: app.eval.hints.hints_for), not a miss.
    covered_by: Ranked | None = None


@dataclass(frozen=True)
class QueryDetail:
    """A golden query under a run: its measures and diagnosis at (k, depth) (None for a log
    run or a query without a relevant document), its judged documents and the head."""

    context: RunContext
    qid: str
    text: str | None
    k: int
    depth: int
    row: QueryRow | None
    judged: list[JudgedDocument]
    head: list[tuple[int, str, float | None]]
    judged_ids: frozenset[str]
    #: the corpus titles of the judged documents and of the head's
    titles: dict[str, str]


def _titles(*, session: Session, golden: GoldenSet, doc_ids: set[str]) -> dict[str, str]:
    if not doc_ids:
        return {}
    rows = session.exec(
        select(Document.doc_id, Document.title).where(
            Document.golden_set_id == golden.id, col(Document.doc_id).in_(doc_ids)
        )
    )
    return dict(rows.all())


def query_detail(
    *,
    session: Session,
    run_id: int,
    qid: str,
    k: int,
    depth: int,
    gain: Gain = Gain.EXP,
) -> QueryDetail:
    """The query ``qid`` of the run's golden set under the run ``run_id``; 404
    ``query_not_found`` when the golden set has no such query."""
    context = run_context(session=session, run_id=run_id)
    golden, run = context.golden, context.run
    query = session.exec(
        select(GoldenQuery).where(GoldenQuery.golden_set_id == golden.id, GoldenQuery.qid == qid)
    ).first()
    grades = dict(
        session.exec(
            select(Judgment.doc_id, Judgment.grade).where(
                Judgment.golden_set_id == golden.id, Judgment.qid == qid
            )
        ).all()
    )
    if query is None and not grades:
        raise NotFound(f"no query {shorten(qid)} in this golden set", code="query_not_found")
    row = None
    ranks: dict[str, int] = {}
    if run.kind == JUDGED:
        evaluation = evaluate_stored_run(
            session=session,
            run=run,
            golden=golden,
            k=k,
            depth=depth,
            gain=gain,
            depths=(k, depth),
            thresholds=Thresholds(),
        )
        row = next((QueryRow.of(q, k, depth) for q in evaluation.queries if q.qid == qid), None)
        ranks = dict(
            session.exec(
                select(RunJudged.doc_id, RunJudged.rank).where(
                    RunJudged.run_id == run.id, RunJudged.qid == qid
                )
            ).all()
        )
    head = head_of(session=session, run=run, qid=qid)[:HEAD]
    titles = _titles(
        session=session, golden=golden, doc_ids=set(grades) | {doc for _, doc, _ in head}
    )
    missed = [
        doc
        for doc, grade in grades.items()
        if grade >= golden.min_grade and (ranks.get(doc) or depth + 1) > depth
    ]
    covered = _covered(session, context, qid, missed, depth) if missed else {}
    judged = [
        JudgedDocument(
            doc_id=doc,
            title=titles.get(doc, ""),
            grade=grade,
            relevant=grade >= golden.min_grade,
            rank=ranks.get(doc),
            missed=doc in missed,
            covered_by=covered.get(doc),
        )
        for doc, grade in sorted(grades.items(), key=lambda item: (-item[1], item[0]))
    ]
    return QueryDetail(
        context=context,
        qid=qid,
        text=query.text if query is not None else None,
        k=k,
        depth=depth,
        row=row,
        judged=judged,
        head=head,
        judged_ids=frozenset(grades),
        titles=titles,
    )


def _covered(
    session: Session, context: RunContext, qid: str, missed: list[str], depth: int
) -> dict[str, Ranked]:
    """The missed documents a cluster-mate in the top ``depth`` covers, with that mate."""
    if context.run.kind != JUDGED or context.golden.documents == 0:
        return {}
    ctx = context_for(
        session=session,
        golden=context.golden,
        run=context.run,
        misses=pl.DataFrame({"qid": [qid] * len(missed), "doc_id": missed}),
        depth=depth,
        query_texts={},
    )
    found = {doc: hints_for(qid, doc, ctx).covered_by for doc in missed}
    return {doc: mate for doc, mate in found.items() if mate is not None}


@dataclass(frozen=True)
class RankedIn:
    """Where one run put the document for one query that judges it (None: not retrieved)."""

    run_id: int
    run_name: str
    qid: str
    rank: int | None


@dataclass(frozen=True)
class DocumentDetail:
    """A document of a golden set: its corpus row (None without a corpus), its judgments
    (qid, query text, grade), its cluster-mates and the ranks judged runs gave it."""

    golden: GoldenSet
    doc_id: str
    document: Document | None
    judgments: list[tuple[str, str | None, int]]
    #: its cluster in the golden set's clustering now (None: its own)
    cluster_id: str | None
    cluster_mates: list[str]
    ranked_in: list[RankedIn]
    first_run_id: int | None


def document_detail(*, session: Session, golden_set_id: int, doc_id: str) -> DocumentDetail:
    """The document ``doc_id``; 404 ``document_not_found`` when the golden set neither has it
    in its corpus nor judges it."""
    golden = get_golden_set(session=session, golden_set_id=golden_set_id)
    document = session.exec(
        select(Document).where(Document.golden_set_id == golden.id, Document.doc_id == doc_id)
    ).first()
    judgments = list(
        session.exec(
            select(Judgment.qid, GoldenQuery.text, Judgment.grade)
            .outerjoin(
                GoldenQuery,
                (col(GoldenQuery.golden_set_id) == col(Judgment.golden_set_id))
                & (col(GoldenQuery.qid) == col(Judgment.qid)),
            )
            .where(Judgment.golden_set_id == golden.id, Judgment.doc_id == doc_id)
            .order_by(col(Judgment.grade).desc(), col(Judgment.qid))
        ).all()
    )
    if document is None and not judgments:
        raise NotFound(
            f"no document {shorten(doc_id)} in this golden set", code="document_not_found"
        )
    mates: list[str] = []
    cluster_id = None
    if document is not None:
        cluster_id = clusters_of(
            session=session, clustering_id=golden.clustering_id, doc_ids=[doc_id]
        ).get(doc_id)
    if cluster_id is not None:
        members = members_of(
            session=session,
            clustering_id=golden.clustering_id,
            cluster_ids=[cluster_id],
            limit=MAX_CLUSTER_MATES + 1,
        ).get(cluster_id, [])
        mates = [d for d in members if d != doc_id][:MAX_CLUSTER_MATES]
    runs = list_runs(session=session, golden=golden, kind=JUDGED)
    ranked: list[RankedIn] = []
    if runs and judgments:
        names = {run.id: run.name for run in runs if run.id is not None}
        rows = session.exec(
            select(RunJudged.run_id, RunJudged.qid, RunJudged.rank)
            .where(col(RunJudged.run_id).in_(names), RunJudged.doc_id == doc_id)
            .order_by(col(RunJudged.run_id), col(RunJudged.qid))
            .limit(MAX_RANKED)
        )
        found = {(r, q): rank for r, q, rank in rows}
        judged = sorted({qid for qid, _, _ in judgments})
        ranked = [
            RankedIn(run_id, name, qid, found.get((run_id, qid)))
            for run_id, name in names.items()
            for qid in judged
        ][:MAX_RANKED]
    first: Run | None = runs[0] if runs else None
    return DocumentDetail(
        golden=golden,
        doc_id=doc_id,
        document=document,
        judgments=[(q, t, g) for q, t, g in judgments],
        cluster_id=cluster_id,
        cluster_mates=mates,
        ranked_in=ranked,
        first_run_id=first.id if first is not None else None,
    )
