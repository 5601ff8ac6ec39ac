"""The ``misstriage`` command line.

Subcommands are imported when called: ``misstriage evaluate`` must not pay for the web and
database stack it does not use.
"""

from __future__ import annotations

import gc
import importlib
import sys
from typing import Any

import click

from app import __version__

#: command name -> "module:attribute"
COMMANDS = {
    "evaluate": "app.cli.evaluate:evaluate",
    "clusters": "app.cli.clusters:clusters",
    "demo": "app.cli.demo:demo",
    "serve": "app.cli.service:serve",
    "db": "app.cli.service:db",
    "create-user": "app.cli.service:create_user",
    "create-token": "app.cli.service:create_token",
    "user": "app.cli.users:user",
    "import-golden-set": "app.cli.service:import_golden_set",
    "import-run": "app.cli.service:import_run",
    "triage": "app.cli.service:triage",
    "export": "app.cli.service:export",
    "agreement": "app.cli.agreement:agreement",
    "backup": "app.cli.backup:backup",
}


def _unusable_database(exc: Exception) -> int | None:
    """The exit status for an error that says the database cannot be used at all (2: the URL
    is not one; 1: it cannot be reached, opened or read), None for any other error. Looked up
    only once something failed, so ``evaluate`` never imports the database stack."""
    errors = sys.modules.get("sqlalchemy.exc")
    if errors is None:
        return None
    if isinstance(exc, errors.ArgumentError | errors.NoSuchModuleError):
        return 2
    if isinstance(exc, errors.OperationalError | errors.InterfaceError | errors.TimeoutError):
        return 1
    # "file is not a database" (SQLite) is the bare DatabaseError: no subclass of it
    if type(exc) is errors.DatabaseError:
        return 1
    return None


class LazyGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        """Every command: a database that cannot be used is one line, never a traceback."""
        try:
            return super().invoke(ctx)
        except Exception as exc:
            status = _unusable_database(exc)
            if status is None:
                raise
            orig = getattr(exc, "orig", None) or exc
            first = (str(orig).strip().splitlines() or [type(orig).__name__])[0][:200]
            click.echo(f"misstriage: error: the database cannot be used: {first}", err=True)
            sys.exit(status)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attribute = target.partition(":")
        # Importing a command's modules (polars, numpy, pydantic) makes objects by the hundred
        # thousand and no garbage: the collector, run over them again and again, would spend
        # a tenth of a small evaluation's time there.
        collecting = gc.isenabled()
        gc.disable()
        try:
            command = getattr(importlib.import_module(module), attribute)
        finally:
            if collecting:
                gc.enable()
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="misstriage")
def main() -> None:
    """misstriage: find out why recall is not good enough, one miss at a time."""
