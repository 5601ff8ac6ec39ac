"""A log run for the demo golden set, and a plain-Python oracle of its cluster figures.

The log run holds the demo's 67 queries (their BM25 results, examples/helpcentre/runs) and 200
unjudged queries written for it here: deterministic rankings over the demo corpus that draw
mostly from a few duplicate clusters (so clusters repeat), with tied scores, repeated documents,
documents absent from the corpus and queries shorter than some k.

The oracle is written from the definitions (DESIGN.md, API.md "cluster measures without
judgments", the docstring of app/eval/cluster_profile.py) without calling that module: it ranks
the lines itself (first occurrence of a document wins; score descending, ties by docno
descending), counts distinct clusters with sets, and takes quantiles by linear interpolation.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEMO = Path(__file__).resolve().parents[2] / "examples" / "helpcentre"
UNJUDGED = 200
GHOSTS = [f"ghost-{i}" for i in range(6)]  # documents the corpus does not hold


def demo_corpus() -> dict[str, dict[str, Any]]:
    """doc_id -> the demo corpus's record."""
    docs = {}
    for line in (DEMO / "corpus.jsonl").read_text().splitlines():
        doc = json.loads(line)
        docs[doc["_id"]] = doc
    return docs


def unjudged_lines(corpus: dict[str, dict[str, Any]], *, seed: int = 15) -> list[str]:
    """TREC lines of the 200 unjudged queries."""
    rng = random.Random(seed)
    by_cluster: dict[str, list[str]] = {}
    for doc_id, doc in sorted(corpus.items()):
        if doc.get("cluster_id"):
            by_cluster.setdefault(doc["cluster_id"], []).append(doc_id)
    clusters = sorted(by_cluster)
    others = sorted(corpus)
    lines = []
    for i in range(1, UNJUDGED + 1):
        qid = f"log-{i:03}"
        wanted = rng.choice([1, 3, 6, 10, 14, 25, 40, 55, 70])
        picked = rng.sample(clusters, 3)
        pool = [d for c in picked for d in by_cluster[c]]
        results: list[str] = []
        while len(results) < wanted:
            draw = rng.random()
            if draw < 0.55:
                results.append(rng.choice(pool))  # a repeating cluster (or the same document)
            elif draw < 0.95:
                results.append(rng.choice(others))
            else:
                results.append(rng.choice(GHOSTS))
        for rank, doc_id in enumerate(results, start=1):
            score = rng.choice([5.0, 2.5, round(rng.uniform(0, 10), 1)])  # ties
            lines.append(f"{qid} Q0 {doc_id} {rank} {score} log")
    return lines


def write_log_run(path: Path) -> Path:
    """The log run: the demo's BM25 results and the 200 unjudged queries."""
    demo = (DEMO / "runs" / "bm25.trec").read_text().splitlines()
    path.write_text("\n".join(demo + unjudged_lines(demo_corpus())) + "\n")
    return path


def rankings(text: str) -> dict[str, list[str]]:
    """trec_eval order: the first line of a (query, document) wins; then score descending,
    ties by docno descending (byte order)."""
    seen: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        qid, _, doc_id, _, score, _ = line.split()
        seen.setdefault(qid, {}).setdefault(doc_id, float(score))
    ranked = {}
    for qid, docs in seen.items():
        by_doc = sorted(docs, key=lambda d: d.encode(), reverse=True)
        ranked[qid] = sorted(by_doc, key=lambda d: -docs[d])  # stable: docno order kept
    return ranked


def quantile(values: Sequence[int], p: float) -> float:
    xs = sorted(values)
    h = (len(xs) - 1) * p
    j = math.floor(h)
    if j + 1 >= len(xs):
        return float(xs[-1])
    return xs[j] + (h - j) * (xs[j + 1] - xs[j])


def oracle(
    ranked: dict[str, list[str]],
    corpus: dict[str, dict[str, Any]],
    *,
    ks: Sequence[int],
    threshold: int,
    price: float | None = None,
    per_day: float | None = None,
) -> dict[str, Any]:
    """Every figure of the clusters answer, from the definitions."""

    def cluster(doc_id: str) -> tuple[str, str]:
        cid = corpus.get(doc_id, {}).get("cluster_id")
        return ("cluster", cid) if cid else ("document", doc_id)

    def tokens(doc_id: str) -> float:
        doc = corpus.get(doc_id)
        if doc is None:
            return 0.0
        title, text = doc.get("title", ""), doc.get("text", "")
        joined = title + "\n" + text if title and text else title or text
        return len(joined) / 4

    qids = sorted(ranked)
    depths = []
    previous = None
    for k in sorted(ks):
        distinct = [len({cluster(d) for d in ranked[q][:k]}) for q in qids]
        mean = sum(distinct) / len(qids)
        prompt = sum(sum(tokens(d) for d in ranked[q][:k]) for q in qids) / len(qids)
        depths.append(
            {
                "k": k,
                "mean_distinct": mean,
                "distinct_fraction": mean / k,
                "marginal_per_slot": None
                if previous is None
                else (mean - previous[1]) / (k - previous[0]),
                "median": quantile(distinct, 0.5),
                "p10": quantile(distinct, 0.1),
                "p90": quantile(distinct, 0.9),
                "share_at_or_below": sum(1 for u in distinct if u <= threshold) / len(qids),
                "histogram": {str(n): c for n, c in sorted(Counter(distinct).items())},
                "short_queries": sum(1 for q in qids if len(ranked[q]) < k),
                "prompt_tokens": prompt,
                "daily_price": None
                if price is None or per_day is None
                else prompt * per_day * price / 1_000_000,
            }
        )
        previous = (k, mean)
    deepest = max(ks)
    shown = [d for q in qids for d in ranked[q][:deepest]]
    return {
        "queries": len(qids),
        "depth": max(len(r) for r in ranked.values()),
        "threshold": threshold,
        "unclustered_results": sum(1 for d in shown if not corpus.get(d, {}).get("cluster_id")),
        "unknown_results": sum(1 for d in shown if d not in corpus),
        "depths": depths,
    }
