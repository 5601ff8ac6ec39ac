"""What a reviewer needs to decide in seconds: the query, the missing document with the query's
terms marked, where the run put it, what won instead, sibling chunks, an earlier label."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sqlmodel import Session, col, select

from app.models import Document, GoldenQuery, GoldenSet, Miss, Run, RunQuery, Triage, User
from app.services import queue
from app.services.runs import head_of

#: Candidates shown beside the miss ("what won instead").
CANDIDATES_SHOWN = 10
TEXT_SHOWN = 4000
SNIPPET = 220
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "not",
        "no",
    )
)


def query_terms(text: str | None) -> set[str]:
    """Content words of the query, lowercased (stop words and one-letter words dropped)."""
    return {
        w for w in (m.lower() for m in _WORD.findall(text or "")) if len(w) > 1 and w not in _STOP
    }


def _matches(word: str, terms: set[str]) -> bool:
    low = word.lower()
    if low in terms:
        return True
    # A crude stem: a shared prefix of five letters ("throttling" ~ "throttled").
    return len(low) >= 5 and any(len(t) >= 5 and t[:5] == low[:5] for t in terms)


def marked(text: str, terms: set[str]) -> list[tuple[str, bool]]:
    """The text as (segment, is_query_term) pieces; the template escapes every piece."""
    pieces: list[tuple[str, bool]] = []
    last = 0
    for match in _WORD.finditer(text):
        if _matches(match.group(), terms):
            if match.start() > last:
                pieces.append((text[last : match.start()], False))
            pieces.append((match.group(), True))
            last = match.end()
    if last < len(text):
        pieces.append((text[last:], False))
    return pieces


@dataclass
class Candidate:
    rank: int
    doc_id: str
    title: str
    snippet: str
    relevant: bool


@dataclass
class ReviewCard:
    miss: Miss
    query_text: str | None
    terms: set[str]
    document: Document | None
    title: list[tuple[str, bool]]
    text: list[tuple[str, bool]]
    truncated: bool
    where: str
    candidates: list[Candidate]
    siblings: list[tuple[Document, bool]] = field(default_factory=list)
    missing_terms: list[str] = field(default_factory=list)
    suggestion: tuple[str, str] | None = None


def _snippet(text: str) -> str:
    return (
        text
        if len(text) <= SNIPPET
        else text[:SNIPPET].rsplit(" ", 1)[0] + "\N{HORIZONTAL ELLIPSIS}"
    )


def where_the_run_put_it(miss: Miss, retrieved: int | None) -> str:
    if miss.rank is not None:
        return f"rank {miss.rank} of {retrieved}" if retrieved else f"rank {miss.rank}"
    if not retrieved:
        return "not retrieved: the run returned nothing for this query"
    return f"not retrieved in the top {retrieved}"


def build_card(
    *, session: Session, miss: Miss, triage: Triage, run: Run, golden: GoldenSet
) -> ReviewCard:
    text = session.exec(
        select(GoldenQuery.text).where(
            GoldenQuery.golden_set_id == golden.id, GoldenQuery.qid == miss.qid
        )
    ).first()
    terms = query_terms(text)
    document = session.exec(
        select(Document).where(Document.golden_set_id == golden.id, Document.doc_id == miss.doc_id)
    ).first()
    retrieved = session.exec(
        select(RunQuery.retrieved).where(RunQuery.run_id == run.id, RunQuery.qid == miss.qid)
    ).first()
    head = head_of(session=session, run=run, qid=miss.qid)[:CANDIDATES_SHOWN]
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
            snippet=(docs[doc_id].text[:SNIPPET] if doc_id in docs else ""),
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
    body = document.text if document else ""
    seen = {w.lower() for w in _WORD.findall((document.title + " " + body) if document else "")}
    missing = sorted(t for t in terms if not any(_matches(w, {t}) for w in seen))
    return ReviewCard(
        miss=miss,
        query_text=text,
        terms=terms,
        document=document,
        title=marked(document.title, terms) if document else [],
        text=marked(body[:TEXT_SHOWN], terms),
        truncated=len(body) > TEXT_SHOWN,
        where=where_the_run_put_it(miss, retrieved),
        candidates=candidates,
        siblings=siblings,
        missing_terms=missing if document else [],
        suggestion=earlier_label(session=session, miss=miss, golden=golden),
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


def progress(*, session: Session, triage: Triage, user: User) -> queue.Progress:
    return queue.progress(session=session, triage=triage, user=user)
