"""Data and steps several detector-run tests share: a golden set's files of generated copies
with known truth, and reviewing a detector run's whole sample by that truth."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from tests.support.dupe_corpus import make_corpus
from tests.support.service import Account


def copies_files(tmp_path: Path) -> tuple[Path, Path, Path, Path, dict[str, str]]:
    corpus = make_corpus(120, copy_share=0.25, seed=11)
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in corpus.docs))
    groups: dict[str, list[str]] = {}
    for doc, group in corpus.truth.items():
        groups.setdefault(group, []).append(doc)
    copied = sorted((sorted(m) for m in groups.values() if len(m) > 1), key=lambda m: m[0])
    qrels, run, queries = [], [], []
    for i, members in enumerate(copied[:10]):
        qid = f"q{i}"
        queries.append(json.dumps({"_id": qid, "text": f"query {i}"}))
        qrels.append(f"{qid}\t0\t{members[0]}\t1")
        # the run returns every copy of the relevant document first, then others
        others = [d["_id"] for d in corpus.docs if d["_id"] not in members][:8]
        for rank, doc in enumerate(members + others, start=1):
            run.append(f"{qid} Q0 {doc} {rank} {100 - rank} test")
    (tmp_path / "qrels.tsv").write_text("\n".join(qrels) + "\n")
    (tmp_path / "queries.jsonl").write_text("\n".join(queries) + "\n")
    (tmp_path / "run.trec").write_text("\n".join(run) + "\n")
    return (
        path,
        tmp_path / "qrels.tsv",
        tmp_path / "queries.jsonl",
        tmp_path / "run.trec",
        corpus.truth,
    )


def review_all(client: TestClient, reviewer: Account, run_id: int, truth: dict[str, str]) -> int:
    done = 0
    while True:
        got = client.post(f"/api/v1/detector-runs/{run_id}/claim", headers=reviewer.headers)
        if got.status_code == 204:
            return done
        assert got.status_code == 200, got.text
        pair = got.json()
        same = truth[pair["a"]["doc_id"]] == truth[pair["b"]["doc_id"]]
        labelled = client.post(
            f"/api/v1/pairs/{pair['id']}/label",
            json={"same": same, "version": pair["version"]},
            headers=reviewer.headers,
        )
        assert labelled.status_code == 200, labelled.text
        done += 1
