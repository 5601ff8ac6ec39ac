"""Generated golden sets and runs with duplicate clusters, for cluster-recall at any k.

Each seed writes a corpus (documents in clusters of two to four copies, and unclustered ones),
judgments that include documents absent from the corpus and grade-0 ones, and a TREC run with
tied scores, repeated documents, unjudged documents absent from the corpus, a golden query it
does not answer and a query the golden set does not have. Rankings run to 40 results, so with
a kept head of 5 many relevant clusters are first met deeper than the head, often through an
unjudged copy.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

CLUSTERS = 8


@dataclass(frozen=True)
class ClusterRunFiles:
    qrels: Path
    queries: Path
    corpus: Path
    run: Path
    #: doc_id -> cluster_id of the clustered corpus documents
    clusters: dict[str, str]
    #: every corpus doc_id
    documents: set[str]
    #: (qid, doc_id, grade)
    judgments: list[tuple[str, str, int]]


def write_cluster_run(folder: Path, seed: int) -> ClusterRunFiles:
    """The files of one generated golden set and run under ``folder``."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    clustered = [f"d{i:02}" for i in range(30)]
    plain = [f"d{i:02}" for i in range(30, 40)]
    clusters = {d: f"c{i % CLUSTERS}" for i, d in enumerate(clustered)}
    ghosts = [f"ghost{i}" for i in range(4)]  # judged, not in the corpus
    strangers = [f"u{i}" for i in range(6)]  # unjudged, not in the corpus
    qids = [f"q{i:02}" for i in range(1, 11)]
    judgments: dict[tuple[str, str], int] = {}
    for qid in qids:
        for doc in rng.sample(clustered + plain + ghosts, rng.randint(1, 5)):
            judgments[(qid, doc)] = rng.choice([0, 1, 1, 2])
        judgments[(qid, rng.choice(clustered))] = 2  # a relevant clustered document
    lines = []
    for qid in [*qids[:-1], "not-golden"]:  # the last golden query is not answered
        pool = clustered + plain + ghosts + strangers
        wanted = rng.randint(3, 40)
        results = [rng.choice(pool) for _ in range(wanted)]  # repeats: first one wins
        for rank, doc in enumerate(results, start=1):
            score = rng.choice([3.0, 2.0, round(rng.uniform(0, 10), 2)])  # ties
            lines.append(f"{qid} Q0 {doc} {rank} {score} gen")
    corpus = [
        {
            "_id": d,
            "title": f"Page {d}",
            "text": f"Copy of {clusters[d]}",
            "cluster_id": clusters[d],
        }
        for d in clustered
    ] + [{"_id": d, "title": f"Page {d}", "text": "Alone."} for d in plain]
    files = ClusterRunFiles(
        qrels=folder / "qrels.txt",
        queries=folder / "queries.jsonl",
        corpus=folder / "corpus.jsonl",
        run=folder / "run.trec",
        clusters=clusters,
        documents=set(clustered + plain),
        judgments=[(q, d, g) for (q, d), g in judgments.items()],
    )
    files.qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in files.judgments))
    files.queries.write_text(
        "".join(json.dumps({"_id": q, "text": f"query {q}"}) + "\n" for q in qids)
    )
    files.corpus.write_text("".join(json.dumps(doc) + "\n" for doc in corpus))
    files.run.write_text("\n".join(lines) + "\n")
    return files
