"""The copy helpers: singular and plural, numbers, human names of identifiers."""

from __future__ import annotations

import pytest

from app.eval.diagnosis import Diagnosis
from app.models import CANT_TELL, LabelAction, MissState
from app.models.golden import DEFAULT_CAUSES
from app.web import copy


@pytest.mark.parametrize(
    ("n", "noun", "expected"),
    [
        (0, "miss", "0 misses"),
        (1, "miss", "1 miss"),
        (2, "miss", "2 misses"),
        (1, "query", "1 query"),
        (3, "query", "3 queries"),
        (1, "reviewer", "1 reviewer"),
        (12577, "line", "12,577 lines"),
        (2, "day", "2 days"),
        (2, "match", "2 matches"),
        (1, "box", "1 box"),
        (5, "box", "5 boxes"),
    ],
)
def test_count_agrees_with_the_number(n: int, noun: str, expected: str) -> None:
    assert copy.count(n, noun) == expected


def test_agree_picks_the_verb_form() -> None:
    assert f"1 {copy.agree(1, 'is')} with other reviewers" == "1 is with other reviewers"
    assert f"2 {copy.agree(2, 'is')} with other reviewers" == "2 are with other reviewers"
    assert copy.agree(2, "person", "people") == "people"
    assert copy.agree(1, "person", "people") == "person"


def test_numbers_read_one_way() -> None:
    assert copy.number(1234567) == "1,234,567"
    assert copy.number(0) == "0"
    assert copy.number(0.5, digits=2) == "0.50"
    assert copy.number(None) == "\N{EN DASH}"


def test_every_identifier_the_product_stores_has_a_name_and_a_meaning() -> None:
    identifiers = [*Diagnosis, *MissState, *DEFAULT_CAUSES, "other", CANT_TELL, *LabelAction]
    for identifier in identifiers:
        term = copy.term(str(identifier))
        assert term.meaning, identifier
        assert "_" not in term.label, identifier
        assert term.label != identifier, identifier
        assert term.label[0].isupper(), identifier


def test_a_golden_sets_own_cause_reads_as_words() -> None:
    assert copy.label("stale_embeddings") == "Stale embeddings"
    assert copy.meaning("stale_embeddings") == ""
    assert copy.label(None) == "Unlabelled"


def test_hyphenated_causes_read_as_words() -> None:
    assert copy.label("stale-embeddings") == "Stale embeddings"


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("rate limiting for workspaces", 100, "rate limiting for workspaces"),
        ("rate limiting for workspaces", 28, "rate limiting for workspaces"),
        # cut inside "for": back to the space before it
        ("rate limiting for workspaces", 16, "rate limiting\N{HORIZONTAL ELLIPSIS}"),
        # cut exactly at the end of a word: the word stays
        ("rate limiting for workspaces", 13, "rate limiting\N{HORIZONTAL ELLIPSIS}"),
        # no punctuation or space left before the ellipsis
        ("limits, quotas and keys", 9, "limits\N{HORIZONTAL ELLIPSIS}"),
        ("one. two three", 6, "one\N{HORIZONTAL ELLIPSIS}"),
        # one word longer than the limit: cut inside it, as nothing else can be done
        ("supercalifragilistic", 5, "super\N{HORIZONTAL ELLIPSIS}"),
        ("   supercalifragilistic", 8, "   super\N{HORIZONTAL ELLIPSIS}"),
        ("line one\nline two", 11, "line one\N{HORIZONTAL ELLIPSIS}"),
        ("", 5, ""),
        (None, 5, ""),
    ],
)
def test_truncate_words_cuts_between_words(text: str | None, limit: int, expected: str) -> None:
    assert copy.truncate_words(text, limit) == expected


@pytest.mark.parametrize("limit", [1, 7, 20, 50])
def test_truncate_words_never_ends_inside_a_word(limit: int) -> None:
    text = "the answer is split across chunks and no chunk scores well alone"
    cut = copy.truncate_words(text, limit)
    assert len(cut) <= limit + 1
    if cut != text:
        kept = cut.removesuffix("\N{HORIZONTAL ELLIPSIS}")
        assert cut.endswith("\N{HORIZONTAL ELLIPSIS}")
        assert text.startswith(kept)
        # what follows the kept text in the original starts a new word (or the one word
        # longer than the limit was cut)
        assert text[len(kept)] in " ,." or " " not in kept


def test_truncate_words_refuses_a_limit_below_one() -> None:
    with pytest.raises(ValueError, match="limit"):
        copy.truncate_words("text", 0)


def test_the_words_filter_is_registered() -> None:
    from app.web.render import templates

    assert templates.env.filters["words"] is copy.truncate_words


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ("no run 999", "No run 999."),
        ("depth must be a whole number, not 'abc'", "Depth must be a whole number, not 'abc'."),
        ("k must be at most the depth", "k must be at most the depth."),
        ("run.trec line 3: bad score", "run.trec line 3: bad score."),
        ("bm25 has no triage", "bm25 has no triage."),
        ("'x' is not a cause", "'x' is not a cause."),
        ("Already a sentence.", "Already a sentence."),
        ("3 things in this request need fixing:", "3 things in this request need fixing:"),
        ("is it?", "Is it?"),
        ("  ", ""),
        (None, ""),
    ],
)
def test_a_message_is_shown_as_a_sentence(message: str | None, shown: str) -> None:
    assert copy.sentence(message) == shown
