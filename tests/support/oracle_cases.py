"""Seeded random golden sets and runs full of traps, for the oracle tests (tests/eval/
test_oracles.py) and for scripts/record_ranx.py, which records ranx's values for them."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

CUTOFFS = (1, 3, 5, 10, 20)
#: The exponential-gain cases compared with ranx: make_case(RANX_SEED_BASE + n) for n < RANX_CASES.
RANX_SEED_BASE = 1000
RANX_CASES = 20


@dataclass
class Case:
    qrels_text: str
    run_text: str
    qrels: dict[str, dict[str, int]]
    run: dict[str, dict[str, float]]

    def fingerprint(self) -> str:
        """A short digest of the case's input texts: a recorded expectation names the inputs it
        was computed from, so a changed generator cannot be compared with stale values."""
        digest = hashlib.sha256(f"{self.qrels_text}\0{self.run_text}".encode())
        return digest.hexdigest()[:16]


def make_case(seed: int, *, ties: bool = True, grades: tuple[int, int] = (-1, 3)) -> Case:
    """Random golden set and run: tied scores, rank column disagreeing with scores, repeated
    documents, numeric-looking docnos, golden queries missing from the run and run queries
    missing from the golden set."""
    rng = random.Random(seed)
    pool = [str(n) for n in (1, 9, 10, 11, 99, 100)] + [f"doc{n}" for n in range(40)]
    qrels: dict[str, dict[str, int]] = {}
    qrels_lines = []
    for q in range(rng.randint(5, 25)):
        qid = f"q{q}"
        judged = rng.sample(pool, rng.randint(1, 12))
        qrels[qid] = {d: rng.randint(*grades) for d in judged}
        qrels_lines += [f"{qid} 0 {d} {g}" for d, g in qrels[qid].items()]
    if not any(g >= 1 for docs in qrels.values() for g in docs.values()):
        first = next(iter(qrels))
        qrels[first][next(iter(qrels[first]))] = 1
        qrels_lines = [f"{q} 0 {d} {g}" for q, docs in qrels.items() for d, g in docs.items()]
    run: dict[str, dict[str, float]] = {}
    run_lines = []
    run_qids = [q for q in qrels if rng.random() < 0.85] + ["extra1", "extra2"]
    for qid in run_qids:
        docs = [rng.choice(pool) for _ in range(rng.randint(1, 40))]
        ranks = list(range(1, len(docs) + 1))
        rng.shuffle(ranks)  # the rank column disagrees with the scores
        for doc, rank in zip(docs, ranks, strict=True):
            # Multiples of 1/4 are exact in float32; a small range makes ties common.
            score = rng.randint(0, 12) / 4 if ties else rng.randint(0, 2**20) / 4
            run_lines.append(f"{qid} Q0 {doc} {rank} {score} tag")
            run.setdefault(qid, {}).setdefault(doc, score)  # first occurrence wins
    if not ties:
        for docs in run.values():
            assert len(set(docs.values())) == len(docs), "scores must be distinct"
    return Case("\n".join(qrels_lines) + "\n", "\n".join(run_lines) + "\n", qrels, run)


def ranx_case(n: int) -> Case:
    """The n-th exponential-gain case: distinct scores (ranx and we break ties differently),
    grades 0 to 3."""
    return make_case(RANX_SEED_BASE + n, ties=False, grades=(0, 3))
