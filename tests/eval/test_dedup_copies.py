"""Identical documents are one group before any pairing (app.eval.dedup, app.eval.dedup_exact):
n copies of one text are one cluster of exactly those documents, with the id and the figures
an independent brute force over every pair gives, and the pairs kept grow linearly with n."""

from __future__ import annotations

import itertools
import random
from hashlib import blake2b

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.eval import calibration as cal
from app.eval.dedup import DedupParams, detect
from app.eval.dedup_exact import exact_join, exact_pairs
from app.eval.dedup_text import normalise
from app.services.dedup.detector_runs import detection
from tests.support.dupe_corpus import Writer, relayout, vocabulary

THRESHOLD = 0.8
LOW = 0.6


def _words(text: str, size: int = 5) -> frozenset[tuple[str, ...]]:
    """The brute force's own shingles: word tuples of the normalised text, no hashing."""
    words = normalise(text).split()
    if 0 < len(words) < size:
        return frozenset({tuple(words)})
    return frozenset(tuple(words[i : i + size]) for i in range(len(words) - size + 1))


def brute_force(docs: list[tuple[str, str]], low: float) -> dict[tuple[str, str], float]:
    """Every pair of documents (a < b) with Jaccard >= low, compared one by one."""
    sets = {d: _words(t) for d, t in docs if _words(t)}
    out = {}
    for (a, sa), (b, sb) in itertools.combinations(sorted(sets.items()), 2):
        sim = len(sa & sb) / len(sa | sb)
        if sim >= low:
            out[a, b] = sim
    return out


def brute_clusters(pairs: dict[tuple[str, str], float], threshold: float) -> dict[str, list[str]]:
    """Connected components of the pairs at or above ``threshold``, named as DESIGN.md says:
    "c" + BLAKE2b-64 hex of the smallest member id."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            x = parent[x]
        return x

    for (a, b), sim in pairs.items():
        if sim >= threshold:
            parent[root(a)] = root(b)
    groups: dict[str, list[str]] = {}
    for doc in list(parent):
        groups.setdefault(root(doc), []).append(doc)
    return {
        "c" + blake2b(min(m).encode(), digest_size=8).hexdigest(): sorted(m)
        for m in groups.values()
    }


def expanded(result_pairs, copies: dict[str, list[str]]) -> dict[tuple[str, str], float]:
    """The document pairs ``detect``'s pairs stand for: a pair of two groups (named by their
    smallest ids) is every pair of their members; a copy's link, the pairs of its group."""
    out: dict[tuple[str, str], float] = {}
    for p in result_pairs:
        if p.similarity == 1.0 and p.doc_b in copies.get(p.doc_a, ()):
            out |= {pair: 1.0 for pair in itertools.combinations(copies[p.doc_a], 2)}
            continue
        for x in copies.get(p.doc_a, [p.doc_a]):
            for y in copies.get(p.doc_b, [p.doc_b]):
                out[min(x, y), max(x, y)] = p.similarity
    return out


def copies_corpus(
    seed: int, groups: list[int], near: list[bool], singles: int
) -> list[tuple[str, str]]:
    """Per group g: ``groups[g]`` layouts of one text (identical after normalisation), and,
    when ``near[g]``, a near-copy (the text and a few more words: similarity about 0.9);
    ``singles`` distinct texts besides. Shuffled."""
    rng = random.Random(seed)
    writer = Writer(rng, vocabulary(rng, 3000))
    docs: list[tuple[str, str]] = []
    for g, count in enumerate(groups):
        text = writer.text(120)
        docs += [(f"g{g}-{i:04d}", relayout(rng, text)) for i in range(count)]
        if near[g]:
            docs.append((f"g{g}-near", text + " " + writer.text(6)))
    docs += [(f"s{i:03d}", writer.text(120)) for i in range(singles)]
    rng.shuffle(docs)
    return docs


@pytest.mark.parametrize("n", [2, 3, 50, 3000])
def test_n_copies_are_one_cluster_of_exactly_them(n: int) -> None:
    docs = copies_corpus(n, [n], [False], singles=40)
    copies = sorted(d for d, _ in docs if d.startswith("g0-"))
    result = detect(docs)
    assert list(result.clusters.values()) == [copies]
    assert list(result.clusters) == ["c" + blake2b(copies[0].encode(), digest_size=8).hexdigest()]
    assert result.copies == {copies[0]: copies}
    # the copies' pairs: one link from each copy to the smallest id, none between the others
    links = [(p.doc_a, p.doc_b, p.similarity) for p in result.pairs if p.similarity == 1.0]
    assert links == [(copies[0], c, 1.0) for c in copies[1:]]
    assert (result.stats.copy_groups, result.stats.copies) == (1, n)
    assert result.stats.groups == 41
    join = exact_join(docs, LOW)
    assert join.copies == {copies[0]: copies}
    assert join.copy_pairs == n * (n - 1) // 2
    assert join.document_pairs == n * (n - 1) // 2  # the singles share no 5-gram above 0.6
    assert join.groups == 41


def test_the_order_of_the_corpus_changes_nothing() -> None:
    docs = copies_corpus(4, [5, 3, 2], [True, False, True], singles=30)
    first = detect(docs)
    shuffled = list(docs)
    random.Random(1).shuffle(shuffled)
    again = detect(shuffled)
    assert first.clusters == again.clusters
    assert first.pairs == again.pairs
    assert first.copies == again.copies
    assert exact_join(docs, LOW) == exact_join(shuffled, LOW)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    groups=st.lists(st.integers(1, 6), min_size=1, max_size=5),
    near=st.lists(st.booleans(), min_size=5, max_size=5),
    singles=st.integers(0, 12),
)
def test_the_same_clusters_and_figures_as_the_brute_force(
    seed: int, groups: list[int], near: list[bool], singles: int
) -> None:
    docs = copies_corpus(seed, groups, near[: len(groups)], singles)
    truth = brute_force(docs, LOW)
    # the near-copies are at about 0.9 (LSH misses one with P < 1e-9), no pair in between
    assert all(sim == 1.0 or sim >= 0.85 for sim in truth.values())
    result = detect(docs, DedupParams(threshold=THRESHOLD, near=THRESHOLD - LOW))
    assert result.clusters == brute_clusters(truth, THRESHOLD)
    kept = [p for p in result.pairs if p.similarity >= LOW]
    assert expanded(kept, result.copies) == pytest.approx(truth)
    # the exact join: the brute force's pairs, counted without listing the copies' pairs
    join = exact_join(docs, LOW)
    assert join.document_pairs == len(truth)
    assert join.copy_pairs == sum(1 for sim in truth.values() if sim == 1.0)
    assert {(p.doc_a, p.doc_b): p.similarity for p in exact_pairs(docs, LOW)} == truth
    # the service's figures: every pair found, counted per band as the brute force counts
    _, _, _, banded, _, candidate = detection(
        docs, DedupParams(threshold=THRESHOLD, near=THRESHOLD - LOW)
    )
    table = cal.bands(LOW)
    assert candidate["pairs"] == len(truth)
    assert candidate["copy_pairs"] == join.copy_pairs
    assert candidate["value"] == (1.0 if truth else None)
    per_band = [sum(cal.band_of(s, table) == b.index for s in truth.values()) for b in table]
    assert candidate["bands"] == [1.0 if count else None for count in per_band]
    # the table's groups and documents per band: the brute force's, group by group
    groups_of: dict[frozenset[tuple[str, ...]], list[str]] = {}
    for doc, text in docs:
        groups_of.setdefault(_words(text), []).append(doc)
    held = cal.band_documents([(p.doc_a, p.doc_b, p.similarity) for p in kept], table)
    for band in table:
        inside = {d for (a, b), s in truth.items() if cal.band_of(s, table) == band.index
                  for d in (a, b)}  # fmt: skip
        touched = [m for m in groups_of.values() if inside & set(m)]
        assert held[band.index] == (sum(len(m) for m in touched), len(touched))
    assert len(banded) == len(kept)


def test_the_pairs_kept_grow_linearly_with_the_copies() -> None:
    stored = {}
    for n in (10, 100, 1000, 3000):
        docs = copies_corpus(9, [n, 4], [True, True], singles=20)
        result = detect(docs)
        stored[n] = len(result.pairs)
        # n - 1 links, 3 for the group of 4, and one pair per near-copy to its group
        assert stored[n] == (n - 1) + 3 + 2
        assert result.stats.verified == 2
    assert stored[3000] - stored[1000] == 2000
