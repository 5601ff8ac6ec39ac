"""Benchmark: how long ``misstriage <command> --help`` takes, for every command.

Runs the console script of the virtual environment (``<venv>/bin/misstriage``, as a user
does) with ``--help`` after each command, each subcommand of a group (``db upgrade``) and
alone, --runs times each, in a fresh process. Prints each one's median wall time and the
target: at most 0.3 s (before: ``serve`` 1.3 s, ``db`` 1.7 s, ``user``, ``import-run`` and
``agreement`` about 1.2 s, ``backup`` 0.6 s). Exits 1 when a help fails or a median misses
the target.

    python benchmarks/cli_help.py [--runs 3] [--misstriage .venv/bin/misstriage]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 0.3


def command_paths() -> list[tuple[str, ...]]:
    """``()`` (``misstriage --help``), every command and every subcommand of a group."""
    import click

    from app.cli import main

    ctx = click.Context(main)
    paths: list[tuple[str, ...]] = [()]
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        paths.append((name,))
        if isinstance(command, click.Group):
            paths += [(name, sub) for sub in command.list_commands(click.Context(command))]
    return paths


def timed(misstriage: Path, path: tuple[str, ...]) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run(
        [str(misstriage), *path, "--help"], capture_output=True, check=False, cwd=ROOT
    )
    return time.perf_counter() - started, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
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
    failed = missed = False
    print(f"{'command':<38} {'median s':>8}  runs")
    for path in command_paths():
        results = [timed(args.misstriage, path) for _ in range(args.runs)]
        median = statistics.median(seconds for seconds, _ in results)
        status = max(code for _, code in results)
        failed |= status != 0
        missed |= median > TARGET_SECONDS
        shown = " ".join(f"{seconds:.3f}" for seconds, _ in results)
        mark = "" if median <= TARGET_SECONDS else "  MISSED"
        if status != 0:
            mark += f"  exit {status}"
        print(f"{' '.join(('misstriage', *path, '--help')):<38} {median:8.3f}  {shown}{mark}")
    print(
        f"target: every median <= {TARGET_SECONDS} s: "
        + ("met" if not (missed or failed) else "MISSED")
    )
    return 1 if missed or failed else 0


if __name__ == "__main__":
    sys.exit(main())
