"""Parameter types the commands share."""

from __future__ import annotations

import math
from typing import cast

import click


class FiniteFloatRange(click.FloatRange):
    """click's FloatRange that also refuses ``nan`` and ``inf``: Python's float() reads them,
    and a NaN passes every range comparison (it is neither below nor above a bound)."""

    name = "finite float range"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        # click's stubs say float; the command line hands the text, which the base converts
        number: float = super().convert(cast(float, value), param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


# The commands' choices and defaults, written out here: the modules that define them load
# polars, SQLAlchemy or pydantic, and a command's --help imports none of them (under 0.3 s).
# tests/cli/test_cli_help.py keeps each equal to its source.

#: app.models.Role's values
ROLES = ("reviewer", "lead", "admin")
#: app.exporters.Tracker's values
TRACKERS = ("github", "gitlab", "jira", "linear", "webhook")
#: app.eval.Order's values
ORDERS = ("trec_eval", "rank", "file")
#: app.eval.conventions.DEFAULT_DEPTH and DEFAULT_K
DEFAULT_DEPTH = 50
DEFAULT_K = 10
#: app.eval.values.INT32_MAX: the database's largest integer
INT32_MAX = 2**31 - 1


#: ``--format table|json`` of the offline commands that print a table (clusters, dedup).
TABLE_OR_JSON = click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
)
