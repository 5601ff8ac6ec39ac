"""Benchmark: importing an MS MARCO-scale run through the HTTP API, against a raw COPY.

Measures, for each backend (SQLite, PostgreSQL), the real server (`misstriage serve`, one
uvicorn worker, a fresh database) importing a 6.98M-line TREC run (233 MiB, the data of
benchmarks/evaluate_msmarco_scale.py, generated there if absent) with
`POST /api/v1/golden-sets/{id}/runs`, the file streamed from disk by httpx:

* wall time of that request, client side, split into phases seen from outside the server
  (body sent; the upload copied to its named temporary file; first bulk write to the
  database; the answer);
* peak RSS of the server and its children, sampled every 50 ms with psutil during the
  request, and the server process's own VmHWM from /proc at the end.

Then, as baselines, raw `COPY ... FROM STDIN` into a fresh PostgreSQL table (timed with the
commit) of (a) all the run's lines as six columns and (b) only the rows the service keeps
(the first 200 results of each query: qid, rank, doc_id, score), and prints the targets
"PostgreSQL import <= 1.2x the raw COPY" and "server RSS < 600 MiB" (issue 17); exits 1 when
either printed target is missed or a measurement fails. Loopback only; the whole
script stops itself after --timeout seconds; servers, temporary folders and the
misstriage_bench_* databases it creates are removed even on failure.

With ``--py-spy DIR`` (py-spy installed beside the interpreter), the server is sampled during
the run import (wall clock: idle threads too, native frames off) into DIR/<backend>.txt, the
collapsed stacks a flame graph tool reads.

Usage: python benchmarks/import_run_http.py [--queries N] [--backends sqlite,postgresql]
    [--py-spy DIR]
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
from evaluate_msmarco_scale import DEPTH, paths
from support import (
    MISSTRIAGE,
    PG_ADMIN,
    PG_URL,
    bench_database,
    cpu_seconds,
    free_port,
    log_problems,
    print_log_problems,
    random_secret,
    run_bounded,
    stop_server,
    tail,
    wait_healthy,
)

BENCHMARKS = Path(__file__).resolve().parent
GENERATOR = BENCHMARKS / "evaluate_msmarco_scale.py"
BACKENDS = ("sqlite", "postgresql")
EMAIL = "bench@example.com"
PASSWORD = "benchpass1"
SAMPLE_SECONDS = 0.05
REQUEST_TIMEOUT = 600.0
KEEP_DEPTH = 200  # the service's default keep_depth: rows it stores per query
COPY_BLOCK = 1 << 20
MIB = 2**20
RATIO_TARGET = 1.2  # issue 17: the import within 1.2x of a raw COPY of every line
RSS_TARGET_MIB = 600  # issue 17: server peak RSS < 600 MiB on both backends


@dataclass
class Phases:
    """Moments (perf_counter seconds) of one run import, seen from outside the server."""

    start: float = 0.0
    body_sent: float | None = None
    copy_seen: float | None = None
    copy_done: float | None = None
    db_write: float | None = None
    answered: float = 0.0
    rss_peak: float | None = None
    copies: dict[str, tuple[float, float]] = field(default_factory=dict)


@dataclass
class BackendResult:
    """What one backend's import measured (or why it failed)."""

    backend: str
    wall: float | None = None
    golden_wall: float | None = None
    rss_peak_mib: float | None = None
    rss_idle_mib: float | None = None
    hwm_mib: float | None = None
    children_hwm_mib: float | None = None
    cpu_seconds: float | None = None
    phases: Phases | None = None
    error: str | None = None
    log_problems: list[str] = field(default_factory=list)


class TimedReader(io.BufferedReader):
    """A binary file that notes when it was first read and when it reached its end, so the
    client knows when httpx finished handing the request body to the socket."""

    first_read: float | None = None
    eof_at: float | None = None

    def read(self, size: int | None = -1, /) -> bytes:
        """Read like a file; note the first read and the first empty read."""
        if self.first_read is None:
            self.first_read = time.perf_counter()
        data = super().read(size)
        if not data and self.eof_at is None:
            self.eof_at = time.perf_counter()
        return data


class Sampler(threading.Thread):
    """Every 50 ms: the summed RSS of the server and its children, and the phase markers
    (the upload's named temporary file in the server's TMPDIR; the first write to the
    SQLite WAL; the COPY statements PostgreSQL shows as active)."""

    def __init__(
        self,
        pid: int,
        upload_root: Path,
        run_size: int,
        wal: Path | None,
        pg_database: str | None,
    ) -> None:
        super().__init__(daemon=True)
        self.process = psutil.Process(pid)
        self.upload_root = upload_root
        self.run_size = run_size
        self.wal = wal
        self.pg_database = pg_database
        self.halt = threading.Event()
        self.peak = 0
        self.peak_at = 0.0
        self.phases = Phases()
        self.wal_mtime = self._wal_mtime()
        self.failure: BaseException | None = None

    def _wal_mtime(self) -> int | None:
        """The WAL file's modification time in ns, or None without one."""
        if self.wal is None:
            return None
        try:
            return self.wal.stat().st_mtime_ns
        except FileNotFoundError:
            return None

    def rss(self) -> int:
        """Summed RSS in bytes of the server and all its descendants."""
        total = 0
        try:
            processes = [self.process, *self.process.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0
        for process in processes:
            with suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                total += process.memory_info().rss
        return total

    def _upload_copy(self, now: float) -> None:
        """Note when the endpoint's named copy of the upload appears and is complete."""
        phases = self.phases
        if phases.copy_done is not None:
            return
        found = sorted(self.upload_root.glob("misstriage-upload-*/0-*"))
        if not found:
            return
        if phases.copy_seen is None:
            phases.copy_seen = now
        with suppress(FileNotFoundError):
            if found[0].stat().st_size >= self.run_size:
                phases.copy_done = now

    def _database(self, now: float, connection: psycopg.Connection[Any] | None) -> None:
        """Note the first write to the database (SQLite WAL) and each active COPY (PG)."""
        phases = self.phases
        if self.wal is not None and phases.db_write is None:
            # Only once the upload is copied: earlier writes (a token's last use) are not
            # the import's.
            mtime = self._wal_mtime()
            if phases.copy_done is None:
                self.wal_mtime = mtime
            elif mtime != self.wal_mtime:
                phases.db_write = now
        if connection is not None:
            rows = connection.execute(
                "SELECT query FROM pg_stat_activity WHERE datname = %s AND state = 'active' "
                "AND query ILIKE 'copy%%'",
                (self.pg_database,),
            ).fetchall()
            for (query,) in rows:
                table = query.split('"')[1] if '"' in query else query[:40]
                first, _ = phases.copies.get(table, (now, now))
                phases.copies[table] = (first, now)
                if phases.db_write is None:
                    phases.db_write = now

    def run(self) -> None:
        """Sample until stopped."""
        connection = None
        try:
            if self.pg_database is not None:
                connection = psycopg.connect(PG_ADMIN, autocommit=True)
            while not self.halt.is_set():
                now = time.perf_counter()
                rss = self.rss()
                if rss > self.peak:
                    self.peak, self.peak_at = rss, now
                self._upload_copy(now)
                self._database(now, connection)
                self.halt.wait(SAMPLE_SECONDS)
        except Exception as error:  # reported by the caller
            self.failure = error
        finally:
            if connection is not None:
                connection.close()

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self.halt.set()
        self.join(timeout=10)


def ensure_data(n_queries: int) -> tuple[Path, Path]:
    """The qrels and run paths, generated in a child process when absent."""
    qrels, run = paths(n_queries)
    if not (qrels.exists() and run.exists()):
        print(f"generating {run.name} ...", flush=True)
        subprocess.run(
            [sys.executable, str(GENERATOR), "--generate", "--queries", str(n_queries)],
            check=True,
        )
    return qrels, run


def count_lines(path: Path) -> int:
    """Lines of a file (also warms the page cache, so every import reads it from memory)."""
    lines = 0
    with path.open("rb") as handle:
        while block := handle.read(COPY_BLOCK * 8):
            lines += block.count(b"\n")
    return lines


def cli(env: dict[str, str], cwd: Path, *args: str) -> str:
    """Run a misstriage command against the bench database; its stdout, stripped."""
    done = subprocess.run(
        [str(MISSTRIAGE), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"misstriage {args[0]} failed ({done.returncode}): {done.stderr}")
    return done.stdout.strip()


def vm_hwm_mib(pid: int) -> float | None:
    """VmHWM (the kernel's peak RSS of one process) in MiB, or None if unreadable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def start_py_spy(pid: int, out: Path | None) -> subprocess.Popen[bytes] | None:
    """py-spy recording the server ``pid`` into ``out`` (collapsed stacks), or None."""
    if out is None:
        return None
    py_spy = Path(sys.executable).with_name("py-spy")
    if not py_spy.exists():
        raise RuntimeError(f"--py-spy: {py_spy} is not installed")
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [str(py_spy), "record", "--pid", str(pid), "--format", "raw", "--idle"]
    command += ["--threads", "--rate", "200", "--output", str(out)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_py_spy(spy: subprocess.Popen[bytes] | None) -> None:
    """Stop py-spy as Ctrl-C would, so that it writes its file."""
    if spy is None:
        return
    spy.send_signal(signal.SIGINT)
    try:
        spy.wait(timeout=30)
    except subprocess.TimeoutExpired:
        spy.kill()
        spy.wait()


def import_over_http(
    result: BackendResult,
    base: str,
    token: str,
    qrels: Path,
    run: Path,
    expected_lines: int,
    sampler: Sampler,
    pid: int,
    profile: Path | None = None,
) -> None:
    """Import the golden set, then the run (timed, sampled); fill ``result``."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=REQUEST_TIMEOUT) as client:
        start = time.perf_counter()
        with qrels.open("rb") as handle:
            answer = client.post(
                "/api/v1/golden-sets",
                data={"name": "bench"},
                files={"qrels": (qrels.name, handle, "text/plain")},
            )
        result.golden_wall = time.perf_counter() - start
        if answer.status_code != 201:
            raise RuntimeError(f"golden set import: {answer.status_code} {answer.text[:500]}")
        golden_id = answer.json()["id"]

        result.rss_idle_mib = sampler.rss() / MIB
        cpu_before = cpu_seconds(pid)
        spy = start_py_spy(pid, profile)
        sampler.start()
        try:
            with TimedReader(io.FileIO(run, "rb"), COPY_BLOCK) as handle:
                start = time.perf_counter()
                answer = client.post(
                    f"/api/v1/golden-sets/{golden_id}/runs",
                    data={"name": "bench-run"},
                    files={"run": (run.name, handle, "text/plain")},
                )
                end = time.perf_counter()
        finally:
            sampler.stop()
            stop_py_spy(spy)
        result.wall = end - start
        result.cpu_seconds = cpu_seconds(pid) - cpu_before
        result.rss_peak_mib = sampler.peak / MIB
        phases = sampler.phases
        phases.start, phases.answered, phases.body_sent = start, end, handle.eof_at
        phases.rss_peak = sampler.peak_at or None
        result.phases = phases
        if sampler.failure is not None:
            print(f"  (sampler failed: {sampler.failure!r})", flush=True)
        if answer.status_code != 201:
            raise RuntimeError(f"run import: {answer.status_code} {answer.text[:500]}")
        lines = answer.json().get("lines")
        if lines != expected_lines:
            raise RuntimeError(f"run import answered lines={lines}, expected {expected_lines}")


def bench_backend(
    backend: str,
    qrels: Path,
    run: Path,
    expected_lines: int,
    processes: list[subprocess.Popen[bytes]],
    profile: Path | None = None,
) -> BackendResult:
    """Start a server on a fresh database of ``backend``, import over HTTP, clean up."""
    result = BackendResult(backend)
    with tempfile.TemporaryDirectory(prefix="misstriage-bench-") as tmp_name:
        tmp = Path(tmp_name)
        server_tmp = tmp / "server-tmp"
        server_tmp.mkdir()
        log = tmp / "server.log"
        with bench_database() if backend == "postgresql" else nullcontext() as pg_name:
            if backend == "postgresql":
                url, wal = PG_URL.format(name=pg_name), None
            else:
                db_file = tmp / "bench.db"
                url, wal = f"sqlite:///{db_file}", Path(f"{db_file}-wal")
            env = {
                **os.environ,
                "DATABASE_URL": url,
                "MISSTRIAGE_ENVIRONMENT": "test",
                "MISSTRIAGE_SECRET_KEY": random_secret(),
                "TMPDIR": str(server_tmp),  # the server's upload copies land here
            }
            process: subprocess.Popen[bytes] | None = None
            try:
                cli(
                    env,
                    tmp,
                    "create-user",
                    "--email",
                    EMAIL,
                    "--password",
                    PASSWORD,
                    "--role",
                    "lead",
                )
                token = cli(env, tmp, "create-token", "--email", EMAIL)
                port = free_port()
                with log.open("wb") as out:
                    process = subprocess.Popen(
                        [str(MISSTRIAGE), "serve", "--host", "127.0.0.1", "--port", str(port)],
                        env=env,
                        cwd=tmp,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                processes.append(process)
                base = f"http://127.0.0.1:{port}"
                wait_healthy(base, process, log)
                sampler = Sampler(process.pid, server_tmp, run.stat().st_size, wal, pg_name)
                try:
                    import_over_http(
                        result,
                        base,
                        token,
                        qrels,
                        run,
                        expected_lines,
                        sampler,
                        process.pid,
                        profile,
                    )
                finally:
                    result.hwm_mib = vm_hwm_mib(process.pid)
                    with suppress(psutil.NoSuchProcess):
                        children = psutil.Process(process.pid).children(recursive=True)
                        hwms = [vm_hwm_mib(c.pid) or 0.0 for c in children]
                        result.children_hwm_mib = sum(hwms) if hwms else None
            except Exception as error:
                result.error = f"{type(error).__name__}: {error}"
                print(f"  {backend} failed: {result.error}\n{tail(log)}", flush=True)
            finally:
                if process is not None:
                    stop_server(process)
                    processes.remove(process)
                result.log_problems = log_problems(log)
    return result


def copy_baselines(run: Path, expected_lines: int) -> tuple[float, float, int]:
    """Seconds (with commit) of COPY of (a) every run line, (b) the rows the service keeps,
    into fresh tables of a fresh database; and the number of rows of (b)."""
    top = io.StringIO()
    kept = 0
    current, position = b"", 0
    with run.open("rb") as handle:
        for line in handle:
            qid, _, doc, _, score, _ = line.split()
            position = position + 1 if qid == current else 1
            current = qid
            if position <= KEEP_DEPTH:
                top.write(f"{qid.decode()}\t{position}\t{doc.decode()}\t{score.decode()}\n")
                kept += 1
    top_text = top.getvalue().encode()
    del top

    with bench_database() as name, psycopg.connect(PG_URL.format(name=name)) as connection:
        connection.execute(
            "CREATE TABLE raw_run (qid text, q0 text, doc_id text, rank int, "
            "score double precision, tag text)"
        )
        connection.execute(
            "CREATE TABLE raw_top (qid text, rank int, doc_id text, score double precision)"
        )
        connection.commit()

        start = time.perf_counter()
        with (
            connection.cursor() as cursor,
            cursor.copy("COPY raw_run FROM STDIN WITH (DELIMITER ' ')") as copy,
            run.open("rb") as handle,
        ):
            while block := handle.read(COPY_BLOCK):
                copy.write(block)
        connection.commit()
        all_lines = time.perf_counter() - start

        start = time.perf_counter()
        with connection.cursor() as cursor, cursor.copy("COPY raw_top FROM STDIN") as copy:
            view = memoryview(top_text)
            for offset in range(0, len(view), COPY_BLOCK):
                copy.write(view[offset : offset + COPY_BLOCK])
        connection.commit()
        top_rows = time.perf_counter() - start

        (copied,) = connection.execute("SELECT count(*) FROM raw_run").fetchone() or (0,)
        if copied != expected_lines:
            raise RuntimeError(f"COPY stored {copied} rows, expected {expected_lines}")
    return all_lines, top_rows, kept


def span(a: float | None, b: float | None) -> str:
    """b - a in seconds, or a dash when either moment was not seen."""
    return "-" if a is None or b is None else f"{b - a:.1f}"


def number(value: float | None, digits: int = 0) -> str:
    """A figure, or a dash."""
    return "-" if value is None else f"{value:,.{digits}f}"


def report(
    results: list[BackendResult], copies: tuple[float, float, int] | None, lines: int
) -> bool:
    """Print the tables and the targets; True when every measurement succeeded and every
    target printed was met."""
    print("\n| backend | run import wall s | server peak RSS MB (sampled) | VmHWM MB |")
    print("|---|---|---|---|")
    for r in results:
        if r.error:
            print(f"| {r.backend} | FAILED | {number(r.rss_peak_mib)} | {number(r.hwm_mib)} |")
        else:
            print(
                f"| {r.backend} | {number(r.wall, 1)} | {number(r.rss_peak_mib)} "
                f"| {number(r.hwm_mib)} |"
            )

    print(
        "\n| backend | body sent s | -> copy to temp file done s | -> first DB write s "
        "| -> answer s | server CPU s | RSS before MB | golden set s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    notes: list[str] = []
    for r in results:
        p = r.phases
        if p is None:
            continue
        print(
            f"| {r.backend} | {span(p.start, p.body_sent)} | {span(p.body_sent, p.copy_done)} "
            f"| {span(p.copy_done, p.db_write)} | {span(p.db_write, p.answered)} "
            f"| {number(r.cpu_seconds, 1)} | {number(r.rss_idle_mib)} "
            f"| {number(r.golden_wall, 1)} |"
        )
        notes.append(
            f"{r.backend}: sampled RSS peak {span(p.start, p.rss_peak)} s into the request"
        )
        notes.extend(
            f"{r.backend}: COPY {table} seen active {last - first:.1f} s (50 ms samples)"
            for table, (first, last) in p.copies.items()
        )
        if r.children_hwm_mib:
            notes.append(f"{r.backend}: server children VmHWM sum {r.children_hwm_mib:.0f} MB")
    print("".join(f"\n- {note}" for note in notes))

    ok = all(r.error is None for r in results)
    if copies is not None:
        all_lines, top_rows, kept = copies
        print("\n| raw COPY into PostgreSQL (with commit) | rows | s | rows/s |")
        print("|---|---|---|---|")
        print(
            f"| (a) every run line, 6 columns, text, DELIMITER ' ' | {lines:,} "
            f"| {all_lines:.1f} | {lines / all_lines:,.0f} |"
        )
        print(
            f"| (b) reference: top {KEEP_DEPTH} per query (qid, rank, doc_id, score) "
            f"| {kept:,} | {top_rows:.1f} | {kept / top_rows:,.0f} |"
        )
    pg = next((r for r in results if r.backend == "postgresql"), None)
    print()
    if pg is not None and pg.wall is not None and pg.error is None and copies is not None:
        ratio = pg.wall / copies[0]
        verdict = "met" if ratio <= RATIO_TARGET else "NOT met"
        ok = ok and ratio <= RATIO_TARGET
        print(
            f"PostgreSQL import / raw COPY of {lines:,} lines = {pg.wall:.1f} / "
            f"{copies[0]:.1f} = {ratio:.2f}x (target <= {RATIO_TARGET:g}x: {verdict})"
        )
    else:
        print("PostgreSQL import / raw COPY: not measured")
    for r in results:
        peaks = [v for v in (r.rss_peak_mib, r.hwm_mib) if v is not None]
        if not peaks:
            continue
        verdict = "met" if max(peaks) < RSS_TARGET_MIB else "NOT met"
        ok = ok and max(peaks) < RSS_TARGET_MIB
        print(
            f"{r.backend}: server RSS peak {max(peaks):,.0f} MiB "
            f"(target < {RSS_TARGET_MIB} MiB: {verdict})"
        )
    for r in results:
        print_log_problems(r.backend, r.log_problems)
        if r.error:
            print(f"\n{r.backend} FAILED: {r.error}")
    return ok


def main() -> None:
    """Parse arguments, arm the time limit, run every measurement, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=6980)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--timeout", type=int, default=1200, help="seconds for everything")
    parser.add_argument("--no-copy", action="store_true", help="skip the raw COPY baselines")
    parser.add_argument(
        "--py-spy", type=Path, metavar="DIR", help="profile the server into DIR/<backend>.txt"
    )
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if unknown := set(backends) - set(BACKENDS):
        parser.error(f"unknown backends {sorted(unknown)}; choose from {BACKENDS}")

    def body(processes: list[subprocess.Popen[bytes]]) -> bool:
        started = time.perf_counter()
        qrels, run = ensure_data(args.queries)
        lines = count_lines(run)
        expected = args.queries * DEPTH
        print(
            f"input: {run.name}, {lines:,} lines, {run.stat().st_size / MIB:.0f} MiB; "
            f"{qrels.name} (ready in {time.perf_counter() - started:.1f} s)",
            flush=True,
        )
        if lines != expected:
            raise SystemExit(f"{run} has {lines} lines, expected {expected}")
        results = []
        for backend in backends:
            print(f"importing over HTTP into {backend} ...", flush=True)
            profile = args.py_spy / f"{backend}.txt" if args.py_spy else None
            results.append(bench_backend(backend, qrels, run, expected, processes, profile))
        copies = None
        if not args.no_copy:
            print("raw COPY baselines ...", flush=True)
            copies = copy_baselines(run, expected)
        return report(results, copies, lines)

    run_bounded(args.timeout, body, name="import")


if __name__ == "__main__":
    main()
