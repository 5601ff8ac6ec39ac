"""Text normalisation and word shingles for the near-duplicate detector (``app.eval.dedup``).

Normalisation, in this order:

1. Unicode NFKC (ligatures, full-width forms and the like become their plain letters);
2. case folded (``str.casefold``);
3. soft hyphens (U+00AD) dropped, and a word hyphenated across a line break joined: a letter or
   digit, ``-`` (or U+2010 / U+2011), optional spaces, a line break, optional spaces, a letter or
   digit -> the two parts glued (``"retriev-\\nal"`` -> ``"retrieval"``); a hyphen that is not at
   a line break stays a word break (``"state-of-the-art"`` -> ``"state of the art"``);
4. punctuation removed: every character that is neither a letter, a digit nor white space (and
   the underscore) becomes a word break;
5. white space collapsed: the words are what ``str.split()`` gives.

Shingles: the word ``size``-grams (default 5) of the normalised text, each hashed to a 64-bit
integer; a document's shingle set is a sorted array of unique ``uint64``. A document of 1 to
``size - 1`` words has one shingle, its whole word sequence; an empty one (no word after
normalisation) has none and is never a candidate. Hashes are stable across processes and runs
(BLAKE2b of each word, then an order-sensitive 64-bit mix of the ``size`` word hashes and a
splitmix64 finaliser), so a shingle set depends on the text alone.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from hashlib import blake2b

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]

# The hyphen first (a fast scan for it), then the letter or digit before it, looked behind.
_HYPHEN_BREAK = re.compile(r"[-\u2010\u2011](?<=[^\W_].)[ \t]*\r?\n[ \t]*(?=[^\W_])")
_PUNCTUATION = re.compile(r"[^\w\s]|_")
_ASCII_PUNCTUATION = {c: " " for c in range(128) if _PUNCTUATION.match(chr(c))}
_MIX = np.uint64(0x9E3779B97F4A7C15)
_F1 = np.uint64(0xBF58476D1CE4E5B9)
_F2 = np.uint64(0x94D049BB133111EB)
_SHORT = np.uint64(0xD6E8FEB86659FD93)
_MASK = (1 << 64) - 1


def normalise(text: str) -> str:
    """The text as shingled: NFKC, case folded, hyphenation at line breaks joined,
    punctuation removed, white space collapsed to single spaces (no leading/trailing)."""
    return " ".join(_clean(text).split())


def normalise_slowly(text: str) -> str:
    """``normalise`` without the ASCII fast path (what the fast path must equal)."""
    text = unicodedata.normalize("NFKC", text).casefold().replace("\u00ad", "")
    text = _HYPHEN_BREAK.sub("", text)
    return " ".join(_PUNCTUATION.sub(" ", text).split())


def _clean(text: str) -> str:
    # ASCII text: NFKC is the identity, casefold is lower, punctuation is a translate table
    if text.isascii():
        text = text.lower()
    else:
        text = unicodedata.normalize("NFKC", text).casefold().replace("\u00ad", "")
    if "\n" in text and ("-" in text or "\u2010" in text or "\u2011" in text):
        text = _HYPHEN_BREAK.sub("", text)
    if text.isascii():
        return text.translate(_ASCII_PUNCTUATION)
    return _PUNCTUATION.sub(" ", text)


def _word_hash(word: str) -> int:
    return int.from_bytes(blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")


def _finalise(h: U64) -> U64:
    h = h ^ (h >> np.uint64(30))
    h = h * _F1
    h = h ^ (h >> np.uint64(27))
    h = h * _F2
    return h ^ (h >> np.uint64(31))


class Shingler:
    """Turns texts into shingle sets; keeps a cache of word hashes (one entry per distinct
    word seen, so its size is the vocabulary's)."""

    def __init__(self, size: int = 5) -> None:
        if size < 1:
            raise ValueError("the shingle size must be at least 1")
        self.size = size
        self._words: dict[str, int] = {}  # word -> its 64-bit hash (BLAKE2b)
        self.short = 0  # documents of 1 to size - 1 words seen

    def batch(self, texts: Sequence[str]) -> tuple[U64, npt.NDArray[np.int64]]:
        """The shingle sets of ``texts``: one flat ``uint64`` array and offsets (length
        ``len(texts) + 1``); document i's sorted unique shingles are
        ``flat[offsets[i]:offsets[i + 1]]`` (empty for an empty document)."""
        size = self.size
        lookup = self._words.__getitem__
        hashes: list[int] = []
        lengths = np.zeros(len(texts), dtype=np.int64)
        for i, text in enumerate(texts):
            words = _clean(text).split()
            lengths[i] = len(words)
            mark = len(hashes)
            try:
                hashes.extend(map(lookup, words))  # a plain dict's look-up: the fast path
            except KeyError:
                del hashes[mark:]
                for w in words:
                    if w not in self._words:
                        self._words[w] = _word_hash(w)
                hashes.extend(map(lookup, words))
        flat_words = np.array(hashes, dtype=np.uint64)
        count = len(texts)
        starts = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        docs = np.repeat(np.arange(count, dtype=np.int64), lengths)
        position = np.arange(flat_words.size, dtype=np.int64) - np.repeat(starts[:-1], lengths)
        # n-grams starting at a word that has size - 1 words after it in its own document
        grams = max(flat_words.size - size + 1, 0)
        valid = np.nonzero(position[:grams] <= (np.repeat(lengths - size, lengths))[:grams])[0]
        h = flat_words[valid].copy()
        for k in range(1, size):
            h = (h * _MIX) ^ flat_words[valid + k]
        parts_h = [_finalise(h)]
        parts_d = [docs[valid]]
        short = np.nonzero((lengths > 0) & (lengths < size))[0]
        self.short += int(short.size)
        if short.size:
            short_h = np.empty(short.size, dtype=np.uint64)
            for j, doc in enumerate(short.tolist()):
                seq = hashes[starts[doc] : starts[doc + 1]]
                acc = seq[0]
                for value in seq[1:]:
                    acc = ((acc * int(_MIX)) & _MASK) ^ value
                short_h[j] = acc ^ ((int(_SHORT) * len(seq)) & _MASK)
            parts_h.append(_finalise(short_h))
            parts_d.append(short)
        all_h = np.concatenate(parts_h)
        all_d = np.concatenate(parts_d)
        if short.size:  # the short documents' shingles to their place: by document
            by_doc = np.argsort(all_d, kind="stable")
            all_h, all_d = all_h[by_doc], all_d[by_doc]
        bounds = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(np.bincount(all_d, minlength=count), out=bounds[1:])
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            if hi - lo > 1:
                all_h[lo:hi].sort()  # in place, one document at a time (a lexsort is slower)
        keep = np.ones(all_h.size, dtype=bool)
        if all_h.size > 1:
            keep[1:] = (all_h[1:] != all_h[:-1]) | (all_d[1:] != all_d[:-1])
        all_h, all_d = all_h[keep], all_d[keep]
        offsets = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(np.bincount(all_d, minlength=count), out=offsets[1:])
        return all_h, offsets

    def shingles(self, text: str) -> U64:
        """One text's shingle set (sorted unique ``uint64``)."""
        flat, _ = self.batch([text])
        return flat


def jaccard(a: U64, b: U64) -> float:
    """Exact Jaccard similarity of two shingle sets given as sorted unique arrays:
    |a & b| / |a | b| (0 when both are empty)."""
    if a.size == 0 or b.size == 0:
        return 0.0
    if a.size > b.size:
        a, b = b, a
    where = np.searchsorted(b, a)
    where[where == b.size] = 0
    common = int(np.count_nonzero(b[where] == a))
    return common / (a.size + b.size - common)
