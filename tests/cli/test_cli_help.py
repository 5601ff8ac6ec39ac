"""``misstriage --help`` lists the commands without importing them, and says of each what
the command's own help says (SUMMARIES is kept equal to it here). Each command's own --help
loads neither the database nor the web stack (the choices and defaults written out in
app/cli/params.py are kept equal to their sources here); benchmarks/cli_help.py times them."""

from __future__ import annotations

import json
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


#: What no command's --help may load: the database, the web stack, the models and services.
HEAVY = (
    "sqlalchemy",
    "sqlmodel",
    "alembic",
    "polars",
    "pyarrow",
    "fastapi",
    "starlette",
    "app.models",
    "app.services",
    "app.db",
)


def _command_paths() -> list[tuple[str, ...]]:
    """Every command, and every subcommand of a group (``db upgrade``)."""
    ctx = click.Context(main)
    paths: list[tuple[str, ...]] = []
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        assert command is not None
        paths.append((name,))
        if isinstance(command, click.Group):
            paths += [(name, sub) for sub in command.list_commands(click.Context(command))]
    return paths


HELP_PROBE = """
import json, sys
from app.cli import main
try:
    main([*sys.argv[1:], "--help"], prog_name="misstriage")
    status = 0
except SystemExit as exc:
    status = exc.code
print("PROBE:" + json.dumps({"status": status, "modules": sorted(sys.modules)}))
"""


@pytest.mark.parametrize("path", _command_paths(), ids=" ".join)
def test_a_commands_help_loads_no_heavy_module(path: tuple[str, ...]) -> None:
    """As the console script runs it (``misstriage = app.cli:main``), in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", HELP_PROBE, *path],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    text, _, probe = done.stdout.rpartition("PROBE:")
    found = json.loads(probe)
    assert found["status"] == 0, done.stderr
    assert f"Usage: misstriage {' '.join(path)} [OPTIONS]" in text
    loaded = [m for m in found["modules"] if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert loaded == [], f"misstriage {' '.join(path)} --help loads {loaded[:10]}"


def test_every_command_is_probed() -> None:
    paths = _command_paths()
    assert {p[0] for p in paths} == set(COMMANDS)
    assert ("db", "upgrade") in paths


def test_the_written_out_choices_and_defaults_are_their_sources() -> None:
    from app.cli import params
    from app.eval import DEFAULT_DEPTHS, Gain, Order
    from app.eval.cluster_profile import DEFAULT_KS, DEFAULT_THRESHOLD
    from app.eval.conventions import DEFAULT_DEPTH, DEFAULT_K
    from app.eval.depth_cost import DEFAULT_TOLERANCE
    from app.eval.diagnosis import DEFAULT_NDCG_THRESHOLD, DEFAULT_RECALL_THRESHOLD
    from app.eval.values import INT32_MAX
    from app.exporters import Tracker
    from app.models import Role

    assert tuple(r.value for r in Role) == params.ROLES
    assert tuple(t.value for t in Tracker) == params.TRACKERS
    assert tuple(o.value for o in Order) == params.ORDERS
    assert tuple(g.value for g in Gain) == params.GAINS
    assert params.DEFAULT_DEPTH == DEFAULT_DEPTH
    assert params.DEFAULT_K == DEFAULT_K
    assert params.INT32_MAX == INT32_MAX
    assert params.DEFAULT_DEPTHS == DEFAULT_DEPTHS
    assert params.DEFAULT_TOLERANCE == DEFAULT_TOLERANCE
    assert params.DEFAULT_RECALL_THRESHOLD == DEFAULT_RECALL_THRESHOLD
    assert params.DEFAULT_NDCG_THRESHOLD == DEFAULT_NDCG_THRESHOLD
    assert params.CLUSTER_KS == DEFAULT_KS
    assert params.CLUSTER_THRESHOLD == DEFAULT_THRESHOLD


def test_the_commands_offer_the_choices() -> None:
    """The options that take the written-out values (a choice dropped from an option, or a
    default, would show here)."""
    from app.cli import clusters, evaluate, service, users

    def option(command: click.Command, name: str) -> click.Parameter:
        return next(p for p in command.params if p.name == name)

    def choices(command: click.Command, name: str) -> tuple[str, ...]:
        kind = option(command, name).type
        assert isinstance(kind, click.Choice)
        return tuple(kind.choices)

    assert (
        choices(service.create_user, "role")
        == choices(users.user, "role")
        == ("reviewer", "lead", "admin")
    )
    assert choices(service.export, "tracker") == ("github", "gitlab", "jira", "linear", "webhook")
    assert (
        choices(service.import_run, "order")
        == choices(evaluate.evaluate, "order")
        == choices(clusters.clusters, "order")
        == ("trec_eval", "rank", "file")
    )
    assert choices(evaluate.evaluate, "gain") == ("exp", "linear")
    assert option(evaluate.evaluate, "depth").default == 50
    assert option(evaluate.evaluate, "k").default == 10
    assert option(evaluate.evaluate, "depths").default == "10,20,50,100,200,1000"
    assert option(evaluate.evaluate, "tolerance").default == 0.01
    assert option(evaluate.evaluate, "recall_threshold").default == 0.8
    assert option(evaluate.evaluate, "ndcg_threshold").default == 0.5
    assert option(clusters.clusters, "ks").default == "10,20,30,40,50"
    assert option(clusters.clusters, "threshold").default == 4
    assert option(service.triage, "depth").default == 50
    assert option(service.triage, "k").default == 10
    row_id = option(service.triage, "run_id").type
    assert isinstance(row_id, click.IntRange)
    assert row_id.max == 2**31 - 1
