"""A detector run applied at two thresholds at once, and triages made while it is applied,
against a real server with two worker processes, on SQLite and on PostgreSQL.

The corpus holds copies of known truth; each query's relevant document is missing from the
run while its copies are ranked first, so the miss is covered by a duplicate at a threshold
that clusters them: J 0.5 clusters more copies (and covers more misses) than J 0.95.

- Two applies of one run at once (J 0.5 and 0.95): both answer 200, and what is stored is
  one of them whole (the run's threshold, its clusters, the corpus's cluster ids, the golden
  set's run), with an entry in the run's applications for every apply acknowledged.
- A triage made while the run is applied again and again names the threshold whose clusters
  decided its covered misses.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from app.models import DetectorRun, GoldenSet, Miss, MissState, Role, Triage
from app.services.accounts import users
from app.services.dedup import detector_runs
from app.services.imports import golden_sets, runs
from app.services.triage import triages
from tests.support.clusters import live_cluster_ids
from tests.support.concurrency import at_once
from tests.support.dupe_corpus import make_corpus
from tests.support.live import LiveServer
from tests.support.service import TEST_SECRET

THRESHOLDS = (0.5, 0.95)
ROUNDS = 10
#: Triages made while the run is applied this many times.
TRIAGES, APPLIES = 40, 60
DEADLINE_S = 120

#: A corpus's clusters as sets of documents (the ids a cluster gets are the apply's own).
Partition = frozenset[frozenset[str]]


@dataclass(frozen=True)
class Copies:
    golden_id: int
    run_id: int
    detector_id: int
    token: str
    #: What each threshold gives when applied alone: the corpus's clusters and the misses a
    #: triage finds covered.
    partition: dict[float, Partition]
    covered: dict[float, int]


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    live = LiveServer(database_url, tmp_path, secret=TEST_SECRET, workers=2)
    yield live
    live.stop()


def _partition(session: Session, golden_id: int) -> Partition:
    clusters: dict[str, set[str]] = {}
    for doc, cid in live_cluster_ids(session, golden_id).items():
        clusters.setdefault(cid, set()).add(doc)
    return frozenset(frozenset(m) for m in clusters.values())


def _covered(session: Session, triage_id: int) -> int:
    return session.exec(
        select(func.count()).where(
            Miss.triage_id == triage_id, Miss.state == MissState.COVERED.value
        )
    ).one()


def _copies(engine: Engine, tmp: Path) -> Copies:
    """The golden set, its run and a detection kept down to J 0.3; each threshold applied
    alone once, with a triage at depth 1 made on it."""
    corpus = make_corpus(120, copy_share=0.3, seed=11)
    groups: dict[str, list[str]] = {}
    for doc, group in corpus.truth.items():
        groups.setdefault(group, []).append(doc)
    copied = sorted((sorted(m) for m in groups.values() if len(m) > 1), key=lambda m: m[0])
    alone = [d["_id"] for d in corpus.docs if len(groups[corpus.truth[d["_id"]]]) == 1]
    qrels, ranking, queries = [], [], []
    for i, members in enumerate(copied):
        qrels.append(f"q{i}\t0\t{members[0]}\t1\n")
        queries.append(json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n")
        for rank, doc in enumerate([*members[1:], *alone[:5]], start=1):
            ranking.append(f"q{i} Q0 {doc} {rank} {100 - rank} t\n")
    (tmp / "qrels.tsv").write_text("".join(qrels))
    (tmp / "queries.jsonl").write_text("".join(queries))
    (tmp / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus.docs))
    (tmp / "run.trec").write_text("".join(ranking))
    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(
            session=session,
            name="copies",
            qrels=tmp / "qrels.tsv",
            queries=tmp / "queries.jsonl",
            corpus=tmp / "corpus.jsonl",
        )
        run = runs.import_run(
            session=session, golden=golden, name="bm25", path=tmp / "run.trec",
            source_name="run.trec",
        )  # fmt: skip
        detection = detector_runs.detect_duplicates(
            session=session, golden=golden, user=None, threshold=0.8, near=0.5
        )
        partition: dict[float, Partition] = {}
        covered: dict[float, int] = {}
        for depth, threshold in enumerate(THRESHOLDS, start=1):
            detection = detector_runs.apply_threshold(
                session=session, run=detection, threshold=threshold, user=None,
                now=datetime.now(UTC),
            )  # fmt: skip
            assert golden.id is not None
            partition[threshold] = _partition(session, golden.id)
            session.refresh(golden)
            made = triages.create_triage(
                session=session, run=run, golden=golden, depth=depth, k=1, user=None
            )
            assert made.id is not None
            covered[threshold] = _covered(session, made.id)
        lead = users.create_user(
            session=session, email="lead@example.com", password="long enough", role=Role.LEAD
        )
        token = users.create_token(session=session, user=lead, name="t").secret
    # the two thresholds tell apart every figure the tests read
    assert partition[0.5] != partition[0.95]
    assert covered[0.5] > covered[0.95] > 0
    assert golden.id is not None
    assert run.id is not None
    assert detection.id is not None
    return Copies(golden.id, run.id, detection.id, token, partition, covered)


def _both(http: httpx.Client, apply: str, thresholds: tuple[float, ...]) -> list[httpx.Response]:
    """The applies at ``thresholds`` sent at the same moment (a barrier releases them)."""
    return at_once(
        [lambda t=t: http.post(apply, json={"threshold": t}) for t in thresholds],
        seconds=DEADLINE_S,
    )


def test_two_applies_at_once_store_one_whole_and_record_both(
    engine: Engine, server: LiveServer, tmp_path: Path
) -> None:
    copies = _copies(engine, tmp_path)
    apply = f"/api/v1/detector-runs/{copies.detector_id}/apply"
    wrong: list[str] = []
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {copies.token}"}, timeout=60
    ) as http:
        for round_ in range(ROUNDS):
            order = THRESHOLDS if round_ % 2 == 0 else THRESHOLDS[::-1]
            with Session(engine) as session:
                before = session.get(DetectorRun, copies.detector_id)
                assert before is not None
                applications = len(before.applications or []) + 2
            answers = _both(http, apply, order)
            codes = [a.status_code for a in answers]
            assert codes == [200, 200], (round_, [a.text[:300] for a in answers])
            with Session(engine) as session:
                run = session.get(DetectorRun, copies.detector_id)
                golden = session.get(GoldenSet, copies.golden_id)
                assert run is not None
                assert golden is not None
                stored = _partition(session, copies.golden_id)
                clustered = sum(len(c) for c in stored)
                said = (
                    f"round {round_}: the run says J {run.threshold} ({run.clustered_documents} "
                    f"clustered documents, {len(run.applications or [])} applications of "
                    f"{applications}), the corpus has {clustered} clustered documents"
                )
                whole = run.threshold in THRESHOLDS and stored == copies.partition[run.threshold]
                recorded = len(run.applications or []) == applications
                if not (whole and run.clustered_documents == clustered and recorded):
                    wrong.append(said)
                assert golden.detector_run_id == copies.detector_id
    assert wrong == [], f"{len(wrong)} of {ROUNDS} rounds: {wrong[:3]}"


def test_a_triage_made_during_applies_names_the_clusters_it_was_decided_with(
    engine: Engine, server: LiveServer, tmp_path: Path
) -> None:
    copies = _copies(engine, tmp_path)
    apply = f"/api/v1/detector-runs/{copies.detector_id}/apply"
    make = f"/api/v1/runs/{copies.run_id}/triages"
    headers = {"Authorization": f"Bearer {copies.token}"}
    answers: Counter[tuple[str, int]] = Counter()
    made: list[int] = []
    barrier = threading.Barrier(2)
    lock = threading.Lock()

    def applies() -> None:
        with httpx.Client(base_url=server.url, headers=headers, timeout=60) as http:
            barrier.wait(timeout=30)
            for i in range(APPLIES):
                got = http.post(apply, json={"threshold": THRESHOLDS[i % 2]})
                with lock:
                    answers["apply", got.status_code] += 1

    def triages_() -> None:
        with httpx.Client(base_url=server.url, headers=headers, timeout=60) as http:
            barrier.wait(timeout=30)
            # depth 1 and 2 were made alone; the misses are the same at every depth
            for depth in range(3, 3 + TRIAGES):
                got = http.post(make, json={"depth": depth, "k": 1})
                with lock:
                    answers["triage", got.status_code] += 1
                if got.status_code == 201:
                    made.append(got.json()["id"])

    threads = [threading.Thread(target=applies), threading.Thread(target=triages_)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S)
    assert answers == {("apply", 200): APPLIES, ("triage", 201): TRIAGES}
    wrong = []
    with Session(engine) as session:
        for triage_id in made:
            triage = session.get(Triage, triage_id)
            assert triage is not None
            assert triage.detector_run_id == copies.detector_id
            threshold = triage.detector_threshold
            covered = _covered(session, triage_id)
            if threshold not in copies.covered or covered != copies.covered[threshold]:
                wrong.append(f"triage {triage_id}: J {threshold} with {covered} covered misses")
    assert wrong == [], f"{len(wrong)} of {len(made)}: {wrong[:3]} ({copies.covered})"
