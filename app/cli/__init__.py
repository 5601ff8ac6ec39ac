"""The ``misstriage`` command line.

Subcommands are imported when called: ``misstriage evaluate`` must not pay for the web and
database stack it does not use.
"""

from __future__ import annotations

import importlib

import click

from app import __version__

#: command name -> "module:attribute"
COMMANDS = {
    "evaluate": "app.cli.evaluate:evaluate",
    "demo": "app.cli.demo:demo",
    "serve": "app.cli.service:serve",
    "db": "app.cli.service:db",
    "create-user": "app.cli.service:create_user",
    "create-token": "app.cli.service:create_token",
    "import-golden-set": "app.cli.service:import_golden_set",
    "import-run": "app.cli.service:import_run",
    "triage": "app.cli.service:triage",
    "export": "app.cli.service:export",
    "backup": "app.cli.backup:backup",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="misstriage")
def main() -> None:
    """misstriage: find out why recall is not good enough, one miss at a time."""
