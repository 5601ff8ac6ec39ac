"""Generated corpora for the cluster tallies of logs (tests/eval/test_cluster_stream.py,
tests/eval/test_log_fast.py): 150 documents d000..d149, three in four in one of 26 clusters,
each with a random number of tokens (multiples of a quarter)."""

from __future__ import annotations

import random


def random_corpus(rng: random.Random) -> tuple[dict[str, str], dict[str, float]]:
    """(doc_id -> cluster_id of the clustered documents, doc_id -> tokens of every one)."""
    clusters = {f"d{i:03}": f"c{rng.randint(0, 25)}" for i in range(150) if i % 4}
    tokens = {f"d{i:03}": rng.randint(0, 60) / 4 for i in range(150)}
    return clusters, tokens
