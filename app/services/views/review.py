"""What a reviewer needs to decide in seconds: the query, the missing document with the query's
terms marked, where the run put it, what won instead, sibling chunks, an earlier label."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlmodel import Session, col, select

from app.eval.hints import CHUNK_BOUNDARY, NOT_INDEXED, VOCABULARY_MISMATCH, HintEvidence
from app.eval.placement import where_the_run_put_it
from app.eval.terms import content_terms, marked
from app.models import (
    Document,
    GoldenQuery,
    GoldenSet,
    Miss,
    MissState,
    Run,
    RunQuery,
    Triage,
)
from app.models.triage_public import MissPublic, TriageContext
from app.services.errors import NotFound
from app.services.imports.runs import head_of
from app.services.queue.trail import is_blind

#: Candidates shown beside the miss ("what won instead").
CANDIDATES_SHOWN = 10
TEXT_SHOWN = 4000
#: The text handed to the page for a candidate's snippet: the page cuts it between words
#: (the ``words`` filter) much shorter than this.
SNIPPET = 600


def query_terms(text: str | None) -> set[str]:
    """The stems of the query's content words (app/eval/terms.py: the hints' analyzer)."""
    return {t.stem for t in content_terms(text)}


@dataclass(frozen=True)
class Candidate:
    rank: int
    doc_id: str
    title: str
    #: the start of the document's text; the page cuts it shorter, between words
    snippet: str
    relevant: bool


@dataclass(frozen=True)
class ReviewCard:
    miss: MissPublic
    query_text: str | None
    terms: set[str]
    document: Document | None
    title: list[tuple[str, bool]]
    text: list[tuple[str, bool]]
    truncated: bool
    where: str
    candidates: list[Candidate]
    #: how many results the run returned for the query (``candidates`` are the first of them)
    returned: int = 0
    siblings: list[tuple[Document, bool]] = field(default_factory=list)
    missing_terms: list[str] = field(default_factory=list)
    suggestion: tuple[str, str] | None = None
    #: The hints' suggested cause (a key accepts it) and their evidence, one line per cause.
    hint: str | None = None
    evidence: list[Evidence] = field(default_factory=list)


@dataclass(frozen=True)
class Evidence:
    """One cause's evidence, as shown to the reviewer: ``has`` and ``lacks`` are query words."""

    cause: str
    fired: bool
    text: str
    has: tuple[str, ...] = ()
    lacks: tuple[str, ...] = ()


def evidence_lines(miss: Miss) -> list[Evidence]:
    """The stored evidence of a miss (app/eval/hints.py), worded for the review page."""
    evidence = HintEvidence.from_json(miss.evidence)
    lines: list[Evidence] = []
    reason = evidence.not_indexed
    lines.append(
        Evidence(NOT_INDEXED, True, f"The document is {reason}.")
        if reason
        else Evidence(NOT_INDEXED, False, "The index holds the document.")
    )
    vocabulary = evidence.vocabulary
    if vocabulary is not None:
        has, lacks = vocabulary.has, vocabulary.lacks
        lines.append(
            Evidence(
                VOCABULARY_MISMATCH,
                miss.hint_vocabulary,
                f"The document has {len(has)} of {len(has) + len(lacks)} query terms "
                f"({vocabulary.coverage:.0%}).",
                has,
                lacks,
            )
        )
    chunk = evidence.chunk
    if chunk is not None and chunk.sibling is not None:
        text = f"An adjacent chunk, {chunk.sibling.doc_id}, is in the candidates at rank "
        lines.append(Evidence(CHUNK_BOUNDARY, True, text + f"{chunk.sibling.rank}."))
    elif chunk is not None and chunk.complement is not None:
        text = f"With the adjacent chunk {chunk.complement} it covers the query; that chunk brings"
        lines.append(Evidence(CHUNK_BOUNDARY, True, text, chunk.complement_terms))
    elif miss.evidence is not None:
        lines.append(Evidence(CHUNK_BOUNDARY, False, "No adjacent chunk is in the candidates."))
    covered = evidence.covered_by
    if covered is not None:
        lines.append(
            Evidence(
                MissState.COVERED,
                True,
                f"A duplicate, {covered.doc_id}, is in the candidates at rank "
                f"{covered.rank}: the run delivered this evidence.",
            )
        )
    return lines


def head_between_words(text: str, limit: int) -> tuple[str, bool]:
    """The start of ``text``, at most ``limit`` characters, ended between two words (a single
    word longer than ``limit`` is cut inside), and whether anything was left out. The page
    says "…" after a cut (app/web/copy.py's ``truncate_words`` for text it cuts itself)."""
    if len(text) <= limit:
        return text, False
    head = text[:limit]
    if not text[limit].isspace():
        before, _, _ = head.rpartition(" ")
        head = before if before.strip() else head
    return head.rstrip(), True


def results_per_query(*, session: Session, run_id: int, qids: Iterable[str]) -> dict[str, int]:
    """How many results the run returned for each of ``qids`` (absent: the run returned
    nothing for that query)."""
    wanted = sorted(set(qids))
    if not wanted:
        return {}
    return dict(
        session.exec(
            select(RunQuery.qid, RunQuery.retrieved).where(
                RunQuery.run_id == run_id, col(RunQuery.qid).in_(wanted)
            )
        ).all()
    )


def where_of(*, session: Session, miss: MissPublic, triage: Triage) -> str:
    """The one sentence about where the run put a miss (app/eval/placement.py), for a page
    showing a single miss (lists join the run's result counts in their own query)."""
    retrieved = results_per_query(session=session, run_id=triage.run_id, qids=[miss.qid])
    return where_the_run_put_it(miss.rank, retrieved.get(miss.qid), triage.depth)


def build_card(*, session: Session, ctx: TriageContext, miss_id: int) -> ReviewCard:
    """Everything the review page shows about one miss. 404 ``miss_not_found``."""
    triage, run, golden = ctx.triage, ctx.run, ctx.golden
    miss = session.get(Miss, miss_id)
    if miss is None:
        raise NotFound(f"no miss {miss_id}", code="miss_not_found")
    shown = MissPublic.of(miss)
    text = session.exec(
        select(GoldenQuery.text).where(
            GoldenQuery.golden_set_id == golden.id, GoldenQuery.qid == miss.qid
        )
    ).first()
    terms = query_terms(text)
    document = session.exec(
        select(Document).where(Document.golden_set_id == golden.id, Document.doc_id == miss.doc_id)
    ).first()
    head = head_of(session=session, run=run, qid=miss.qid)[:CANDIDATES_SHOWN]
    returned = results_per_query(session=session, run_id=triage.run_id, qids=[miss.qid]).get(
        miss.qid
    )
    head_ids = [doc_id for _, doc_id, _ in head]
    docs = (
        {
            d.doc_id: d
            for d in session.exec(
                select(Document).where(
                    Document.golden_set_id == golden.id, col(Document.doc_id).in_(head_ids)
                )
            )
        }
        if head_ids
        else {}
    )
    relevant = set(
        session.exec(
            select(Miss.doc_id).where(Miss.triage_id == triage.id, Miss.qid == miss.qid)
        ).all()
    )
    candidates = [
        Candidate(
            rank=rank,
            doc_id=doc_id,
            title=docs[doc_id].title if doc_id in docs else "",
            snippet=head_between_words(docs[doc_id].text, SNIPPET)[0] if doc_id in docs else "",
            relevant=doc_id in relevant,
        )
        for rank, doc_id, _ in head
    ]
    siblings: list[tuple[Document, bool]] = []
    if document is not None and document.parent_id:
        siblings = [
            (d, d.doc_id in head_ids)
            for d in session.exec(
                select(Document)
                .where(
                    Document.golden_set_id == golden.id,
                    Document.parent_id == document.parent_id,
                    Document.doc_id != document.doc_id,
                )
                .order_by(col(Document.chunk_index), col(Document.doc_id))
            )
        ]
    body, truncated = head_between_words(document.text if document else "", TEXT_SHOWN)
    vocabulary = HintEvidence.from_json(miss.evidence).vocabulary
    return ReviewCard(
        miss=shown,
        query_text=text,
        terms=terms,
        document=document,
        title=marked(document.title, terms) if document else [],
        text=marked(body, terms),
        truncated=truncated,
        where=where_the_run_put_it(shown.rank, returned, triage.depth),
        candidates=candidates,
        returned=returned or 0,
        siblings=siblings,
        missing_terms=list(vocabulary.lacks) if vocabulary else [],
        # blind double review: no earlier label to lean on until the reviewers have spoken
        suggestion=None
        if is_blind(miss)
        else earlier_label(session=session, miss=miss, golden=golden),
        hint=miss.hint if miss.hint in golden.causes else None,
        evidence=evidence_lines(miss),
    )


def earlier_label(*, session: Session, miss: Miss, golden: GoldenSet) -> tuple[str, str] | None:
    """The cause this (query, document) got in another triage of the same golden set."""
    row = session.exec(
        select(Miss.category, Miss.note)
        .join(Triage, col(Triage.id) == col(Miss.triage_id))
        .join(Run, col(Run.id) == col(Triage.run_id))
        .where(
            Run.golden_set_id == golden.id,
            Miss.qid == miss.qid,
            Miss.doc_id == miss.doc_id,
            col(Miss.category).is_not(None),
            Miss.triage_id != miss.triage_id,
        )
        .order_by(col(Miss.labelled_at).desc())
        .limit(1)
    ).first()
    if row is None or row[0] is None:
        return None
    return row[0], row[1]
