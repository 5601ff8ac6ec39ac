"""Build the example runs of examples/helpcentre with a small BM25 of our own.

Two configurations over the same index: plain BM25, and BM25 with a hand-written query
expansion table (what a team adds to fix vocabulary mismatch). Documents judged in the qrels
but absent from corpus.jsonl (the index manifest) cannot be retrieved, as if ingestion had
skipped them. Run: ``python scripts/make_example_runs.py`` (deterministic; rewrites runs/).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "examples" / "helpcentre"
STOP = frozenset(
    (
        "a an and are as at be by can do does for from get getting how i if in is it its my of on "
        "or per the their there they this to what when why with you your after have long wait "
        "once am another"
    ).split()
)
EXPANSIONS = {
    "throttled": ["rate", "limit"],
    "sign": ["saml", "identity", "provider"],
    "okta": ["saml"],
    "rotate": ["revoke"],
    "leaked": ["revoke"],
    "mfa": ["two", "factor", "authentication"],
    "move": ["changed"],
}
K1, B = 1.2, 0.75


def tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9]{2,}", text.lower()) if t not in STOP]


def bm25_run(docs: dict[str, list[str]], queries: dict[str, list[str]], tag: str) -> list[str]:
    df = Counter(term for words in docs.values() for term in set(words))
    avg = sum(len(w) for w in docs.values()) / len(docs)
    lines = []
    for qid, terms in queries.items():
        scores: dict[str, float] = {}
        for doc_id, words in docs.items():
            tf = Counter(words)
            score = 0.0
            for term in terms:
                if tf[term]:
                    idf = math.log(1 + (len(docs) - df[term] + 0.5) / (df[term] + 0.5))
                    norm = tf[term] * (K1 + 1) / (tf[term] + K1 * (1 - B + B * len(words) / avg))
                    score += idf * norm
            if score > 0:
                scores[doc_id] = round(score, 4)
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        lines += [f"{qid} Q0 {d} {i} {s:.4f} {tag}" for i, (d, s) in enumerate(ranked, 1)]
    return lines


def main() -> None:
    corpus = [json.loads(line) for line in (HERE / "corpus.jsonl").read_text().splitlines()]
    docs = {d["_id"]: tokens(d["title"] + " " + d["text"]) for d in corpus}
    raw = [json.loads(line) for line in (HERE / "queries.jsonl").read_text().splitlines()]
    plain = {q["_id"]: tokens(q["text"]) for q in raw}
    expanded = {
        qid: terms + [extra for t in terms for extra in EXPANSIONS.get(t, [])]
        for qid, terms in plain.items()
    }
    runs = HERE / "runs"
    runs.mkdir(exist_ok=True)
    for name, queries in (("bm25", plain), ("bm25-expanded", expanded)):
        (runs / f"{name}.trec").write_text("\n".join(bm25_run(docs, queries, name)) + "\n")


if __name__ == "__main__":
    main()
