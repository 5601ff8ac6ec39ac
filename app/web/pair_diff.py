"""The differences of two documents, as the pair-review page marks them: a word-level diff
(``difflib.SequenceMatcher`` over whitespace-split words). Words only in A are marked on A's
side, words only in B on B's side. Plain data: the template escapes every word."""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

#: The most words of each side compared (SequenceMatcher is quadratic in the worst case); the
#: words past it are shown unmarked, and the page says so.
MAX_WORDS = 3_000

Kind = Literal["same", "only"]


@dataclass(frozen=True, slots=True)
class Segment:
    """Consecutive words of one side, shared with the other side or only on this one."""

    text: str
    kind: Kind


@dataclass(frozen=True, slots=True)
class PairDiff:
    a: list[Segment]
    b: list[Segment]
    #: Words marked on each side.
    only_a: int
    only_b: int
    #: True when a side had more than MAX_WORDS words: the rest is shown without marks.
    capped: bool


def _segments(
    words: list[str], spans: list[tuple[int, int, Kind]], rest: list[str]
) -> list[Segment]:
    out: list[Segment] = []
    for start, end, kind in spans:
        if start == end:
            continue
        text = " ".join(words[start:end])
        if out and out[-1].kind == kind:
            out[-1] = Segment(out[-1].text + " " + text, kind)
        else:
            out.append(Segment(text, kind))
    if rest:
        text = " ".join(rest)
        if out and out[-1].kind == "same":
            out[-1] = Segment(out[-1].text + " " + text, "same")
        else:
            out.append(Segment(text, "same"))
    return out


def word_diff(a: str, b: str, *, max_words: int = MAX_WORDS) -> PairDiff:
    """The two texts as segments of words, the words only in one of them marked."""
    words_a, words_b = a.split(), b.split()
    head_a, head_b = words_a[:max_words], words_b[:max_words]
    matcher = SequenceMatcher(None, head_a, head_b, autojunk=False)
    spans_a: list[tuple[int, int, Kind]] = []
    spans_b: list[tuple[int, int, Kind]] = []
    only_a = only_b = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            spans_a.append((i1, i2, "same"))
            spans_b.append((j1, j2, "same"))
            continue
        spans_a.append((i1, i2, "only"))
        spans_b.append((j1, j2, "only"))
        only_a += i2 - i1
        only_b += j2 - j1
    return PairDiff(
        a=_segments(head_a, spans_a, words_a[max_words:]),
        b=_segments(head_b, spans_b, words_b[max_words:]),
        only_a=only_a,
        only_b=only_b,
        capped=len(words_a) > max_words or len(words_b) > max_words,
    )
