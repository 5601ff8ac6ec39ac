"""The copy helpers: singular and plural, numbers, human names of identifiers."""

from __future__ import annotations

import pytest

from app.eval.diagnosis import Diagnosis
from app.models import CANT_TELL, MissState
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
    identifiers = [*Diagnosis, *MissState, *DEFAULT_CAUSES, "other", CANT_TELL]
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
