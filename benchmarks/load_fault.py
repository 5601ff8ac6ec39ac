"""Load and fault test: 64 reviewers over HTTP, two app processes, PostgreSQL, faults midway.

A throwaway PostgreSQL cluster (never the shared server) on a free loopback port, migrated
and seeded in code (a golden set, a run and a triage of --misses misses; --reviewers reviewer
accounts with API tokens, and one for the checker). Two ``misstriage serve`` processes on
free loopback ports. The reviewers (load_fault_clients.py) claim, think --think-ms, label at
the miss's version, round-robin over the two processes, repeating failed requests, for
--seconds. At --kill-at one app process is killed (SIGKILL) and started again; at
--pg-restart-at PostgreSQL restarts (``pg_ctl restart -m fast``). A monitor polls /healthz of
both processes. Afterwards load_fault_verify.py checks the database against the clients'
logs: 0 lost, 0 doubled, 0 stuck (definitions there), label events == labelled misses.

Prints a readable report and its JSON (also written, with the clients' log and the server
logs, under --out); exits 1 unless every check holds. Loopback only; stops itself after
--timeout seconds; the servers and the cluster are removed even on failure.

Usage: python benchmarks/load_fault.py [--seconds 120] [--reviewers 64] [--misses 20000]
       [--kill-at S] [--pg-restart-at S] [--think-ms 100,300] [--lease-seconds 30]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import suppress
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
from load_fault_clients import Reviewer, review
from load_fault_report import summarise, write_report
from load_fault_verify import check_labels, drain, wait_for_leases
from sqlmodel import Session
from support import (
    MISSTRIAGE,
    free_port,
    random_secret,
    run_bounded,
    stop_server,
    wait_healthy,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support.db: the throwaway cluster the suite uses too

from app.db import make_engine  # noqa: E402
from app.migrate import upgrade  # noqa: E402
from app.models import Role  # noqa: E402
from app.services.accounts import users  # noqa: E402
from app.services.imports import golden_sets, runs  # noqa: E402
from app.services.triage import triages  # noqa: E402
from app.settings import Settings  # noqa: E402
from tests.support.db import ThrowawayCluster  # noqa: E402

DATABASE = "misstriage_load"
PASSWORD = "load-fault-password"
MONITOR_EVERY_S = 0.25
#: Extra accounts that claim a miss and walk away without a word (a closed browser tab): half
#: at the kill (their leases expire during the run), half at the end (after it). The queue
#: must hand those misses out again once the leases expire.
WALKERS = 8


def walk_away(walker: Reviewer, base: str, triage_id: int) -> int | None:
    """Claim one miss and leave it leased; its id (None if the claim got nothing)."""
    headers = {"Authorization": f"Bearer {walker.token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30.0) as client:
        answer = client.post(f"/api/v1/triages/{triage_id}/claim")
    return int(answer.json()["id"]) if answer.status_code == 200 else None


def walked_away_outcome(
    connection: psycopg.Connection[Any],
    walked: dict[str, list[int | None]],
    walkers: list[Reviewer],
) -> dict[str, Any]:
    """What became of the misses the walkers left: labelled by whom (never by a walker)."""
    walker_ids = {w.user_id for w in walkers}
    outcome: dict[str, Any] = {}
    for when, ids in walked.items():
        rows = connection.execute(
            "SELECT id, state, labelled_by_id FROM miss WHERE id = ANY(%s)",
            ([i for i in ids if i is not None],),
        ).fetchall()
        outcome[when] = {
            "claimed": len([i for i in ids if i is not None]),
            "labelled_afterwards_by_others": sum(
                1 for _, state, by in rows if state == "labelled" and by not in walker_ids
            ),
        }
    return outcome


def seed(settings: Settings, n_misses: int, n_reviewers: int, tmp: Path) -> dict[str, Any]:
    """Migrate; accounts with tokens; a triage of ``n_misses`` misses (n/2 queries with two
    relevant documents each, a run returning three other documents per query)."""
    upgrade(settings)
    qrels, run = tmp / "load.qrels", tmp / "load.trec"
    queries = n_misses // 2
    qrels.write_text("".join(f"q{q} 0 rel-{q}-{j} 1\n" for q in range(queries) for j in (0, 1)))
    run.write_text(
        "".join(
            f"q{q} Q0 other-{q}-{r} {r + 1} {9 - r} load\n"
            for q in range(queries)
            for r in (0, 1, 2)
        )
    )
    engine = make_engine(settings)
    try:
        with Session(engine, expire_on_commit=False) as session:
            accounts = []
            # The reviewers, then WALKERS accounts that claim a miss and leave, then the checker.
            for index in range(n_reviewers + WALKERS + 1):
                user = users.create_user(
                    session=session,
                    email=f"reviewer{index:03d}@example.com",
                    password=PASSWORD,
                    role=Role.REVIEWER,
                )
                token = users.create_token(session=session, user=user, name="load").secret
                assert user.id is not None
                accounts.append(Reviewer(index=index, user_id=user.id, token=token))
            golden = golden_sets.import_golden_set(session=session, name="load", qrels=qrels)
            stored = runs.import_run(
                session=session, golden=golden, name="load-run", path=run, source_name=run.name
            )
            triage = triages.create_triage(
                session=session, run=stored, golden=golden, depth=50, k=10, user=None
            )
    finally:
        engine.dispose()
    if triage.misses != n_misses:
        raise RuntimeError(f"the triage has {triage.misses} misses, expected {n_misses}")
    return {
        "triage_id": triage.id,
        "reviewers": accounts[:n_reviewers],
        "walkers": accounts[n_reviewers:-1],
        "checker": accounts[-1],
    }


class Servers:
    """The app processes: start, kill -9, start again on the same port."""

    def __init__(self, env: dict[str, str], out: Path, processes: list[Any]) -> None:
        self.env, self.out, self.processes = env, out, processes
        self.ports = [free_port(), free_port()]
        self.current: list[subprocess.Popen[bytes] | None] = [None, None]
        self.logs: list[Path] = []

    def base(self, index: int) -> str:
        """The URL of app process ``index``."""
        return f"http://127.0.0.1:{self.ports[index]}"

    def start(self, index: int, tag: str = "") -> None:
        """Start process ``index``; return when its /healthz answers 200."""
        log = self.out / f"app{index}{tag}.log"
        self.logs.append(log)
        command = [
            str(MISSTRIAGE),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.ports[index]),
        ]
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [*command, "--workers", "1", "--log-format", "json"],
                env=self.env,
                cwd=self.out,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        self.current[index] = process
        self.processes.append(process)
        wait_healthy(self.base(index), process, log)

    def kill(self, index: int) -> None:
        """SIGKILL process ``index`` (no shutdown of any kind) and reap it."""
        process = self.current[index]
        assert process is not None
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def stop_all(self) -> None:
        """Stop every process started (SIGTERM, then SIGKILL)."""
        for process in list(self.processes):
            stop_server(process)
            self.processes.remove(process)


def monitor(
    servers: Servers, clock: Any, stop: threading.Event, seen: list[tuple[float, int, str]]
) -> None:
    """Poll /healthz of both processes until ``stop``, recording (time, process, outcome)."""
    with httpx.Client(timeout=2.0) as client:
        while not stop.wait(MONITOR_EVERY_S):
            for index in (0, 1):
                try:
                    outcome = str(client.get(f"{servers.base(index)}/healthz").status_code)
                except httpx.TransportError as error:
                    outcome = type(error).__name__
                seen.append((clock(), index, outcome))


def run(args: argparse.Namespace, out: Path, processes: list[Any]) -> dict[str, Any]:
    """Everything between the cluster's start and its removal; the report."""
    cluster = ThrowawayCluster.start()
    if cluster is None:
        raise RuntimeError("no throwaway PostgreSQL cluster possible (binaries, runuser)")
    servers: Servers | None = None
    try:
        with psycopg.connect(cluster.admin_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{DATABASE}"')
        url = cluster.admin_url.rsplit("/", 1)[0] + f"/{DATABASE}"
        secret = random_secret()
        settings = Settings(DATABASE_URL=url, environment="test", secret_key=secret)  # type: ignore[call-arg]
        began = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="misstriage-load-") as tmp:
            seeded = seed(settings, args.misses, args.reviewers, Path(tmp))
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "MISSTRIAGE_ENVIRONMENT": "test",
            "MISSTRIAGE_SECRET_KEY": secret,
            "MISSTRIAGE_LEASE_SECONDS": str(args.lease_seconds),
            "MISSTRIAGE_WEBHOOK_POLL_SECONDS": "0",
        }
        servers = Servers(env, out, processes)
        servers.start(0)
        servers.start(1)
        setup_s = time.perf_counter() - began
        print(
            f"setup: {args.misses:,} misses, {args.reviewers} reviewers, 2 app processes "
            f"ready in {setup_s:.1f} s; running {args.seconds} s ...",
            flush=True,
        )

        reviewers: list[Reviewer] = seeded["reviewers"]
        t0 = time.monotonic()

        def clock() -> float:
            return time.monotonic() - t0

        stop, monitor_stop = threading.Event(), threading.Event()
        health: list[tuple[float, int, str]] = []
        bases = [servers.base(0), servers.base(1)]
        threads = [
            threading.Thread(
                target=review,
                args=(r, bases, seeded["triage_id"], args.think, clock, stop),
                daemon=True,
                name=f"reviewer{r.index}",
            )
            for r in reviewers
        ]
        watcher = threading.Thread(
            target=monitor, args=(servers, clock, monitor_stop, health), daemon=True
        )
        watcher.start()
        for thread in threads:
            thread.start()
        faults: dict[str, float] = {}

        def sleep_until(moment: float) -> None:
            while clock() < moment:
                time.sleep(min(0.2, max(0.0, moment - clock())))

        walked: dict[str, list[int | None]] = {}
        sleep_until(args.kill_at)
        faults["kill"] = clock()
        servers.kill(1)
        walked["during_the_run"] = [
            walk_away(w, bases[0], seeded["triage_id"]) for w in seeded["walkers"][: WALKERS // 2]
        ]
        faults["killed"] = clock()
        print(f"  {faults['kill']:.1f} s: app process 1 killed (SIGKILL); restarting", flush=True)
        servers.start(1, "-restarted")
        faults["restarted_healthy"] = clock()
        sleep_until(args.pg_restart_at)
        faults["pg_restart"] = clock()
        print(f"  {faults['pg_restart']:.1f} s: PostgreSQL restarting (-m fast)", flush=True)
        cluster.pg_ctl("restart", "-m", "fast")
        faults["pg_up"] = clock()
        sleep_until(args.seconds)
        walked["at_the_end"] = [
            walk_away(w, bases[0], seeded["triage_id"]) for w in seeded["walkers"][WALKERS // 2 :]
        ]
        faults["stop"] = clock()
        stop.set()
        for thread in threads:
            while thread.is_alive():  # short joins, so SIGALRM reaches the main thread
                thread.join(timeout=0.5)
        faults["end"] = clock()
        monitor_stop.set()
        watcher.join(timeout=5)
        print(f"  {faults['end']:.1f} s: reviewers stopped; checking the database ...", flush=True)

        with psycopg.connect(url, autocommit=True) as connection:
            leases = wait_for_leases(connection, seeded["triage_id"], args.lease_seconds + 10)
            checker: Reviewer = seeded["checker"]
            drained, drain_report = drain(
                connection, servers.base(0), checker.token, checker.user_id, seeded["triage_id"]
            )
            labels = check_labels(connection, seeded["triage_id"], reviewers, drained)
            abandoned = walked_away_outcome(connection, walked, seeded["walkers"])
        with (out / "clients.jsonl").open("w") as sink:
            for reviewer in reviewers:
                for attempt in reviewer.attempts:
                    sink.write(json.dumps(asdict(attempt)) + "\n")
                for ack in reviewer.acknowledged:
                    sink.write(json.dumps({"acknowledged": asdict(ack)}) + "\n")
                for item in reviewer.unresolved:
                    sink.write(json.dumps({"unresolved": item, "reviewer": reviewer.index}) + "\n")
        return summarise(
            args=args,
            reviewers=reviewers,
            faults=faults,
            health=health,
            leases=leases,
            drain_report=drain_report,
            labels=labels,
            abandoned=abandoned,
            server_logs=servers.logs,
            setup_s=setup_s,
        )
    finally:
        if servers is not None:
            servers.stop_all()
        with suppress(OSError):
            shutil.copy(cluster.base / "server.log", out / "postgresql.log")
        cluster.destroy()


def main() -> None:
    """Parse arguments, arm the time limit, run, report; exit 1 unless every check holds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--reviewers", type=int, default=64)
    parser.add_argument(
        "--misses", type=int, default=20000, help="an even number; more than the run labels"
    )
    parser.add_argument("--kill-at", type=float, help="default: a third of --seconds")
    parser.add_argument("--pg-restart-at", type=float, help="default: 7/12 of --seconds")
    parser.add_argument("--think-ms", default="100,300", help="reading time, min,max")
    parser.add_argument("--lease-seconds", type=int, default=30)
    parser.add_argument(
        "--timeout", type=int, help="seconds for everything (default --seconds + 420)"
    )
    parser.add_argument("--out", type=Path, help="default var/load-fault/<UTC time>")
    args = parser.parse_args()
    args.kill_at = args.seconds / 3 if args.kill_at is None else args.kill_at
    args.pg_restart_at = args.seconds * 7 / 12 if args.pg_restart_at is None else args.pg_restart_at
    low, _, high = args.think_ms.partition(",")
    args.think = (float(low) / 1000, float(high or low) / 1000)
    if not 0 < args.kill_at < args.pg_restart_at < args.seconds:
        parser.error("need 0 < --kill-at < --pg-restart-at < --seconds")
    if args.misses < 2 or args.misses % 2 or args.reviewers < 1:
        parser.error("--misses must be even and >= 2, --reviewers >= 1")
    out = args.out or ROOT / "var" / "load-fault" / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)

    def body(processes: list[subprocess.Popen[bytes]]) -> bool:
        report = run(args, out, processes)
        return write_report(report, out)

    run_bounded(args.timeout or int(args.seconds) + 420, body, name="load-fault")


if __name__ == "__main__":
    main()
