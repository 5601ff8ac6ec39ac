"""Content terms of queries and documents: the one analyzer behind the vocabulary hints and the
terms marked on the review page.

Lowercased word tokens, English stop words and one-character tokens removed, stemmed with the
Snowball English stemmer (PyStemmer), so "throttling" and "throttled" are one term and "rate
limiting" shares "limit" with "rate limits".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import Stemmer

_WORD = re.compile(r"\w+", re.UNICODE)

#: Function words that carry no topic (a short list on purpose: a query's content words, such
#: as "not", "limit" or "key", must survive).
_STOP_TEXT = """
    a about after all am an and any are as at be been being but by can could did do does doing
    for from had has have having he her here hers him his how i if in into is it its itself me
    my myself of on once only or our ours out over own she should so some such than that the
    their theirs them then there these they this those through to too under until up very was
    we were what when where which while who whom why will with would you your yours yourself
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def stem(word: str) -> str:
    """The Snowball English stem of a lowercased word."""
    return str(_stemmer().stemWord(word))


@dataclass(frozen=True, slots=True)
class Term:
    """A content word as written (first occurrence, lowercased) and its stem."""

    word: str
    stem: str


def content_terms(text: str | None) -> list[Term]:
    """The distinct content terms of a text, in order of first appearance (one per stem)."""
    seen: set[str] = set()
    terms: list[Term] = []
    for match in _WORD.finditer(text or ""):
        word = match.group().lower()
        if len(word) < 2 or word in STOP_WORDS:
            continue
        root = stem(word)
        if root not in seen:
            seen.add(root)
            terms.append(Term(word, root))
    return terms


def stems(text: str | None) -> set[str]:
    """Every stem of a text's words (stop words included: a document is searched, not read)."""
    words = {m.group().lower() for m in _WORD.finditer(text or "")}
    return set(_stemmer().stemWords(sorted(words)))


def marked(text: str, query_stems: Iterable[str]) -> list[tuple[str, bool]]:
    """The text as (segment, is_query_term) pieces, query terms matched by stem; the template
    escapes every piece."""
    wanted = set(query_stems)
    pieces: list[tuple[str, bool]] = []
    last = 0
    for match in _WORD.finditer(text):
        word = match.group().lower()
        if len(word) < 2 or word in STOP_WORDS or stem(word) not in wanted:
            continue
        if match.start() > last:
            pieces.append((text[last : match.start()], False))
        pieces.append((match.group(), True))
        last = match.end()
    if last < len(text):
        pieces.append((text[last:], False))
    return pieces
