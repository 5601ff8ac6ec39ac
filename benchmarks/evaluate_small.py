"""Benchmark: how long ``misstriage evaluate`` takes on a small golden set and run, from the shell.

Generates (fixed seed, in a temporary folder) a golden set of 50 queries with 1 to 5 graded
judgments each and a run of 20 results for 49 of them and for a query outside the golden set
(1,000 lines, tied scores, a repeated document), then runs the console script of the virtual
environment (``<venv>/bin/misstriage evaluate --qrels ... --run ...``, as a user does) --runs
times, each in a fresh process. Prints each wall time, the median and the target: at most
0.5 s (before: 0.66-0.85 s on a loaded two-core machine). Exits 1 when the command fails or
the median misses the target.

    python benchmarks/evaluate_small.py [--runs 3] [--format table|json|csv]
        [--misstriage .venv/bin/misstriage]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 0.5
SEED = 20261204
QUERIES = 50
RESULTS = 20
CORPUS = 400


def generate(folder: Path) -> tuple[Path, Path]:
    """The qrels and run files (TREC) of the small golden set."""
    rng = random.Random(SEED)
    qrels, run = folder / "small.qrels", folder / "small.trec"
    judged: list[str] = []
    lines: list[str] = []
    for q in range(QUERIES):
        qid = f"q{q}"
        for doc in rng.sample(range(CORPUS), rng.randint(1, 5)):
            judged.append(f"{qid} 0 d{doc} {rng.choice((0, 1, 1, 2, 3))}\n")
        if q == QUERIES - 1:
            qid = "unjudged"  # a golden query the run does not answer, a run query unknown
        docs = rng.sample(range(CORPUS), RESULTS)
        docs[-1] = docs[0]  # a repeated document: dropped, counted
        score = 30.0
        for rank, doc in enumerate(docs, start=1):
            if rng.random() > 0.2:  # else tied with the one before
                score -= rng.random()
            lines.append(f"{qid} Q0 d{doc} {rank} {score:.3f} small\n")
    qrels.write_text("".join(judged))
    run.write_text("".join(lines))
    return qrels, run


def timed(command: list[str]) -> tuple[float, float, int, str]:
    """Wall seconds, CPU seconds (user + system, every thread: what a loaded machine's
    share does not change), exit status and stderr of one process."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    return wall, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status), stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--format", choices=["table", "json", "csv"], default="table")
    parser.add_argument(
        "--misstriage",
        type=Path,
        default=Path(sys.executable).parent / "misstriage",
        help="The console script to run (default: the one beside this Python).",
    )
    args = parser.parse_args()
    if not args.misstriage.is_file():
        print(f"no console script at {args.misstriage}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        qrels, run = generate(Path(tmp))
        lines = len(run.read_text().splitlines())
        print(f"input: {QUERIES} golden queries, a run of {lines:,} lines")
        command = [
            str(args.misstriage),
            "evaluate",
            "--qrels",
            str(qrels),
            "--run",
            f"small={run}",
            "--format",
            args.format,
        ]
        results = [timed(command) for _ in range(args.runs)]
    median = statistics.median(wall for wall, _, _, _ in results)
    cpu = statistics.median(cpu for _, cpu, _, _ in results)
    failed = [(code, err) for _, _, code, err in results if code != 0]
    shown = " ".join(f"{wall:.3f}" for wall, _, _, _ in results)
    print(
        f"misstriage evaluate --format {args.format}: median {median:.3f} s ({shown}); "
        f"CPU (user + system) median {cpu:.3f} s"
    )
    if failed:
        code, err = failed[0]
        print(f"exit {code}: {err.strip()[-500:]}", file=sys.stderr)
    met = median <= TARGET_SECONDS and not failed
    print(f"target: median <= {TARGET_SECONDS} s: " + ("met" if met else "MISSED"))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
