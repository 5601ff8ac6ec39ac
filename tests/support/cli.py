"""The ``misstriage`` command line run in the test's own process.

Click's CliRunner calls the same ``main`` the console script calls, with the environment a
process would see, and answers with what a finished process gives: the exit status, stdout and
stderr. An exception the command lets through is written to stderr as the interpreter would
write it (a traceback, exit 1), so "no traceback" assertions mean what they mean for a real
process. Starting a process costs a second or two of imports each time; a few tests still run
the real console script (``real_misstriage``) where the process itself is under test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from app.cli import main
from app.settings import get_settings
from tests.support.service import TEST_SECRET

#: The console script installed next to the interpreter (``pip install -e .``).
CONSOLE_SCRIPT = Path(sys.executable).with_name("misstriage")


@dataclass(frozen=True)
class Done:
    """A finished command, named as ``subprocess.CompletedProcess`` names it."""

    returncode: int
    stdout: str
    stderr: str


def service_environment(database_url: str | None) -> dict[str, str]:
    """What the service commands read: a test environment, the test secret, the database."""
    environment = {"MISSTRIAGE_ENVIRONMENT": "test", "MISSTRIAGE_SECRET_KEY": TEST_SECRET}
    if database_url:
        environment["DATABASE_URL"] = database_url
    return environment


def run_misstriage(*args: str | Path, env: Mapping[str, str | None] | None = None) -> Done:
    """``misstriage ARGS`` in this process; ``env`` is laid over os.environ (None unsets)."""
    # Settings are read once per process (lru_cache): each command reads its own environment.
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(
            main, [str(arg) for arg in args], env=dict(env or {}), prog_name="misstriage"
        )
    finally:
        get_settings.cache_clear()
    stderr = result.stderr
    if result.exc_info is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info))
    return Done(result.exit_code, result.stdout, stderr)


def misstriage(*args: str | Path, database_url: str | None = None) -> Done:
    """A command with the service's test environment (and the database, when given)."""
    return run_misstriage(*args, env=service_environment(database_url))


def service_cli(database_url: str, *args: str | Path) -> Done:
    """A service command on ``database_url``."""
    return misstriage(*args, database_url=database_url)


def evaluate_cli(*args: str | Path) -> Done:
    """``misstriage evaluate`` (or any command that needs no database), environment untouched."""
    return run_misstriage(*args)


def real_misstriage(
    *args: str | Path,
    env: Mapping[str, str],
    unset: Iterable[str] = (),
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """The installed console script as a separate process, for what only a process shows:
    ``env`` laid over os.environ, the ``unset`` variables removed."""
    environment = {**os.environ, **env}
    for name in unset:
        environment.pop(name, None)
    return subprocess.run(
        [str(CONSOLE_SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=timeout,
    )
