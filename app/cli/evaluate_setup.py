"""What ``misstriage evaluate`` needs before and around its work: its options parsed
(runs, thresholds, retrieval latencies) and the process tuned for one large read (modules
imported while the run is read, the collector kept off start-up's objects, a progress bar)."""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import importlib
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    # the evaluation core loads polars: imported where a command runs, not for its --help
    from app.eval import Measure
    from app.eval.textio import ProgressFn


def parse_runs(specs: tuple[str, ...]) -> list[tuple[str, Path]]:
    """``--run NAME=FILE`` (or FILE, named by its stem): a usage error for a name used twice."""
    runs: list[tuple[str, Path]] = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = Path(spec).name.split(".")[0], spec
        if not name or not path:
            raise click.BadParameter(f"{spec!r}: expected NAME=FILE", param_hint="--run")
        if any(name == seen for seen, _ in runs):
            raise click.BadParameter(f"run name {name!r} is used twice", param_hint="--run")
        runs.append((name, Path(path)))
    return runs


def retrieval_p95(text: str | None) -> dict[int, float] | None:
    """``--retrieval-p95``: a usage error (exit 2) when it is not depth:ms pairs."""
    if not text:
        return None
    from app.eval.depth_cost import parse_retrieval_p95

    try:
        return parse_retrieval_p95(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--retrieval-p95'") from None


def parse_fail_under(specs: tuple[str, ...]) -> list[tuple[Measure, float]]:
    """``--fail-under R@50=0.85,nDCG@10=0.4`` (repeatable): measures and thresholds in [0, 1]."""
    from app.eval import parse_measure

    thresholds: list[tuple[Measure, float]] = []
    for spec in specs:
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, sep, value = part.partition("=")
            try:
                if not sep:
                    raise ValueError(f"{part!r}: expected MEASURE=VALUE, e.g. 'R@50=0.85'")
                measure = parse_measure(name)
                threshold = float(value)
                if not 0.0 <= threshold <= 1.0:
                    raise ValueError(f"{part!r}: the threshold must be within [0, 1]")
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--fail-under") from None
            thresholds.append((measure, threshold))
    return thresholds


#: Modules needed once a run is read (numpy to rank a large one, and for JSON or CSV the
#: output's models): imported in a thread while the run is read, since the parser leaves the
#: interpreter free most of the time (about 40 ms less wall time at 7M lines on two cores,
#: measured).
LATER_MODULES = ("numpy",)
OUTPUT_MODULES = ("app.services.imports.metrics",)
#: Runs up to this size (about 50,000 TREC lines: app.eval.ranking.SMALL_PART_LINES) are
#: ranked without numpy: it is not imported ahead for them.
SMALL_RUNS_BYTES = 2 << 20


def later_modules(output_format: str, runs: list[Path]) -> tuple[str, ...]:
    """What to import while the runs are read: numpy for a large run, the output's models
    for JSON or CSV (the text table needs none)."""
    size = sum(p.stat().st_size for p in runs if p.is_file())
    modules = LATER_MODULES if size > SMALL_RUNS_BYTES else ()
    return modules if output_format == "table" else modules + OUTPUT_MODULES


def import_in_background(modules: tuple[str, ...]) -> None:
    """Import ``modules`` in a daemon thread (see LATER_MODULES)."""
    if not modules:
        return

    def run() -> None:
        # evaluate multiplies no matrices: OpenBLAS need not start a thread per core
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        for module in modules:
            # a module that fails to import fails again where it is used, and is reported there
            with contextlib.suppress(Exception):
                importlib.import_module(module)

    threading.Thread(target=run, name="misstriage-imports", daemon=True).start()


@contextmanager
def collector_off() -> Iterator[None]:
    """The collector off while the block runs: importing the evaluation core (polars, numpy)
    makes objects by the hundred thousand and no garbage, and collecting them again and again
    would cost a tenth of a small evaluation's time (as ``app.cli.LazyGroup`` imports a
    command's module)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


@contextmanager
def start_up_frozen() -> Iterator[None]:
    """What start-up created (modules, classes) lives to the end: the collector leaves it
    out of the collections that the evaluation's own objects trigger, until the block ends.
    And at exit, where the interpreter would collect every object only to drop them all,
    they are frozen first (a twentieth of a second at every run)."""
    _freeze_at_exit()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@functools.cache
def _freeze_at_exit() -> None:
    atexit.register(gc.freeze)  # once per process


@contextmanager
def progress(paths: list[Path]) -> Iterator[ProgressFn | None]:
    """A byte-count progress bar on stderr, shown only when reading takes over two seconds
    and stderr is a terminal."""
    if not sys.stderr.isatty():
        yield None  # tqdm would draw nothing: not even imported
        return
    from tqdm import tqdm

    total = sum(p.stat().st_size for p in paths if p.is_file())
    with tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        delay=2.0,
        file=sys.stderr,
        disable=None,
        desc="reading",
        leave=False,
    ) as bar:

        def advance(size: int) -> None:
            bar.update(size)

        yield advance
