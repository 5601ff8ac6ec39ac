"""Words for people: singular and plural, numbers formatted one way, and the human name and
meaning of each identifier the product stores (diagnoses, miss states, causes). Registered as
Jinja filters in app/web/render.py; pure, so tests call them directly."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Plurals that are not the singular + "s".
IRREGULAR = {
    "miss": "misses",
    "query": "queries",
    "is": "are",
    "was": "were",
    "has": "have",
    "this": "these",
    "match": "matches",
    "batch": "batches",
    "index": "indexes",
}


def plural_of(word: str) -> str:
    """The plural of an English noun or verb form the product uses."""
    if word in IRREGULAR:
        return IRREGULAR[word]
    if word.endswith(("s", "x", "sh", "ch")):
        return word + "es"
    if word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def count(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun in the right number: ``count(1, "miss")`` is "1 miss",
    ``count(1200, "miss")`` is "1,200 misses"."""
    return f"{number(n)} {agree(n, singular, plural)}"


def agree(n: int, singular: str, plural: str | None = None) -> str:
    """The word alone, in the number ``n`` asks for ("are" for 2, "is" for 1)."""
    if n == 1:
        return singular
    return plural if plural is not None else plural_of(singular)


def number(value: int | float | None, digits: int = 0) -> str:
    """A count with thousands separators ("12,577"); a float with ``digits`` decimals;
    None as an en dash (no value, not zero)."""
    if value is None:
        return "\N{EN DASH}"
    if digits:
        return f"{value:,.{digits}f}"
    return f"{round(value):,}"


#: Where a message already ends as a sentence, or leads on to what follows it.
_ENDS = (".", "!", "?", ":", "\N{HORIZONTAL ELLIPSIS}")


def sentence(text: str | None) -> str:
    """A service's message ("no run 999", "depth must be a whole number, not 'abc'") as a
    page says it: a capital first letter and a full stop ("No run 999."). A message that
    opens on a name (a one-letter parameter such as ``k``, a quoted value, a file name such
    as ``run.trec``, an id such as ``bm25``) keeps its first word as written; one that ends
    on ``.``, ``?``, ``!``, ``:`` or an ellipsis gets no second stop."""
    text = (text or "").strip()
    if not text:
        return ""
    first = text.split(maxsplit=1)[0].rstrip(",;:")
    if len(first) > 1 and first.isalpha() and first.islower():
        text = text[0].upper() + text[1:]
    return text if text.endswith(_ENDS) else f"{text}."


ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"
#: The last run of whitespace and the partial word after it.
_LAST_WORD = re.compile(r"\s+\S*$")
#: What a cut sentence should not end on before its ellipsis.
_TRAILING = " \t\n,;:.-\N{EN DASH}\N{EM DASH}"


def truncate_words(text: str | None, limit: int) -> str:
    """``text`` unchanged when it has at most ``limit`` characters; else cut at the last
    whitespace before ``limit`` (never inside a word), trailing punctuation dropped, with "…"
    after it. A single word longer than ``limit`` is cut at ``limit``. None reads as "".

    ``truncate_words("rate limiting for workspaces", 15)`` is "rate limiting…"."""
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    if text is None:
        return ""
    if len(text) <= limit:
        return text
    head = text[:limit]
    if not text[limit].isspace():
        partial = _LAST_WORD.search(head)
        if partial is not None and head[: partial.start()].strip():
            head = head[: partial.start()]
    return head.rstrip(_TRAILING) + ELLIPSIS


@dataclass(frozen=True)
class Term:
    """How an identifier reads on a page: its name and what it means."""

    label: str
    meaning: str


TERMS: dict[str, Term] = {
    # per-query diagnosis (app/eval/diagnosis.py)
    "ranking": Term(
        "Ranking",
        "The relevant documents are in the candidates but ordered badly: "
        "look at the reranker or the fusion weights.",
    ),
    "candidate_generation": Term(
        "Candidate generation",
        "Relevant documents are missing from the candidates while the top is good: "
        "look at the analyzer, chunking, query expansion or the dense retriever.",
    ),
    "ingestion": Term(
        "Ingestion",
        "Both recall and nDCG are low: check first whether the documents are in the index.",
    ),
    "fine": Term("Fine", "Recall and nDCG are both high: nothing to do for this query."),
    # the stages of a miss (app/services/queue/lifecycle.py) and its stored states
    "open": Term("Unlabelled", "On the queue, waiting for a reviewer's label."),
    "reviewing": Term(
        "Waiting for another reviewer",
        "Double review: a reviewer's blind label is in, another reviewer's is wanted.",
    ),
    "final": Term("Final", "The miss has its final label in a named cause."),
    "labelled": Term("Labelled", "A reviewer gave this miss its cause."),
    "covered": Term(
        "Covered by a duplicate",
        "A copy of the document (same duplicate cluster) is in the candidates: "
        "the run delivered its evidence. Off the queue unless a lead puts it on.",
    ),
    "disputed": Term(
        "Disputed",
        "Its reviewers disagree (or one could not tell): it waits for an adjudicator.",
    ),
    "carried": Term(
        "Carried",
        "The series' previous triage gave this (query, document) pair its cause: the label "
        "carries forward, off the queue, until a lead sends it back.",
    ),
    "unlabelled": Term("Unlabelled", "No reviewer has labelled this miss yet."),
    # the default causes and the fallback
    "not-indexed": Term(
        "Not indexed", "The document never reached the index: ingestion skipped it."
    ),
    "vocabulary-mismatch": Term(
        "Vocabulary mismatch",
        'The query and the document use different words for one thing ("throttling" and '
        '"rate limiting").',
    ),
    "chunk-boundary": Term(
        "Chunk boundary",
        "The answer is split across chunks and no chunk scores well alone.",
    ),
    "other": Term("Other", "None of the named causes; the note says what it is."),
    "cant-tell": Term("Can't tell", "The reviewer could not decide; an adjudicator will."),
    # what a final label rests on
    "single": Term("One reviewer", "The label of the only reviewer asked."),
    "agreed": Term("Agreed", "Every reviewer asked gave the same label."),
    "adjudicated": Term("Adjudicated", "An adjudicator chose the label after a disagreement."),
    # the audit trail's actions (app/models/triage.py LabelAction)
    "label": Term("Labelled", "A reviewer gave the miss its cause."),
    "relabel": Term("Relabelled", "A lead changed the cause of a labelled miss."),
    "release": Term("Released", "The lease was given up; the miss went back on the queue."),
    "skip": Term("Skipped", "A reviewer passed the miss on to others, saying why."),
    "take_back": Term("Taken back", "A reviewer took back a miss they had skipped."),
    "undo": Term("Undone", "The reviewer took their label back."),
    "review": Term("Reviewed", "One reviewer's label on a double-reviewed miss; not final alone."),
    "agree": Term("Agreed", "The reviewers gave the same label: it is final."),
    "dispute": Term("Disputed", "The reviewers disagreed (or one could not tell)."),
    "adjudicate": Term("Adjudicated", "An adjudicator gave the miss its final label."),
    "requeue": Term(
        "Sent back to the queue",
        "A lead sent a miss carrying an earlier triage's label back to the queue.",
    ),
    "include": Term(
        "Put on the queue", "A lead put this miss, covered by a duplicate, on the queue."
    ),
    "exclude": Term(
        "Taken off the queue", "A lead took this miss, covered by a duplicate, off the queue."
    ),
    "conflict": Term(
        "Refused: stale", "A label sent for an older version of the miss; kept, not applied."
    ),
    "refused": Term(
        "Refused", "A label from someone who did not hold the miss; kept, not applied."
    ),
}


def term(identifier: str | None) -> Term:
    """The human name and meaning of an identifier; an unknown one (a golden set's own
    cause) reads as itself with underscores and hyphens as spaces, capitalised."""
    if identifier is None:
        return TERMS["unlabelled"]
    known = TERMS.get(identifier)
    if known is not None:
        return known
    words = identifier.replace("_", " ").replace("-", " ").strip()
    return Term(words[:1].upper() + words[1:], "")


def label(identifier: str | None) -> str:
    """The human name of an identifier (see ``term``)."""
    return term(identifier).label


def meaning(identifier: str | None) -> str:
    """What an identifier means (empty for a golden set's own cause)."""
    return term(identifier).meaning


def phrase(identifier: str | None) -> str:
    """An identifier inside a sentence: its human name in lower case ("2 vocabulary mismatch
    misses"); a miss covered by a duplicate reads as "covered"."""
    if identifier == "covered":
        return "covered"
    return label(identifier).lower()


#: Why a miss without a final label is not the reviewer's now, in the order pages say it
#: (``app.services.queue.tally.Reason``: the same names).
WAITING_WORDS = (
    ("another_reviewer", "waits for another reviewer", "wait for another reviewer"),
    ("adjudication", "waits for adjudication", "wait for adjudication"),
    ("with_others", "is with another reviewer", "are with other reviewers"),
    ("skipped", "is skipped by you", "are skipped by you"),
    ("for_you", "is yours to take", "are yours to take"),
)


def waiting_reasons(waiting: dict[str, int]) -> list[str]:
    """ "3 wait for another reviewer", "4 wait for adjudication", "1 is skipped by you":
    each reason a person has for the misses still without a final label, counted (none
    said for a reason no miss has)."""
    return [
        f"{number(waiting[key])} {agree(waiting[key], one, many)}"
        for key, one, many in WAITING_WORDS
        if waiting.get(key)
    ]


def double_review_outcome(reviewers: int, state: str) -> str:
    """What a reviewer's label did to a double-reviewed miss, after "Saved: ...": it waits
    for another reviewer's label, it is final (the labels agree), or it goes to adjudication
    (they differ). Empty for a single review's label."""
    if reviewers < 2:
        return ""
    if state == "open":
        return " It waits for another reviewer's label."
    if state == "disputed":
        return " The labels differ: it goes to adjudication."
    return " The labels agree: it is final."
