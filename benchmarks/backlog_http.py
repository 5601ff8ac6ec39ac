"""Benchmark: the backlog download at 100,000 misses, per format: first byte, whole answer,
and how much the server grows while it sends it.

An outside probe found ``format=json`` sending its first byte after 4.98 s and growing the
server by 259 MiB at 100,000 misses (it grouped every row in memory first), where JSONL took
0.05 s and 88 MiB and CSV 0.06 s and 58 MiB. For each backend: a fresh database, one server
process (``misstriage serve --workers 1``, so the process measured is the one answering), a
triage of --misses misses built through the API (queue_http's generated files), then each
format downloaded --repeat times by a client reading as fast as it can, while a thread samples
the server's resident memory every 10 ms (growth: the peak over the memory before the
first download; a negative one: the server gave memory back). Prints the median of each
figure and the targets:
first byte under 0.5 s and growth under 100 MiB for every format. Exits 1 when a target is
missed. Loopback only; stops itself after --timeout seconds.

Usage: python benchmarks/backlog_http.py [--misses 100000] [--repeat 3]
       [--backends postgresql,sqlite] [--timeout 900]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
from queue_http import build_triage, create_accounts
from support import (
    MISSTRIAGE,
    PG_URL,
    bench_database,
    free_port,
    random_secret,
    run_bounded,
    stop_server,
    tail,
    wait_healthy,
)

from app.settings import Settings

BACKENDS = ("postgresql", "sqlite")
FORMATS = ("json", "jsonl", "csv")
FIRST_BYTE_TARGET_S = 0.5
GROWTH_TARGET_MIB = 100.0
MIB = 1 << 20


@dataclass
class Download:
    first_byte_s: float
    total_s: float
    size: int
    growth_mib: float
    peak_mib: float


@dataclass
class Result:
    backend: str
    by_format: dict[str, list[Download]] = field(default_factory=dict)
    error: str | None = None


class Sampler(threading.Thread):
    """The peak resident memory of a process while it runs (sampled every 10 ms)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.process = psutil.Process(pid)
        self.peak = self.process.memory_info().rss
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.01):
            self.peak = max(self.peak, self.process.memory_info().rss)


def download(base: str, token: str, triage_id: int, fmt: str, pid: int, before: int) -> Download:
    """One download read as fast as the client can; ``before``: the server's resident
    memory before the first download (growth is counted from there, so memory a download
    keeps counts in the next ones too)."""
    sampler = Sampler(pid)
    sampler.start()
    size = 0
    first: float | None = None
    started = time.perf_counter()
    with (
        httpx.Client(timeout=300) as client,
        client.stream(
            "GET",
            f"{base}/api/v1/triages/{triage_id}/backlog?format={fmt}",
            headers={"Authorization": f"Bearer {token}"},
        ) as answer,
    ):
        if answer.status_code != 200:
            raise RuntimeError(f"{fmt}: {answer.status_code} {answer.read()[:300]!r}")
        for chunk in answer.iter_raw():
            if first is None:
                first = time.perf_counter() - started
            size += len(chunk)
    total = time.perf_counter() - started
    sampler.stopped.set()
    sampler.join()
    return Download(first or total, total, size, (sampler.peak - before) / MIB, sampler.peak / MIB)


def check(base: str, token: str, triage_id: int, n_misses: int) -> None:
    """The JSON answer is whole: every miss once, the groups' counts theirs."""
    with httpx.Client(timeout=300) as client:
        document = client.get(
            f"{base}/api/v1/triages/{triage_id}/backlog",
            headers={"Authorization": f"Bearer {token}"},
        ).json()
    ids = [m["miss_id"] for group in document["causes"] for m in group["misses"]]
    if len(ids) != n_misses or len(set(ids)) != n_misses:
        raise RuntimeError(f"the JSON backlog has {len(ids)} misses, expected {n_misses}")
    if any(group["count"] != len(group["misses"]) for group in document["causes"]):
        raise RuntimeError("a group's count is not its number of misses")


def bench_backend(backend: str, args: argparse.Namespace, processes: list) -> Result:
    result = Result(backend)
    with tempfile.TemporaryDirectory(prefix="misstriage-bench-") as tmp_name:
        tmp = Path(tmp_name)
        log = tmp / "server.log"
        with bench_database() if backend == "postgresql" else nullcontext() as pg_name:
            url = PG_URL.format(name=pg_name) if pg_name else f"sqlite:///{tmp / 'bench.db'}"
            secret = random_secret()
            env = {
                **os.environ,
                "DATABASE_URL": url,
                "MISSTRIAGE_ENVIRONMENT": "test",
                "MISSTRIAGE_SECRET_KEY": secret,
            }
            process = None
            try:
                settings = Settings(DATABASE_URL=url, environment="test", secret_key=secret)
                lead_token, _, _ = create_accounts(settings, 0)
                port = free_port()
                with log.open("wb") as out:
                    process = subprocess.Popen(
                        [str(MISSTRIAGE), "serve", "--port", str(port), "--workers", "1"],
                        env=env,
                        cwd=tmp,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                processes.append(process)
                base = f"http://127.0.0.1:{port}"
                wait_healthy(base, process, log)
                started = time.perf_counter()
                triage_id = build_triage(base, lead_token, args.misses)
                print(f"  {args.misses:,} misses in {time.perf_counter() - started:.0f} s")
                before = psutil.Process(process.pid).memory_info().rss
                for fmt in FORMATS:
                    result.by_format[fmt] = [
                        download(base, lead_token, triage_id, fmt, process.pid, before)
                        for _ in range(args.repeat)
                    ]
                    runs = result.by_format[fmt]
                    print(
                        f"  {fmt}: first byte "
                        + ", ".join(f"{d.first_byte_s:.3f}" for d in runs)
                        + " s; growth "
                        + ", ".join(f"{d.growth_mib:.0f}" for d in runs)
                        + " MiB",
                        flush=True,
                    )
                check(base, lead_token, triage_id, args.misses)  # last: it reads a whole JSON
            except Exception as error:
                result.error = f"{type(error).__name__}: {error}"
                print(f"  {backend} failed: {result.error}\n{tail(log)}", flush=True)
            finally:
                if process is not None:
                    stop_server(process)
                    processes.remove(process)
    return result


def report(results: list[Result]) -> bool:
    print(
        "\n| backend | format | first byte s (median) | whole answer s | MB | server growth "
        "MiB | server peak RSS MiB | first byte < 0.5 s | growth < 100 MiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ok = True
    for r in results:
        if r.error:
            print(f"| {r.backend} | - | FAILED: {r.error} | | | | | |")
            ok = False
            continue
        for fmt, runs in r.by_format.items():
            first = statistics.median(d.first_byte_s for d in runs)
            total = statistics.median(d.total_s for d in runs)
            size = statistics.median(d.size for d in runs) / 1e6
            growth = statistics.median(d.growth_mib for d in runs)
            peak = statistics.median(d.peak_mib for d in runs)
            met_first, met_growth = first < FIRST_BYTE_TARGET_S, growth < GROWTH_TARGET_MIB
            ok = ok and met_first and met_growth
            print(
                f"| {r.backend} | {fmt} | {first:.3f} | {total:.2f} | {size:.1f} "
                f"| {growth:.0f} | {peak:.0f} "
                f"| {'met' if met_first else 'NOT met'} | {'met' if met_growth else 'NOT met'} |"
            )
    print(json.dumps({"passed": ok}))
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", type=int, default=100_000, help="an even number")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--timeout", type=int, default=900, help="seconds for everything")
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if unknown := set(backends) - set(BACKENDS):
        parser.error(f"unknown backends {sorted(unknown)}; choose from {BACKENDS}")

    def body(processes: list) -> bool:
        results = []
        for backend in backends:
            print(f"{backend}: the backlog of {args.misses:,} misses ...", flush=True)
            results.append(bench_backend(backend, args, processes))
        return report(results)

    run_bounded(args.timeout, body, name="backlog")


if __name__ == "__main__":
    main()
