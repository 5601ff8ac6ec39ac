"""Benchmark: how long the whole suite takes, as CI runs it, on a fresh clone.

Clones the repository's HEAD into a temporary folder and runs ``CI=true bash .ci/run`` there
(a virtual environment, ruff, mypy, lint-imports, pytest on every core), --runs times one after
the other, with ``../shared`` beside the clone when it exists (the SciFact tests run then).
Prints each run's wall time and test count, the median, and the target: at most two thirds of
the suite's time before issue 14 (13 min 49 s = 829 s for 894 tests, measured the same way on
commit dae281c). Exits 1 when a run fails or the median misses the target.

    python benchmarks/suite_time.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEFORE_SECONDS = 829  # dae281c, fresh clone, CI=true bash .ci/run
TARGET_SECONDS = BEFORE_SECONDS * 2 / 3
SUMMARY = re.compile(r"^=+ (.*(?:passed|failed).*) =+$", re.M)


def one_run(clone: Path) -> tuple[float, str, int]:
    shutil.rmtree(clone, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    started = time.monotonic()
    done = subprocess.run(
        ["bash", ".ci/run"],
        cwd=clone,
        env={**os.environ, "CI": "true"},
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - started
    found = SUMMARY.findall(done.stdout)
    return seconds, (found[-1] if found else "no pytest summary"), done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    # The clone sits beside ../shared when the checkout does (the SciFact tests run then).
    base = ROOT.parent if (ROOT.parent / "shared").is_dir() else Path(tempfile.gettempdir())
    clone = base / f"misstriage-suite-time-{os.getpid()}"
    times: list[float] = []
    failed = False
    try:
        for number in range(1, args.runs + 1):
            seconds, summary, status = one_run(clone)
            times.append(seconds)
            failed |= status != 0
            print(f"run {number}: {seconds:6.0f} s  exit {status}  {summary}", flush=True)
    finally:
        shutil.rmtree(clone, ignore_errors=True)
    median = statistics.median(times)
    print(
        f"median {median:.0f} s ({median / 60:.1f} min) = {median / BEFORE_SECONDS:.0%} of the "
        f"{BEFORE_SECONDS} s before; target <= {TARGET_SECONDS:.0f} s (two thirds): "
        + ("met" if median <= TARGET_SECONDS and not failed else "MISSED")
    )
    return 1 if failed or median > TARGET_SECONDS else 0


if __name__ == "__main__":
    sys.exit(main())
