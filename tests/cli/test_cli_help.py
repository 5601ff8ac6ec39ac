"""``misstriage --help`` lists the commands without importing them, and says of each what
the command's own help says (SUMMARIES is kept equal to it here)."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from app.cli import COMMANDS, SUMMARIES, main


def test_the_summaries_are_the_commands_own() -> None:
    assert set(SUMMARIES) == set(COMMANDS)
    ctx = click.Context(main)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None
        for limit in (30, 45, 60, 80, 200):
            stand_in = click.Command(name, help=SUMMARIES[name])
            assert stand_in.get_short_help_str(limit) == command.get_short_help_str(limit), name


@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_listing_is_clicks(width: int) -> None:
    """Word for word what click writes when it imports every command."""

    class Importing(click.Group):
        def list_commands(self, ctx: click.Context) -> list[str]:
            return main.list_commands(ctx)

        def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
            return main.get_command(ctx, name)

    reference = Importing(
        name="main", help=main.help, params=main.params, context_settings=main.context_settings
    )
    ours = CliRunner().invoke(main, ["--help"], terminal_width=width)
    theirs = CliRunner().invoke(reference, ["--help"], terminal_width=width)
    assert ours.exit_code == theirs.exit_code == 0
    assert ours.output == theirs.output


def test_the_listing_imports_no_command() -> None:
    probe = (
        "import sys\n"
        "from app.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('app.cli.', 'sqlalchemy', 'polars', 'app.services')\n"
        "print('IMPORTED:' + ','.join(sorted(m for m in sys.modules if m.startswith(heavy))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip().splitlines()[-1] == "IMPORTED:"
