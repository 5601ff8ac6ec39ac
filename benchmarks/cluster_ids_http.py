"""Benchmark: importing cluster ids over HTTP while reviewers work the queue.

Usage:
    .venv/bin/python benchmarks/cluster_ids_http.py [--backends sqlite,postgresql]
        [--documents 100000] [--misses 10000] [--reviewers 4] [--workers 2] [--repeat 3]
        [--timeout 1800]

Issue "Set-based writes that never hold the queue's lock for more than a second": a side file
of cluster ids (``doc_id,cluster_id``, CSV with a header) for a large corpus imports as a
detector run and is applied at once, while reviewers keep claiming and labelling misses of
the same golden set; the queue must keep answering within 1 s throughout.

For each backend, on a fresh database (a throwaway misstriage_bench_* database on PostgreSQL,
a file in a temporary folder on SQLite): a lead and --reviewers reviewer accounts with API
tokens (``queue_http.create_accounts``), the real server (``misstriage serve --workers N``),
and through the API a golden set whose corpus (BEIR corpus.jsonl, generated in code) holds
--documents documents, a run and a triage of --misses misses (``queue_http.generated_files``:
misses/2 queries with two relevant documents each, the run returning three other documents
per query; every document of both files is in the corpus; enough misses that the
reviewers do not drain the queue during the imports, else the report says so). The side
file gives every corpus document a cluster id, in pairs (--documents/2 clusters, the pairs
drawn at random, seed 7).

Then --repeat times: the reviewers (``queue_http.review``: claim, label, again, back to back,
each with its own keep-alive client) and a prober (``GET /triages/{id}`` every 50 ms) start
just before the lead's ``POST /golden-sets/{id}/detector-runs/import`` of the side file (a
new detector run each time) and stop just after it answers. Every queue request sent during
the import is timed.

Printed per backend: the import's seconds (each, and the median), its answers, the queue
requests timed during the imports, their p50/p99/max latency (claim, label and probe
together, and per kind), the labels made meanwhile and the non-2xx queue answers by status
(409s the queue documents are fine; 5xx are failures). Exits 1 when the worst queue latency
during any import exceeds 1.0 s, an import did not answer 201, or a 5xx was seen (also when a
backend failed). The suspicious lines of each server log follow. The machine is shared:
compare within a run. Loopback only; servers, temporary folders and databases are removed
even on failure; the script stops itself after --timeout seconds.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from queue_http import (
    DEPTH,
    REQUEST_TIMEOUT,
    SETUP_TIMEOUT,
    K,
    Reviewer,
    create_accounts,
    error_code,
    generated_files,
    percentile,
    review,
)
from support import (
    HEALTH_TIMEOUT,
    MISSTRIAGE,
    PG_URL,
    bench_database,
    free_port,
    log_problems,
    print_log_problems,
    random_secret,
    run_bounded,
    stop_server,
    tail,
    wait_healthy,
)

from app.settings import Settings

BACKENDS = ("sqlite", "postgresql")
#: The issue's bound on any queue answer while a set-based write runs.
LATENCY_TARGET_S = 1.0
#: The prober's period.
PROBE_EVERY_S = 0.05
#: How long the import may take before the client gives up on it.
IMPORT_TIMEOUT = 900.0
WORDS = [
    "search",
    "ranking",
    "recall",
    "query",
    "index",
    "shard",
    "replica",
    "cache",
    "token",
    "vector",
    "embedding",
    "lexical",
    "dense",
    "sparse",
    "rerank",
    "judge",
    "relevant",
    "passage",
    "corpus",
    "document",
    "field",
    "boost",
    "filter",
    "facet",
]


@dataclass
class Probe:
    """The prober's requests: (kind, seconds, status)."""

    times: list[tuple[str, float, int]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)


@dataclass
class ImportRound:
    """One import with the queue traffic around it."""

    seconds: float
    status: int
    answer: str
    #: what a 201 made: "detector run 3: 50,000 clusters of 100,000 documents"
    made: str = ""
    #: (kind, seconds) of every queue request: claim, label, probe
    latencies: list[tuple[str, float]] = field(default_factory=list)
    labels: int = 0
    #: non-2xx queue answers, "claim 409 stale_version": n
    errors: Counter[str] = field(default_factory=Counter)
    drained: bool = False


@dataclass
class BackendResult:
    """What one backend's run measured (or why it failed)."""

    backend: str
    setup_seconds: float | None = None
    rounds: list[ImportRound] = field(default_factory=list)
    error: str | None = None
    log_problems: list[str] = field(default_factory=list)


def corpus_ids(n_documents: int, qrels: bytes, run: bytes) -> list[str]:
    """The corpus's document ids: every document of the qrels and of the run, then fillers up
    to ``n_documents``."""
    ids: dict[str, None] = {}
    for line in qrels.decode().splitlines():
        ids[line.split()[2]] = None
    for line in run.decode().splitlines():
        ids[line.split()[2]] = None
    if len(ids) > n_documents:
        raise ValueError(f"--documents must be at least {len(ids):,} for these misses")
    ids.update((f"d{i:07d}", None) for i in range(n_documents - len(ids)))
    return list(ids)


def corpus_file(ids: list[str], seed: int = 7) -> bytes:
    """BEIR corpus.jsonl: one short generated text per document."""
    rng = random.Random(seed)
    lines = []
    for doc_id in ids:
        text = " ".join(rng.choices(WORDS, k=12))
        lines.append(f'{{"_id": "{doc_id}", "title": "", "text": "{text}"}}\n')
    return "".join(lines).encode()


def side_file(ids: list[str], seed: int = 7) -> bytes:
    """``doc_id,cluster_id`` with a header: the documents in random pairs (one left alone
    when their number is odd)."""
    shuffled = ids[:]
    random.Random(seed).shuffle(shuffled)
    rows = ["doc_id,cluster_id\n"]
    rows.extend(f"{doc_id},c{i // 2:07d}\n" for i, doc_id in enumerate(shuffled))
    return "".join(rows).encode()


def build_golden(
    base: str, lead_token: str, n_misses: int, corpus: bytes, qrels: bytes, run: bytes
) -> tuple[int, int]:
    """Golden set with its corpus, run and triage through the API (as
    ``queue_http.build_triage``): the golden set's id and the triage's (its misses checked)."""
    headers = {"Authorization": f"Bearer {lead_token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=SETUP_TIMEOUT) as client:
        answer = client.post(
            "/api/v1/golden-sets",
            data={"name": "bench-clusters"},
            files={
                "qrels": ("bench.qrels", qrels, "text/plain"),
                "corpus": ("corpus.jsonl", corpus, "application/jsonl"),
            },
        )
        if answer.status_code != 201:
            raise RuntimeError(f"golden set import: {answer.status_code} {answer.text[:500]}")
        golden_id = int(answer.json()["id"])
        answer = client.post(
            f"/api/v1/golden-sets/{golden_id}/runs",
            data={"name": "bench-run"},
            files={"run": ("bench.trec", run, "text/plain")},
        )
        if answer.status_code != 201:
            raise RuntimeError(f"run import: {answer.status_code} {answer.text[:500]}")
        run_id = answer.json()["id"]
        answer = client.post(f"/api/v1/runs/{run_id}/triages", json={"depth": DEPTH, "k": K})
        if answer.status_code != 201:
            raise RuntimeError(f"triage: {answer.status_code} {answer.text[:500]}")
        triage = answer.json()
    if triage.get("misses") != n_misses:
        raise RuntimeError(f"the triage has {triage.get('misses')} misses, expected {n_misses}")
    return golden_id, int(triage["id"])


def probe(
    base: str,
    token: str,
    triage_id: int,
    start: threading.Barrier,
    stop: threading.Event,
    found: Probe,
) -> None:
    """A cheap queue read (the triage's counts) every 50 ms until ``stop``, each timed."""
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=base, headers=headers, timeout=REQUEST_TIMEOUT) as client:
            client.get("/healthz")  # open the keep-alive connection before the clock starts
            start.wait()
            while not stop.is_set():
                sent = time.perf_counter()
                answer = client.get(f"/api/v1/triages/{triage_id}")
                seconds = time.perf_counter() - sent
                found.times.append(("probe", seconds, answer.status_code))
                if not answer.is_success:
                    found.errors[f"probe {answer.status_code} {error_code(answer)}"] += 1
                stop.wait(max(0.0, PROBE_EVERY_S - seconds))
    except threading.BrokenBarrierError:
        found.errors["probe: the start barrier broke"] += 1
    except Exception as error:  # reported with the results
        found.errors[f"probe client {type(error).__name__}: {str(error)[:80]}"] += 1


def import_round(
    base: str,
    lead_token: str,
    golden_id: int,
    triage_id: int,
    accounts: list[Reviewer],
    ids: bytes,
    number: int,
) -> ImportRound:
    """The reviewers and the prober start, the lead imports the side file, they stop."""
    reviewers = [Reviewer(index=r.index, user_id=r.user_id, token=r.token) for r in accounts]
    found = Probe()
    start = threading.Barrier(len(reviewers) + 2)
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=review, args=(r, base, triage_id, start, stop), daemon=True, name=f"r{r.index}"
        )
        for r in reviewers
    ]
    threads.append(
        threading.Thread(
            target=probe,
            args=(base, accounts[0].token, triage_id, start, stop, found),
            daemon=True,
            name="probe",
        )
    )
    headers = {"Authorization": f"Bearer {lead_token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=IMPORT_TIMEOUT) as client:
        client.get("/healthz")
        for thread in threads:
            thread.start()
        try:
            start.wait(timeout=HEALTH_TIMEOUT)
            sent = time.perf_counter()
            answer = client.post(
                f"/api/v1/golden-sets/{golden_id}/detector-runs/import",
                files={"ids": (f"clusters-{number}.csv", ids, "text/csv")},
            )
            seconds = time.perf_counter() - sent
        finally:
            stop.set()
            start.abort()
            for thread in threads:
                while thread.is_alive():  # short joins, so SIGALRM reaches the main thread
                    thread.join(timeout=0.5)
    if answer.status_code == 201:
        run = answer.json()
        text = ""
        made = f"detector run {run.get('id')}: {run.get('clusters'):,} clusters of "
        made += f"{run.get('clustered_documents'):,} documents"
    else:
        text, made = f"{error_code(answer)} {answer.text[:500]}", ""
    result = ImportRound(seconds=seconds, status=answer.status_code, answer=text, made=made)
    for reviewer in reviewers:
        result.latencies.extend(("claim", s) for s in reviewer.claims)
        result.latencies.extend(("label", s) for s in reviewer.labels)
        result.labels += len(reviewer.labels)
        result.errors.update(reviewer.errors)
        if reviewer.failure:
            result.errors[f"reviewer failed: {reviewer.failure[:80]}"] += 1
        # a claim answered 204 (nothing left to claim) is timed but holds no miss
        result.drained = result.drained or len(reviewer.claims) > len(reviewer.held)
    result.latencies.extend((kind, s) for kind, s, _ in found.times)
    result.errors.update(found.errors)
    return result


def server_errors(errors: Counter[str]) -> int:
    """How many of the counted answers ("claim 409 stale_version": n) were 5xx."""
    return sum(n for key, n in errors.items() if key.split()[1:2] and key.split()[1][:1] == "5")


def bench_backend(
    backend: str,
    args: argparse.Namespace,
    processes: list[subprocess.Popen[bytes]],
) -> BackendResult:
    """Fresh database and server for ``backend``; the golden set, then ``repeat`` imports."""
    result = BackendResult(backend)
    qrels, run = generated_files(args.misses)
    ids = corpus_ids(args.documents, qrels, run)
    corpus = corpus_file(ids)
    clusters = side_file(ids)
    with tempfile.TemporaryDirectory(prefix="misstriage-bench-") as tmp_name:
        tmp = Path(tmp_name)
        log = tmp / "server.log"
        with bench_database() if backend == "postgresql" else nullcontext() as pg_name:
            if backend == "postgresql":
                url = PG_URL.format(name=pg_name)
            else:
                url = f"sqlite:///{tmp / 'bench.db'}"
            secret = random_secret()
            env = {
                **os.environ,
                "DATABASE_URL": url,
                "MISSTRIAGE_ENVIRONMENT": "test",
                "MISSTRIAGE_SECRET_KEY": secret,
            }
            process: subprocess.Popen[bytes] | None = None
            try:
                started = time.perf_counter()
                settings = Settings(DATABASE_URL=url, environment="test", secret_key=secret)
                lead_token, reviewers, _ = create_accounts(settings, args.reviewers)
                port = free_port()
                with log.open("wb") as out:
                    process = subprocess.Popen(
                        [
                            str(MISSTRIAGE),
                            "serve",
                            "--host",
                            "127.0.0.1",
                            "--port",
                            str(port),
                            "--workers",
                            str(args.workers),
                        ],
                        env=env,
                        cwd=tmp,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                processes.append(process)
                base = f"http://127.0.0.1:{port}"
                wait_healthy(base, process, log)
                golden_id, triage_id = build_golden(
                    base, lead_token, args.misses, corpus, qrels, run
                )
                result.setup_seconds = time.perf_counter() - started
                print(
                    f"  golden set {golden_id} ({len(ids):,} documents), triage {triage_id} "
                    f"({args.misses:,} misses) ready in {result.setup_seconds:.1f} s",
                    flush=True,
                )
                for number in range(1, args.repeat + 1):
                    found = import_round(
                        base, lead_token, golden_id, triage_id, reviewers, clusters, number
                    )
                    result.rounds.append(found)
                    worst = max((s for _, s in found.latencies), default=0.0)
                    print(
                        f"  import {number}: {found.status} in {found.seconds:.1f} s; "
                        f"{len(found.latencies):,} queue requests meanwhile, worst "
                        f"{worst * 1000:.0f} ms, {found.labels:,} labels"
                        f"{'; ' + found.made if found.made else ''}"
                        f"{'; the queue drained' if found.drained else ''}"
                        f"{'; ' + found.answer if found.answer else ''}",
                        flush=True,
                    )
            except Exception as error:
                result.error = f"{type(error).__name__}: {error}"
                print(f"  {backend} failed: {result.error}\n{tail(log)}", flush=True)
            finally:
                if process is not None:
                    stop_server(process)
                    processes.remove(process)
                result.log_problems = log_problems(log)
    return result


def ms(value: float | None) -> str:
    """Milliseconds (from ``percentile``) without decimals, or a dash."""
    return "-" if value is None else f"{value:.0f}"


def report(results: list[BackendResult], repeat: int) -> bool:
    """Print the tables and the target; True when every backend met it."""
    print(
        f"\n| backend | import s (median of {repeat}) | import s each | import answers "
        "| queue requests | p50 ms | p99 ms | max ms | labels | non-2xx queue answers |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    ok = True
    verdicts = []
    for r in results:
        seconds = [x.seconds for x in r.rounds]
        latencies = [s for x in r.rounds for _, s in x.latencies]
        statuses = Counter(str(x.status) for x in r.rounds)
        errors = Counter[str]()
        for x in r.rounds:
            errors.update(x.errors)
        median = f"{statistics.median(seconds):.1f}" if seconds else "-"
        each = " / ".join(f"{s:.1f}" for s in seconds) or "-"
        answers = ", ".join(f"{k}: {n}" for k, n in sorted(statuses.items())) or "-"
        shown_errors = ", ".join(f"{k}: {n}" for k, n in sorted(errors.items())) or "0"
        print(
            f"| {r.backend} | {'FAILED' if r.error else median} | {each} | {answers} "
            f"| {len(latencies):,} | {ms(percentile(latencies, 50))} "
            f"| {ms(percentile(latencies, 99))} | {ms(percentile(latencies, 100))} "
            f"| {sum(x.labels for x in r.rounds):,} | {shown_errors} |"
        )
        worst = max(latencies, default=float("inf"))
        five_xx = server_errors(errors) + sum(1 for x in r.rounds if x.status >= 500)
        complete = not r.error and len(r.rounds) == repeat
        all_201 = complete and all(x.status == 201 for x in r.rounds)
        met = complete and all_201 and worst <= LATENCY_TARGET_S and five_xx == 0
        ok = ok and met
        verdicts.append((r, worst, all_201, five_xx, met))

    print("\n| backend | kind | requests | p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|---|")
    for r in results:
        for kind in ("claim", "label", "probe"):
            values = [s for x in r.rounds for k, s in x.latencies if k == kind]
            print(
                f"| {r.backend} | {kind} | {len(values):,} | {ms(percentile(values, 50))} "
                f"| {ms(percentile(values, 99))} | {ms(percentile(values, 100))} |"
            )

    print(
        f"\n| backend | worst queue latency <= {LATENCY_TARGET_S:g} s | every import 201 "
        "| no 5xx | target |"
    )
    print("|---|---|---|---|---|")
    for r, worst, all_201, five_xx, met in verdicts:
        if r.error:
            print(f"| {r.backend} | - | - | - | FAILED: {r.error} |")
            continue
        print(
            f"| {r.backend} | {'yes' if worst <= LATENCY_TARGET_S else 'NO'} "
            f"({worst:.3f} s) | {'yes' if all_201 else 'NO'} "
            f"| {'yes' if five_xx == 0 else f'NO ({five_xx})'} | {'met' if met else 'NOT met'} |"
        )
    for r in results:
        for number, x in enumerate(r.rounds, 1):
            if x.answer:
                print(f"\n{r.backend} import {number} answered {x.status}: {x.answer}")
            if x.drained:
                print(f"\n{r.backend} import {number}: the queue drained (raise --misses)")
    for r in results:
        print_log_problems(r.backend, r.log_problems)
    return ok


def main() -> None:
    """Parse arguments, arm the time limit, run every backend, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--documents", type=int, default=100_000, help="corpus documents")
    parser.add_argument("--misses", type=int, default=10_000, help="an even number")
    parser.add_argument("--reviewers", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="uvicorn workers")
    parser.add_argument("--repeat", type=int, default=3, help="imports per backend")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds for everything")
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if unknown := set(backends) - set(BACKENDS):
        parser.error(f"unknown backends {sorted(unknown)}; choose from {BACKENDS}")
    if args.misses < 2 or args.misses % 2:
        parser.error("--misses must be an even number >= 2")
    if min(args.reviewers, args.workers, args.repeat) < 1:
        parser.error("--reviewers, --workers and --repeat must be >= 1")

    def body(processes: list[subprocess.Popen[bytes]]) -> bool:
        results = []
        for backend in backends:
            print(
                f"{backend}: {args.documents:,} documents in {args.documents // 2:,} clusters, "
                f"{args.reviewers} reviewers and a prober, {args.workers} workers, "
                f"{args.repeat} imports ...",
                flush=True,
            )
            results.append(bench_backend(backend, args, processes))
        return report(results, args.repeat)

    run_bounded(args.timeout, body, name="cluster_ids_http")


if __name__ == "__main__":
    main()
