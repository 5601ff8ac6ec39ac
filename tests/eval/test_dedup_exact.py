"""The exact similarity join (app.eval.dedup_exact): equal to a brute-force all-pairs Jaccard on
generated corpora and random small sets, its corners, the id sample, and the LSH's recall."""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.eval.dedup import detect
from app.eval.dedup_exact import exact_pairs, sample_ids
from app.eval.dedup_text import Shingler, jaccard
from tests.support.dupe_corpus import Writer, make_copy, make_corpus, vocabulary

ROOT = Path(__file__).resolve().parents[2]
LOWS = (0.3, 0.5, 0.6, 0.8, 1.0)


def brute_force(docs: list[tuple[str, str]], size: int = 5) -> list[tuple[str, str, float]]:
    """Every pair of documents with a shingle and a positive Jaccard similarity, compared one
    by one: (doc_a, doc_b, similarity), doc_a < doc_b, sorted."""
    shingler = Shingler(size)
    sets = [(doc, shingler.shingles(text)) for doc, text in docs]
    sets = [(doc, s) for doc, s in sets if s.size]
    found = []
    for (a, sa), (b, sb) in itertools.combinations(sets, 2):
        sim = jaccard(sa, sb)
        if sim > 0:
            found.append((min(a, b), max(a, b), sim))
    return sorted(found)


def as_tuples(
    docs: list[tuple[str, str]], low: float, size: int = 5
) -> list[tuple[str, str, float]]:
    return [(p.doc_a, p.doc_b, p.similarity) for p in exact_pairs(docs, low, size)]


def spread_corpus(seed: int) -> list[tuple[str, str]]:
    """Originals and copies over the whole similarity range: truncations to 30-100% (some with
    typos), typos, layout copies (similarity 1), boilerplate, and suffixes."""
    rng = random.Random(seed)
    writer = Writer(rng, vocabulary(rng, 3000))
    docs: list[tuple[str, str]] = []
    for i in range(90):
        base = writer.text(rng.randint(30, 220))
        docs.append((f"o{i}", base))
        words = base.split(" ")
        if i % 2 == 0:
            cut = " ".join(words[: max(1, int(len(words) * rng.uniform(0.3, 1.0)))])
            docs.append((f"t{i}", cut))
            if i % 4 == 0:
                docs.append((f"tt{i}", make_copy(rng, cut, "typos")))
        if i % 3 == 0:
            docs.append((f"y{i}", make_copy(rng, base, "typos")))
        if i % 5 == 0:
            docs.append((f"k{i}", make_copy(rng, base, "boilerplate+layout+hyphenated")))
        if i % 6 == 0:
            docs.append((f"l{i}", make_copy(rng, base, "layout")))
        if i % 7 == 0:
            docs.append((f"s{i}", " ".join(words[rng.randint(0, len(words) // 2) :])))
    rng.shuffle(docs)
    return docs


Generated = tuple[list[tuple[str, str]], list[tuple[str, str, float]]]
CORPORA: dict[str, Callable[[], list[tuple[str, str]]]] = {
    "dupes-3": lambda: make_corpus(250, copy_share=0.3, seed=3).texts(),
    "dupes-8": lambda: make_corpus(300, copy_share=0.2, seed=8, words=60, vocab_size=400).texts(),
    "spread-1": lambda: spread_corpus(1),
    "spread-2": lambda: spread_corpus(2),
}


@pytest.fixture(scope="module", params=sorted(CORPORA))
def generated(request: pytest.FixtureRequest) -> Generated:
    docs = CORPORA[str(request.param)]()
    return docs, brute_force(docs)


def test_exact_pairs_equal_brute_force_on_generated_corpora(generated: Generated) -> None:
    docs, truth = generated
    assert len(docs) > 150
    assert sum(sim >= 0.3 for *_, sim in truth) > 40
    for low in LOWS:
        expected = [pair for pair in truth if pair[2] >= low]
        assert as_tuples(docs, low) == expected, low


def test_the_spread_corpus_has_pairs_across_the_range() -> None:
    truth = brute_force(spread_corpus(1))
    for lo, hi in [(0.3, 0.5), (0.5, 0.6), (0.6, 0.8), (0.8, 1.0)]:
        assert sum(lo <= sim < hi for *_, sim in truth) >= 3, (lo, hi)
    assert sum(sim == 1.0 for *_, sim in truth) >= 3


def test_a_threshold_met_exactly_is_kept() -> None:
    # word shingles (size 1): {a..e} and {a..c}: 3/5 = 0.6; {a..d} and {a..c}: 0.75
    docs = [("x", "a b c d e"), ("y", "a b c"), ("z", "a b c d")]
    assert as_tuples(docs, 0.6, 1) == [("x", "y", 0.6), ("x", "z", 0.8), ("y", "z", 0.75)]
    assert as_tuples(docs, 0.75, 1) == [("x", "z", 0.8), ("y", "z", 0.75)]
    assert as_tuples(docs, 0.8, 1) == [("x", "z", 0.8)]
    assert as_tuples(docs, 0.81, 1) == []


def test_corners() -> None:
    assert exact_pairs([], 0.6) == []
    assert exact_pairs([("only", "one document of several words here")], 0.6) == []
    text = "the same text in every one of these three documents"
    same = [("c", text), ("a", text), ("b", text.upper() + "!")]
    for low in LOWS:
        assert as_tuples(same, low) == [("a", "b", 1.0), ("a", "c", 1.0), ("b", "c", 1.0)]
    empty = [("e1", ""), ("e2", "  ... !! "), ("e3", ""), ("w", "a few words")]
    assert exact_pairs(empty, 0.3) == []
    short = [("s1", "Hello, world"), ("s2", "hello world!"), ("s3", "hello world again"), *empty]
    assert as_tuples(short, 0.3) == [("s1", "s2", 1.0)]


def test_a_strict_subset() -> None:
    rng = random.Random(4)
    words = Writer(rng, vocabulary(rng, 3000)).words(200)
    docs = [("whole", " ".join(words)), ("part", " ".join(words[:100]))]
    sim = 96 / 196  # the part's 96 shingles, all in the whole's 196
    assert as_tuples(docs, 0.3) == [("part", "whole", sim)]
    assert as_tuples(docs, sim) == [("part", "whole", sim)]
    assert as_tuples(docs, 0.5) == []


def test_refusals() -> None:
    with pytest.raises(ValueError, match="twice"):
        exact_pairs([("a", "x y z"), ("a", "x y z")], 0.6)
    for low in (0.0, -0.1, 1.01):
        with pytest.raises(ValueError, match="low"):
            exact_pairs([("a", "x")], low)


def test_independent_of_order_and_deterministic() -> None:
    docs = spread_corpus(3)
    first = exact_pairs(docs, 0.5)
    assert first == exact_pairs(docs, 0.5) == exact_pairs(list(reversed(docs)), 0.5)
    assert all(p.doc_a < p.doc_b for p in first)


WORDS = [f"w{i}" for i in range(10)]
_doc = st.lists(st.sampled_from(WORDS), max_size=9)
_low = st.one_of(
    st.sampled_from([1 / 3, 0.5, 0.6, 2 / 3, 0.75, 0.8, 1.0, 1 / 7, 3 / 7]),
    st.floats(min_value=0.01, max_value=1.0),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_doc, max_size=12), _low)
def test_equal_to_brute_force_on_small_random_sets(sets: list[list[str]], low: float) -> None:
    docs = [(f"d{i:02d}", " ".join(words)) for i, words in enumerate(sets)]
    expected = [pair for pair in brute_force(docs, size=1) if pair[2] >= low]
    assert as_tuples(docs, low, 1) == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS[:4]), max_size=12), max_size=10), _low)
def test_equal_to_brute_force_on_small_random_texts(texts: list[list[str]], low: float) -> None:
    docs = [(f"d{i:02d}", " ".join(words)) for i, words in enumerate(texts)]
    expected = [pair for pair in brute_force(docs, size=3) if pair[2] >= low]
    assert as_tuples(docs, low, 3) == expected


def test_sample_ids() -> None:
    ids = [f"doc{i:05d}" for i in range(5000)]
    sample = sample_ids(ids, 500)
    assert sample == sample_ids(ids, 500) == sample_ids(list(ids), 500, seed=1)
    assert len(sample) == 500 == len(set(sample))
    assert set(sample) <= set(ids)
    assert sample == [doc for doc in ids if doc in set(sample)]  # in the order given
    assert set(sample) <= set(sample_ids(ids, 800))  # a larger limit: a superset
    assert sample_ids(ids, 500, seed=2) != sample
    assert sample_ids(ids, 0) == []
    assert sample_ids(ids, 5000) == ids
    assert sample_ids(ids[:7], 100) == ids[:7]
    assert sample_ids([], 3) == []
    # uniform: about a tenth of each thousand
    per_thousand = [sum(int(doc[3:]) // 1000 == k for doc in sample) for k in range(5)]
    assert all(70 <= n <= 130 for n in per_thousand), per_thousand
    with pytest.raises(ValueError, match="negative"):
        sample_ids(ids, -1)


def test_sample_ids_is_stable_across_processes() -> None:
    code = (
        "from app.eval.dedup_exact import sample_ids;"
        "print(','.join(sample_ids([f'd{i}' for i in range(300)], 20, seed=5)))"
    )
    expected = ",".join(sample_ids([f"d{i}" for i in range(300)], 20, seed=5))
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == expected


@pytest.fixture(scope="module")
def dupes() -> list[tuple[str, str]]:
    return make_corpus(1500, copy_share=0.15, seed=3).texts()


def test_the_lsh_verified_pairs_are_among_the_exact_pairs_and_miss_none_at_08(
    dupes: list[tuple[str, str]],
) -> None:
    result = detect(dupes)
    assert result.copies  # layout copies: identical sets, one group each
    exact = {(p.doc_a, p.doc_b): p.similarity for p in exact_pairs(dupes, 0.6)}
    # a pair of detect names two groups by their smallest ids: it stands for every pair of
    # their members; the pairs within a group are found by construction
    verified: dict[tuple[str, str], float] = {}
    for p in result.pairs:
        if p.similarity < 0.6:
            continue
        if p.similarity == 1.0 and p.doc_b in result.copies.get(p.doc_a, []):
            group = result.copies[p.doc_a]
            verified |= {(x, y): 1.0 for x, y in itertools.combinations(group, 2)}
            continue
        for x in result.copies.get(p.doc_a, [p.doc_a]):
            for y in result.copies.get(p.doc_b, [p.doc_b]):
                verified[min(x, y), max(x, y)] = p.similarity
    assert len(exact) > 200
    assert verified.keys() <= exact.keys()
    assert all(sim == exact[pair] for pair, sim in verified.items())
    at_08 = [pair for pair, sim in exact.items() if sim >= 0.8]
    assert at_08
    assert sum(pair in verified for pair in at_08) / len(at_08) == 1.0
