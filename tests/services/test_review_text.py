"""The review card's document text and snippets end between words (app/services/review.py);
the page says "…" after a cut."""

from __future__ import annotations

import pytest

from app.services.views.review import head_between_words


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("rate limiting for workspaces", 100, ("rate limiting for workspaces", False)),
        ("rate limiting for workspaces", 28, ("rate limiting for workspaces", False)),
        ("rate limiting for workspaces", 16, ("rate limiting", True)),
        ("rate limiting for workspaces", 13, ("rate limiting", True)),
        ("rate limiting for workspaces", 14, ("rate limiting", True)),
        ("supercalifragilistic", 5, ("super", True)),
        ("", 5, ("", False)),
    ],
)
def test_the_head_ends_between_words(text: str, limit: int, expected: tuple[str, bool]) -> None:
    assert head_between_words(text, limit) == expected


def test_the_head_is_never_longer_than_the_limit() -> None:
    text = "word " * 1000
    for limit in (1, 7, 50, 4000):
        head, cut = head_between_words(text, limit)
        assert len(head) <= limit
        assert cut
        assert text.startswith(head)
        assert not head.endswith(" ")
