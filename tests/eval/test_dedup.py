"""The near-duplicate detector (app.eval.dedup): quality on a generated corpus with known
copies, identity not topicality, components, normalisation, corners, determinism, the OUT file."""

from __future__ import annotations

import csv
import itertools
import json
import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from app.eval.dedup import (
    DedupParams,
    choose_bands,
    cluster_id_for,
    detect,
    detect_corpus,
    s_curve,
    write_clustered_corpus,
)
from app.eval.dedup_text import Shingler, jaccard, normalise, normalise_slowly
from tests.support.dupe_corpus import (
    KINDS,
    Writer,
    make_copy,
    make_corpus,
    pair_quality,
    topic_documents,
    vocabulary,
)

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "scifact"


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(3000, copy_share=0.15, seed=3)


@pytest.fixture(scope="module")
def result(corpus):
    return detect(corpus.texts())


def test_pair_precision_and_recall_on_the_truth(corpus, result) -> None:
    quality = pair_quality(corpus.truth, result.clusters)
    assert quality["true_pairs"] > 400
    assert quality["precision"] >= 0.99, quality
    assert quality["recall"] >= 0.95, quality


def test_every_kind_of_copy_is_found(corpus, result) -> None:
    cluster_of = result.cluster_of()
    by_group = defaultdict(list)
    for doc, group in corpus.truth.items():
        by_group[group].append(doc)
    found: dict[str, list[bool]] = defaultdict(list)
    for copy, kind in corpus.kinds.items():
        original = next(d for d in by_group[corpus.truth[copy]] if d not in corpus.kinds)
        found[kind].append(
            cluster_of.get(copy) is not None and cluster_of.get(copy) == cluster_of.get(original)
        )
    assert set(found) == set(KINDS)
    for kind, hits in found.items():
        assert sum(hits) / len(hits) >= 0.95, kind


def test_verified_similarity_is_the_exact_jaccard_and_pairs_below_threshold_are_kept(
    corpus, result
) -> None:
    texts = dict(corpus.texts())
    shingler = Shingler(5)
    for pair in result.pairs[:300]:
        a = set(shingler.shingles(texts[pair.doc_a]).tolist())
        b = set(shingler.shingles(texts[pair.doc_b]).tolist())
        assert pair.similarity == pytest.approx(len(a & b) / len(a | b))
        assert pair.doc_a < pair.doc_b
    assert result.stats.near_pairs == sum(0.6 <= p.similarity < 0.8 for p in result.pairs)
    assert result.stats.candidates == len(result.pairs) >= result.stats.pairs_at_threshold
    assert result.stats.pairs_at_threshold == sum(p.similarity >= 0.8 for p in result.pairs)


def _words(text: str, size: int = 5) -> set[tuple[str, ...]]:
    words = normalise(text).split()
    if 0 < len(words) < size:
        return {tuple(words)}
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def test_lsh_recall_against_brute_force_exact_jaccard() -> None:
    """Every pair of a small corpus compared naively (sets of word tuples, no hashing): the
    detector finds every pair at or above the threshold, and most in the band below it."""
    rng = random.Random(5)
    writer = Writer(rng, vocabulary(rng, 4000))
    docs: list[tuple[str, str]] = []
    for i in range(120):
        base = writer.text(200)
        docs.append((f"o{i}", base))
        if i % 2 == 0:  # copies spread over the similarity range, 0.5 .. 1
            words = base.split(" ")
            keep = rng.uniform(0.5, 1.0)
            docs.append((f"t{i}", " ".join(words[: int(len(words) * keep)])))
        if i % 3 == 0:
            docs.append((f"y{i}", make_copy(rng, base, "typos")))
    sets = {d: _words(t) for d, t in docs}
    exact = {}
    for (a, sa), (b, sb) in itertools.combinations(sets.items(), 2):
        sim = len(sa & sb) / len(sa | sb)
        if sim > 0:
            exact[tuple(sorted((a, b)))] = sim
    found = {(p.doc_a, p.doc_b): p.similarity for p in detect(docs).pairs}
    above = [pair for pair, sim in exact.items() if sim >= 0.8]
    assert len(above) > 40
    assert all(pair in found for pair in above)
    for pair, sim in found.items():
        assert sim == pytest.approx(exact.get(pair, 0.0))
    near = [pair for pair, sim in exact.items() if 0.6 <= sim < 0.8]
    assert len(near) > 10
    assert sum(pair in found for pair in near) / len(near) >= 0.8


def test_documents_on_one_subject_never_merge() -> None:
    docs = topic_documents(150)
    result = detect(docs)
    assert result.clusters == {}
    assert all(p.similarity < 0.5 for p in result.pairs)


@pytest.mark.skipif(not SCIFACT.is_dir(), reason="shared/datasets/scifact is absent")
def test_scifact_documents_relevant_to_one_query_never_merge() -> None:
    qrels = SCIFACT / "qrels" / "test.tsv"
    if not qrels.exists():
        qrels = SCIFACT / "qrels.tsv"
    relevant: dict[str, set[str]] = defaultdict(set)
    with qrels.open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if int(row["score"]) > 0:
                relevant[row["query-id"]].add(row["corpus-id"])
    result = detect_corpus(SCIFACT / "corpus.jsonl")
    assert result.stats.documents > 5000
    cluster_of = result.cluster_of()
    multi = [docs for docs in relevant.values() if len(docs) > 1]
    assert multi
    for docs in multi:
        ids = [cluster_of.get(d) for d in docs]
        clustered = [c for c in ids if c is not None]
        assert len(set(clustered)) == len(clustered), docs


def test_connected_components_chain() -> None:
    rng = random.Random(9)
    words = Writer(rng, vocabulary(rng, 3000)).words(300)
    a = " ".join(words[:200])
    b = " ".join(words[12:212])  # a-b: 184/208 = 0.88
    c = " ".join(words[24:224])  # b-c: 0.88; a-c: 172/220 = 0.78 (< 0.8)
    other = " ".join(Writer(rng, vocabulary(rng, 3000)).words(200))
    result = detect([("a", a), ("b", b), ("c", c), ("z", other)])
    sims = {(p.doc_a, p.doc_b): p.similarity for p in result.pairs}
    assert sims[("a", "c")] < 0.8 <= min(sims[("a", "b")], sims[("b", "c")])
    assert list(result.clusters.values()) == [["a", "b", "c"]]
    assert list(result.clusters) == [cluster_id_for(["a", "b", "c"])]
    assert result.cluster_of() == dict.fromkeys("abc", cluster_id_for(["a"]))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            "\ufb01ne \uff21\uff22\uff23 \u2460",
            "fine abc 1",
        ),  # NFKC: ligature, full width, circled digit
        ("Straße HELLO", "strasse hello"),  # case folded, not just lowered
        ("retriev-\nal", "retrieval"),  # hyphenation at a line break joined
        ("retriev- \r\n  al", "retrieval"),
        ("re\u00adtrieval", "retrieval"),  # soft hyphen
        ("state-of-the-art", "state of the art"),  # a hyphen inside a line breaks words
        ("end.\nNext", "end next"),  # not a hyphen: the line break is a space
        ("Hello, world! (x_y) — “quoted”; 3.14", "hello world x y quoted 3 14"),
        ("  a \t b\n\n c  ", "a b c"),
        ("", ""),
    ],
)
def test_normalisation(raw: str, expected: str) -> None:
    assert normalise(raw) == expected


def test_the_ascii_fast_path_normalises_as_the_full_rules() -> None:
    rng = random.Random(2)
    alphabet = "ab Z9 -\n\t\r_.,;'\x00\x7f\u2010\u2011\u00ad\u00e9\ufb01\uff21\u00df"
    for _ in range(5000):
        text = "".join(rng.choices(alphabet, k=rng.randint(0, 30)))
        assert normalise(text) == normalise_slowly(text), repr(text)


def test_normalisation_makes_layout_copies_identical() -> None:
    text = "Dense retrieval of Passages,\nfor open-domain question answer-\ning."
    copy = "DENSE   retrieval of passages for\topen domain QUESTION answering"
    assert jaccard(Shingler().shingles(text), Shingler().shingles(copy)) == 1.0


def test_empty_and_short_texts() -> None:
    shingler = Shingler(5)
    assert shingler.shingles("").size == 0
    assert shingler.shingles(" ... ").size == 0
    assert shingler.shingles("Two words").size == 1
    assert shingler.shingles("one two three four five six").size == 2
    result = detect(
        [
            ("e1", ""),
            ("e2", "  !! "),
            ("e3", ""),
            ("s1", "Hello, world"),
            ("s2", "hello world!"),
            ("s3", "hello world again"),
            ("s4", "world hello"),
        ]
    )
    assert result.stats.documents == 7
    assert result.stats.shingled == 4
    assert result.stats.short == 4
    assert list(result.clusters.values()) == [["s1", "s2"]]  # empties are never candidates
    assert [(p.doc_a, p.doc_b, p.similarity) for p in result.pairs] == [("s1", "s2", 1.0)]


def test_duplicate_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        detect([("a", "x y z"), ("a", "x y z")])


def test_deterministic_and_independent_of_order(corpus) -> None:
    first = detect(corpus.texts()[:1500])
    again = detect(corpus.texts()[:1500])
    reversed_ = detect(list(reversed(corpus.texts()[:1500])))
    assert first.clusters == again.clusters == reversed_.clusters
    assert first.pairs == again.pairs == reversed_.pairs
    assert all(cid == cluster_id_for(m) and m == sorted(m) for cid, m in first.clusters.items())


def test_parameters_are_stated(result) -> None:
    params = result.stats.parameters
    assert params["threshold"] == 0.8
    assert (params["bands"], params["rows"], params["num_perm"]) == (25, 5, 128)
    assert params["s_curve_midpoint"] == pytest.approx((1 / 25) ** (1 / 5), abs=1e-4)
    assert params["s_curve_midpoint"] < 0.6
    assert params["shingle_size"] == 5
    assert set(result.stats.seconds) >= {"shingles", "signatures", "candidates", "verify"}
    assert s_curve(0.8, 25, 5) > 0.9999
    assert s_curve(0.3, 25, 5) < 0.07
    assert choose_bands(0.9, 128) == (18, 7)
    custom = DedupParams(threshold=0.7, num_perm=64, bands=16, rows=4, seed=3).resolved()
    assert (custom.bands, custom.rows) == (16, 4)
    with pytest.raises(ValueError, match="fit"):
        DedupParams(num_perm=64, bands=20, rows=4).resolved()


def test_exact_copies_are_one_group_before_any_bucket() -> None:
    text = " ".join(f"w{i}" for i in range(50))
    docs = [(f"d{i:03d}", text) for i in range(150)]
    result = detect(docs, DedupParams(max_bucket=40))
    assert (result.stats.groups, result.stats.copy_groups, result.stats.copies) == (1, 1, 150)
    assert result.stats.capped_buckets == 0
    assert result.stats.verified == 0
    assert list(result.clusters.values()) == [[d for d, _ in docs]]


def test_a_big_bucket_of_near_copies_still_makes_one_cluster() -> None:
    text = " ".join(f"w{i}" for i in range(50))
    docs = [(f"d{i:03d}", f"{text} tail{i}") for i in range(150)]  # 150 distinct sets
    result = detect(docs, DedupParams(max_bucket=40))
    assert result.stats.capped_buckets > 0
    assert result.stats.copy_groups == 0
    assert list(result.clusters.values()) == [[d for d, _ in docs]]


def test_shingle_sets_are_sorted_unique_uint64() -> None:
    flat = Shingler(5).shingles("a b c d e a b c d e a b c d e")
    assert flat.dtype == np.uint64
    assert flat.size == 5  # abcde, bcdea, cdeab, deabc, eabcd
    assert np.all(np.diff(flat.astype(np.float64)) > 0) or np.all(flat[1:] > flat[:-1])


def test_out_file_keeps_every_field_and_adds_cluster_id_to_copies(tmp_path: Path) -> None:
    records = [
        {"_id": "a", "title": "T", "text": "one two three four five six seven", "extra": [1]},
        {"_id": "b", "title": "", "text": "One two three four five six seven!", "x": {"y": 2}},
        {"_id": "c", "title": "Ü", "text": "something else entirely here now", "n": 3},
        {"_id": "d", "text": ""},
    ]
    source = tmp_path / "corpus.jsonl"
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = detect_corpus(source)
    out = tmp_path / "out.jsonl"
    assert write_clustered_corpus(source, out, result.cluster_of()) == 2
    written = out.read_text(encoding="utf-8").splitlines()
    back = [json.loads(line) for line in written]
    cid = cluster_id_for(["a", "b"])
    assert back[0] == {**records[0], "cluster_id": cid}
    assert back[1] == {**records[1], "cluster_id": cid}
    assert written[2:] == lines[2:]  # documents without a copy: as read
    assert "cluster_id" not in back[2]
    assert "cluster_id" not in back[3]
