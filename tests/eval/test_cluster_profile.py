"""unique-clusters@k without judgments against a plain-Python oracle written from the
definitions (app/eval/cluster_profile.py): every query of a generated run, judged or not, with
tied scores, repeated documents, queries with fewer than k results, documents without a cluster
and documents absent from the corpus."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from pathlib import Path

import pytest

from app.eval.cluster_profile import cluster_profile, estimate_tokens
from app.eval.sources import load_log_run

KS = (3, 5, 10, 20)
THRESHOLD = 4
PRICE, PER_DAY = 2.5, 1000.0


def _write(tmp_path: Path) -> tuple[Path, Path]:
    rng = random.Random(15)
    corpus = tmp_path / "corpus.jsonl"
    with corpus.open("w") as handle:
        for i in range(120):
            doc: dict[str, object] = {"_id": f"d{i:03}", "title": "t" * rng.randint(0, 9)}
            doc["text"] = "w " * rng.randint(0, 40)
            if i % 4:  # a quarter of the corpus carries no cluster
                doc["cluster_id"] = f"c{rng.randint(0, 25)}"
            handle.write(json.dumps(doc) + "\n")
    run = tmp_path / "log.trec"
    with run.open("w") as handle:
        for q in range(40):
            n = rng.choice([1, 2, 4, 7, 12, 25, 30])  # many queries shorter than some k
            for r in range(n):
                doc_id = f"d{rng.randint(0, 129):03}"  # d120..d129: not in the corpus
                score = rng.choice([1.0, 2.0, 3.0, rng.random()])  # ties
                handle.write(f"q{q} Q0 {doc_id} {r + 1} {score!r} log\n")
    return run, corpus


def _quantile(values: list[int], p: float) -> float:
    ordered = sorted(values)
    h = (len(ordered) - 1) * p
    j = math.floor(h)
    upper = ordered[min(j + 1, len(ordered) - 1)]
    return ordered[j] + (h - j) * (upper - ordered[j])


def _oracle(run: Path, corpus: Path) -> list[dict[str, object]]:
    """The figures at every k, computed line by line from the definitions."""
    cluster: dict[str, str] = {}
    tokens: dict[str, float] = {}
    for line in corpus.read_text().splitlines():
        doc = json.loads(line)
        if doc.get("cluster_id"):
            cluster[doc["_id"]] = "cluster " + doc["cluster_id"]
        title, text = doc.get("title", ""), doc.get("text", "")
        tokens[doc["_id"]] = len(title + "\n" + text if title and text else title or text) / 4
    lines: dict[str, list[tuple[float, str]]] = {}
    for line in run.read_text().splitlines():
        qid, _, doc_id, _, score, _ = line.split()
        seen = lines.setdefault(qid, [])
        if doc_id not in (d for _, d in seen):  # the first occurrence wins
            seen.append((float(score), doc_id))
    # trec_eval: score descending, ties by docno descending
    ranked = {
        q: [d for _, d in sorted(docs, key=lambda p: (p[0], p[1].encode()), reverse=True)]
        for q, docs in lines.items()
    }
    rows: list[dict[str, object]] = []
    previous: tuple[int, float] | None = None
    for k in KS:
        counts = [len({cluster.get(d, "doc " + d) for d in docs[:k]}) for docs in ranked.values()]
        mean = sum(counts) / len(counts)
        prompt = sum(sum(tokens.get(d, 0.0) for d in docs[:k]) for docs in ranked.values())
        prompt /= len(ranked)
        rows.append(
            {
                "k": k,
                "mean": mean,
                "fraction": mean / k,
                "marginal": None if previous is None else (mean - previous[1]) / (k - previous[0]),
                "median": _quantile(counts, 0.5),
                "p10": _quantile(counts, 0.1),
                "p90": _quantile(counts, 0.9),
                "share": sum(1 for c in counts if c <= THRESHOLD) / len(counts),
                "histogram": dict(Counter(counts)),
                "short": sum(1 for docs in ranked.values() if len(docs) < k),
                "tokens": prompt,
                "price": prompt * PER_DAY * PRICE / 1e6,
            }
        )
        previous = (k, mean)
    return rows


def test_the_profile_equals_the_oracle(tmp_path: Path) -> None:
    run, corpus = _write(tmp_path)
    top = load_log_run(run, depth=max(KS))
    clusters: dict[str, str] = {}
    tokens: dict[str, float] = {}
    for line in corpus.read_text().splitlines():
        doc = json.loads(line)
        if doc.get("cluster_id"):
            clusters[doc["_id"]] = doc["cluster_id"]
        tokens[doc["_id"]] = estimate_tokens(doc["title"], doc["text"])
    profile = cluster_profile(
        top,
        clusters,
        ks=KS,
        threshold=THRESHOLD,
        tokens=tokens,
        price_per_million=PRICE,
        queries_per_day=PER_DAY,
    )
    expected = _oracle(run, corpus)
    assert profile.queries == 40
    assert profile.unknown_results > 0
    assert profile.unclustered_results > profile.unknown_results
    assert any(row["short"] for row in expected)
    assert expected[0]["marginal"] is None
    for got, want in zip(profile.depths, expected, strict=True):
        assert got.k == want["k"]
        assert got.mean_distinct == pytest.approx(want["mean"])
        assert got.distinct_fraction == pytest.approx(want["fraction"])
        if want["marginal"] is None:
            assert got.marginal_per_slot is None
        else:
            assert got.marginal_per_slot == pytest.approx(want["marginal"])
        assert (got.median, got.p10, got.p90) == pytest.approx(
            (want["median"], want["p10"], want["p90"])
        )
        assert got.share_at_or_below == pytest.approx(want["share"])
        assert got.histogram == want["histogram"]
        assert got.short_queries == want["short"]
        assert got.prompt_tokens == pytest.approx(want["tokens"])
        assert got.daily_price == pytest.approx(want["price"])


def test_doubling_k_doubles_the_prompt_of_full_result_lists(tmp_path: Path) -> None:
    """Every document the same length, every query with 20 results: tokens(20) = 2 tokens(10)."""
    run = tmp_path / "run.trec"
    run.write_text(
        "".join(f"q{q} Q0 d{d} {d + 1} {100 - d} x\n" for q in range(3) for d in range(20))
    )
    top = load_log_run(run, depth=20)
    tokens = {f"d{d}": 50.0 for d in range(20)}
    profile = cluster_profile(top, {}, ks=(10, 20), tokens=tokens)
    first, second = profile.depths
    assert (first.prompt_tokens, second.prompt_tokens) == (500.0, 1000.0)
    # no clusters at all: every document is its own, the fraction is 1 and each slot adds 1
    assert (first.distinct_fraction, second.marginal_per_slot) == (1.0, 1.0)
    assert first.daily_price is None
