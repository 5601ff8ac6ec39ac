"""What the HTTP benchmarks share: a throwaway database, a server process and its log.

Imported by the scripts beside it (run as ``python benchmarks/<script>.py``).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import string
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import NoReturn

import httpx
import psutil
import psycopg
from psycopg import sql

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
#: A benchmark database on the local server, by name.
PG_URL = "postgresql://postgres@127.0.0.1:5432/{name}"
#: The console script of this virtualenv, which the benchmarks start as servers.
MISSTRIAGE = Path(sys.executable).with_name("misstriage")
#: How long a server may take to answer /healthz after it starts.
HEALTH_TIMEOUT = 60.0
#: How long a server gets to stop after SIGTERM before SIGKILL.
STOP_GRACE = 10.0


class BenchTimeout(BaseException):
    """The global time limit passed (a BaseException so no ``except Exception`` eats it)."""


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def random_secret(length: int = 40) -> str:
    """A random string of letters and digits."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


@contextmanager
def bench_database() -> Iterator[str]:
    """A fresh PostgreSQL database misstriage_bench_<random>, dropped (FORCE) afterwards."""
    name = f"misstriage_bench_{secrets.token_hex(6)}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def stop_server(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server, SIGKILL it (and any child left) after 10 s."""
    if process.poll() is not None:
        return
    try:
        children = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    process.terminate()
    try:
        process.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_GRACE)
    for child in children:
        with suppress(psutil.NoSuchProcess):
            if child.is_running():
                child.kill()


def wait_healthy(base: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll GET /healthz until it answers 200 (60 s at most)."""
    deadline = time.monotonic() + HEALTH_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited ({process.returncode}):\n{tail(log)}")
        with suppress(httpx.TransportError):
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"/healthz did not answer 200 within {HEALTH_TIMEOUT:.0f} s")


def tail(log: Path, lines: int = 30) -> str:
    """The last lines of the server log."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def log_problems(log: Path) -> list[str]:
    """Server log lines that look like trouble: JSON lines (``misstriage serve``'s format)
    at level WARNING or above, with a 5xx status or a traceback; other lines that mention
    errors, warnings, tracebacks, 5xx or kills."""
    words = ("error", "warning", "traceback", "exception", '" 5', "killed")
    try:
        text = log.read_text(errors="replace")
    except FileNotFoundError:
        return []
    problems = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if isinstance(entry, dict):
            # the logger "uvicorn.error" logs routine lines: judge by level and status
            if (
                entry.get("level") in ("WARNING", "ERROR", "CRITICAL")
                or int(entry.get("status") or 0) >= 500
                or "exception" in entry
            ):
                problems.append(line)
        elif any(w in line.lower() for w in words):
            problems.append(line)
    return problems


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a process and its living descendants."""
    process = psutil.Process(pid)
    total = 0.0
    for member in [process, *process.children(recursive=True)]:
        with suppress(psutil.NoSuchProcess):
            times = member.cpu_times()
            total += times.user + times.system
    return total


def cpu_by_process(pid: int) -> dict[int, float]:
    """User plus system CPU seconds of a process and of each living descendant, by pid."""
    process = psutil.Process(pid)
    found: dict[int, float] = {}
    for member in [process, *process.children(recursive=True)]:
        with suppress(psutil.NoSuchProcess):
            times = member.cpu_times()
            found[member.pid] = times.user + times.system
    return found


def arm_time_limit(seconds: int, processes: list[subprocess.Popen[bytes]]) -> threading.Timer:
    """Raise BenchTimeout after ``seconds`` (SIGALRM), so the script cleans up and reports;
    if cleaning up hangs too, a watchdog kills the servers in ``processes`` and exits 124."""

    def expire(_signum: int, _frame: object) -> None:
        raise BenchTimeout(f"the global limit of {seconds} s passed")

    def last_resort() -> None:
        for process in list(processes):
            with suppress(ProcessLookupError):
                process.kill()
        print("benchmark: cleanup did not finish; exiting", file=sys.stderr, flush=True)
        os._exit(124)

    signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    watchdog = threading.Timer(seconds + 90, last_resort)
    watchdog.daemon = True
    watchdog.start()
    return watchdog


def run_bounded(
    seconds: int, body: Callable[[list[subprocess.Popen[bytes]]], bool], *, name: str = "benchmark"
) -> NoReturn:
    """Run ``body`` (it starts its servers into the list it is given and answers whether the
    figures met their targets) within ``seconds``, then exit 0 or 1: over time it is stopped,
    cleaned up and reported as a failure (see ``arm_time_limit``)."""
    processes: list[subprocess.Popen[bytes]] = []
    watchdog = arm_time_limit(seconds, processes)
    try:
        ok = body(processes)
    except BenchTimeout as error:
        print(f"{name}: stopped: {error}", file=sys.stderr, flush=True)
        ok = False
    finally:
        signal.alarm(0)
        watchdog.cancel()
    sys.exit(0 if ok else 1)


def print_log_problems(backend: str, problems: list[str], *, shown: int = 20) -> None:
    """Print the first suspicious server log lines of a backend (see ``log_problems``)."""
    if problems:
        print(f"\n{backend} server log, suspicious lines ({len(problems)}):")
        for line in problems[:shown]:
            print(f"  {line[:300]}")
