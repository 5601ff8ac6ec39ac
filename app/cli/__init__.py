"""The ``misstriage`` command line."""

from __future__ import annotations

import click

from app import __version__
from app.cli.evaluate import evaluate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="misstriage")
def main() -> None:
    """misstriage: find out why recall is not good enough, one miss at a time."""


main.add_command(evaluate)
