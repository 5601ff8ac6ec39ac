"""A generated corpus with known near-duplicates (seeded), for the detector's tests and benchmark.

Originals: about 200 words each, sampled from a Zipf distribution over a generated vocabulary of
pseudo-words, in sentences (capitalised, commas and full stops) broken into lines of ~12 words,
so two originals share next to no word 5-gram. Copies of an original, one kind each:

* ``exact``: the same text;
* ``layout``: white space and case changed (double spaces, tabs, lines re-broken, case flipped);
* ``hyphenated``: words broken at line ends ("retriev-\\nal");
* ``boilerplate``: PDF header and footer lines and a page number between pages;
* ``typos``: two or three character edits (substitution, deletion, insertion, swap);
* ``truncated``: the first 88-93% of the words only;
* combinations: layout and hyphenation with one of boilerplate, one typo, or a truncation.

``truth`` maps every document id to its group (an original and its copies); ids are assigned
after shuffling, so neither order nor id tells a copy from its original.
"""

from __future__ import annotations

import random
import string
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate

KINDS = (
    "exact",
    "layout",
    "hyphenated",
    "boilerplate",
    "typos",
    "truncated",
    "boilerplate+layout+hyphenated",
    "typo+layout+hyphenated",
    "hyphenated+truncated",
)


@dataclass
class DupeCorpus:
    docs: list[dict[str, str]]  # BEIR records: _id, title, text
    truth: dict[str, str]  # doc id -> group id
    kinds: dict[str, str] = field(default_factory=dict)  # copy id -> its kind

    def texts(self) -> list[tuple[str, str]]:
        return [(d["_id"], d["text"]) for d in self.docs]


def vocabulary(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 10))))
    return sorted(words)


class Writer:
    """Sentences from a Zipf sample of a vocabulary."""

    def __init__(self, rng: random.Random, vocab: list[str], exponent: float = 1.0) -> None:
        self.rng = rng
        self.vocab = vocab
        self.cum = list(accumulate(1.0 / (rank + 1) ** exponent for rank in range(len(vocab))))

    def words(self, count: int) -> list[str]:
        return self.rng.choices(self.vocab, cum_weights=self.cum, k=count)

    def text(self, count: int) -> str:
        return layout_words(self.rng, self.words(count))


def layout_words(rng: random.Random, words: list[str], per_line: int = 12) -> str:
    """Sentences (capital first word, comma or full stop) in lines of about ``per_line``."""
    out: list[str] = []
    until = rng.randint(8, 20)
    for i, word in enumerate(words):
        if until == 0 or i == len(words) - 1:
            word += "."
            until = rng.randint(8, 20)
        elif rng.random() < 0.06:
            word += ","
        if i == 0 or out[-1].endswith("."):
            word = word[:1].upper() + word[1:]
        out.append(word)
        until -= 1
    lines = [" ".join(out[i : i + per_line]) for i in range(0, len(out), per_line)]
    return "\n".join(lines)


def relayout(rng: random.Random, text: str) -> str:
    words = text.split()
    out = []
    for word in words:
        roll = rng.random()
        word = word.upper() if roll < 0.1 else word.lower() if roll < 0.3 else word
        out.append(word + rng.choice([" ", " ", "  ", "\t", "\n", " \n "]))
    return "   " + "".join(out) + "\n\n"


def hyphenate(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    for i in range(len(lines) - 1):
        head, _, last = lines[i].rpartition(" ")
        if len(last) >= 6 and last.isalpha() and rng.random() < 0.8:
            cut = rng.randint(2, len(last) - 2)
            lines[i] = f"{head} {last[:cut]}-"
            lines[i + 1] = last[cut:] + " " + lines[i + 1]
    return "\n".join(lines)


def boilerplate(rng: random.Random, text: str, pages: int = 8) -> str:
    lines = text.split("\n")
    journal = rng.choice(["Journal of Applied Retrieval", "Proc. Workshop on Text", "Preprint"])
    out = [f"{journal} Vol. {rng.randint(1, 40)} ({rng.randint(1990, 2025)})"]
    total = (len(lines) + pages - 1) // pages
    for i, line in enumerate(lines):
        out.append(line)
        if (i + 1) % pages == 0 and i + 1 < len(lines):
            page = (i + 1) // pages
            out += [f"Page {page} of {total}", "", journal]
    out.append(f"Page {total} of {total}")
    return "\n".join(out)


def typos(rng: random.Random, text: str, count: int) -> str:
    chars = list(text)
    for _ in range(count):
        while True:
            at = rng.randrange(len(chars) - 1)
            if chars[at].isalpha() and chars[at + 1].isalpha():
                break
        edit = rng.choice(["sub", "del", "ins", "swap"])
        letter = rng.choice(string.ascii_lowercase)
        if edit == "sub":
            chars[at] = letter
        elif edit == "del":
            del chars[at]
        elif edit == "ins":
            chars.insert(at, letter)
        else:
            chars[at], chars[at + 1] = chars[at + 1], chars[at]
    return "".join(chars)


def truncate(rng: random.Random, text: str, low: float = 0.88, high: float = 0.93) -> str:
    words = text.split(" ")
    return " ".join(words[: int(len(words) * rng.uniform(low, high))])


def make_copy(rng: random.Random, text: str, kind: str) -> str:
    for step in kind.split("+"):
        if step == "layout":
            text = relayout(rng, text)
        elif step == "hyphenated":
            text = hyphenate(rng, text)
        elif step == "boilerplate":
            text = boilerplate(rng, text)
        elif step == "typos":
            text = typos(rng, text, rng.randint(2, 3))
        elif step == "typo":
            text = typos(rng, text, 1)
        elif step == "truncated":
            text = truncate(rng, text)
        elif step != "exact":
            raise ValueError(step)
    return text


def make_corpus(
    originals: int,
    *,
    copy_share: float = 0.1,
    seed: int = 7,
    words: int = 200,
    vocab_size: int = 30_000,
    kinds: Iterable[str] = KINDS,
) -> DupeCorpus:
    """``originals`` distinct documents; about ``copy_share`` of the corpus are copies (one to
    three per copied original, kinds in turn)."""
    rng = random.Random(seed)
    writer = Writer(rng, vocabulary(rng, vocab_size))
    kinds = list(kinds)
    drafts: list[tuple[str, str, str]] = []  # group, kind, text
    copies_wanted = int(originals * copy_share / (1 - copy_share))
    made = 0
    for g in range(originals):
        group = f"g{g}"
        text = writer.text(rng.randint(words - 20, words + 20))
        drafts.append((group, "original", text))
        if made < copies_wanted and rng.random() < copy_share * 1.2:
            for _ in range(min(rng.choice([1, 1, 1, 2, 3]), copies_wanted - made)):
                kind = kinds[made % len(kinds)]
                drafts.append((group, kind, make_copy(rng, text, kind)))
                made += 1
    rng.shuffle(drafts)
    docs, truth, kinds_of = [], {}, {}
    for n, (group, kind, text) in enumerate(drafts):
        doc_id = f"doc{n:06d}"
        docs.append({"_id": doc_id, "title": f"Title {group}", "text": text})
        truth[doc_id] = group
        if kind != "original":
            kinds_of[doc_id] = kind
    return DupeCorpus(docs=docs, truth=truth, kinds=kinds_of)


def topic_documents(count: int, *, seed: int = 11, words: int = 200) -> list[tuple[str, str]]:
    """Distinct documents on one subject: the same few topic words and function words, in
    different sentences (no document copies another)."""
    rng = random.Random(seed)
    topic = vocabulary(rng, 60)
    function = ["the", "of", "and", "in", "a", "to", "is", "for", "with", "on", "that", "by"]
    docs = []
    for i in range(count):
        seq = [
            rng.choice(topic) if rng.random() < 0.55 else rng.choice(function) for _ in range(words)
        ]
        docs.append((f"topic{i:03d}", layout_words(rng, seq)))
    return docs


def pair_quality(
    truth: Mapping[str, str], clusters: Mapping[str, Iterable[str]]
) -> dict[str, float]:
    """Pair precision and recall of predicted clusters against true groups: a pair is two
    documents in one cluster (a document in no predicted cluster is alone)."""

    def pairs(n: int) -> int:
        return n * (n - 1) // 2

    true_pairs = sum(pairs(n) for n in Counter(truth.values()).values())
    predicted = correct = 0
    for members in clusters.values():
        members = list(members)
        predicted += pairs(len(members))
        correct += sum(pairs(n) for n in Counter(truth[m] for m in members).values())
    return {
        "true_pairs": true_pairs,
        "predicted_pairs": predicted,
        "correct_pairs": correct,
        "precision": correct / predicted if predicted else 1.0,
        "recall": correct / true_pairs if true_pairs else 1.0,
    }
