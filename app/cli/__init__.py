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
    "dedup": "app.cli.dedup:dedup",
    "detector": "app.cli.detector:detector",
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
    "gate": "app.cli.gate:gate_command",
}

#: command name -> its help's first paragraph, for ``misstriage --help``: the list of commands
#: without importing any of them (importing every command took 2.6 s; one command's help is
#: its own). tests/cli/test_cli_help.py keeps it equal to the commands' own help.
SUMMARIES = {
    "agreement": (
        "How often the reviewers of a double-reviewed triage agreed: percent agreement, "
        "Cohen's kappa (two reviewers), Fleiss' kappa, Krippendorff's alpha, with 95% "
        "bootstrap intervals, per cause, and the confusion between causes."
    ),
    "backup": (
        "Back the database up while the service runs (SQLite: online backup API; PostgreSQL: "
        "pg_dump, custom format). Prints the backup's path on stdout."
    ),
    "clusters": (
        "unique-clusters@k over every query of a run, judged or not: per k the mean distinct "
        "clusters, the distinct fraction, the marginal distinct clusters per added slot and "
        "the distribution; with the corpus's text, the prompt tokens of the top k and their "
        "price."
    ),
    "create-token": "Print a new API token for a user, alone on stdout (shown once).",
    "create-user": "Create an account (exit 1 if the email exists).",
    "db": "Database schema commands.",
    "detector": "A golden set's near-duplicate detector runs: find, calibrate, apply, import ids.",
    "dedup": (
        "Find near-duplicate documents of a corpus (MinHash LSH candidates, each verified by "
        "its exact Jaccard similarity, clusters as connected components) and write the corpus "
        "again with a shared cluster_id on every document that has a copy."
    ),
    "demo": (
        "Set up the demo (accounts, a golden set, a series of three runs, their triages) and "
        "serve it."
    ),
    "evaluate": (
        "Evaluate runs against a golden set: recall@k, recall@depth, nDCG@k, micro recall, "
        "the depth curve and the misses at the candidate depth."
    ),
    "export": (
        "Push the triage's backlog to an issue tracker: one issue per cause, updated on the "
        "next export. Credentials come from the MISSTRIAGE_<TRACKER>_* settings."
    ),
    "gate": (
        "Gate a new run against a baseline on a golden set: R@depth and nDCG@k before and "
        "after with a paired randomisation test, and the relevant documents that left or "
        "entered the top depth."
    ),
    "import-golden-set": "Import a golden set (all or nothing).",
    "import-run": "Import a run into a golden set (all or nothing).",
    "serve": "Migrate the database, then serve the web UI and the API.",
    "triage": (
        "Create a triage: every miss of the run at the depth, on a work queue; with "
        "``--reviewers`` 2 or 3, a sample (``--fraction``, ``--seed``) gets that many "
        "reviewers."
    ),
    "user": (
        "Change one account: exactly one of --role, --deactivate, --reactivate and --reset-"
        "password. Exit 1 for an unknown email or a change the rules refuse (the last active "
        "admin)."
    ),
}


def _database_error(exc: Exception) -> tuple[int, str] | None:
    """(exit status, what happened) for an error of the database that is not a bug: it cannot
    be used at all (2: the URL is not one; 1: it cannot be reached, opened or read), or it
    refused a value of the input that no check before it caught (2: a NUL byte in
    PostgreSQL's text; ``app.db.refused_value``). None for any other error (a bug). Looked up
    only once something failed, so ``evaluate`` never imports the database stack."""
    errors = sys.modules.get("sqlalchemy.exc")
    if errors is None:
        return None
    if isinstance(exc, errors.ArgumentError | errors.NoSuchModuleError):
        return 2, "cannot be used"
    if isinstance(exc, errors.OperationalError | errors.InterfaceError | errors.TimeoutError):
        return 1, "cannot be used"
    # "file is not a database" (SQLite) is the bare DatabaseError: no subclass of it
    if type(exc) is errors.DatabaseError:
        return 1, "cannot be used"
    if isinstance(exc, errors.DataError):
        from app.db import refused_value

        if refused_value(exc):
            return 2, "refused a value of the input"
    return None


class LazyGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        """Every command: a database that cannot be used, or that refuses a value, is one line,
        never a traceback."""
        try:
            return super().invoke(ctx)
        except Exception as exc:
            known = _database_error(exc)
            if known is None:
                raise
            status, said = known
            orig = getattr(exc, "orig", None) or exc
            first = (str(orig).strip().splitlines() or [type(orig).__name__])[0][:200]
            click.echo(f"misstriage: error: the database {said}: {first}", err=True)
            sys.exit(status)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their summaries, as click writes them, from SUMMARIES alone."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        # a stand-in command of the same help: click's own shortening, word for word
        rows = [
            (name, click.Command(name, help=SUMMARIES[name]).get_short_help_str(limit))
            for name in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

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
