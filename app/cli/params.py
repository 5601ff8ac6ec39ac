"""Parameter types the commands share."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click

F = TypeVar("F", bound=Callable[..., Any])


def golden_options(command: F) -> F:
    """``--qrels`` (required) and ``--queries``: the golden set of an offline command."""
    command = click.option(
        "--queries",
        "queries_path",
        type=click.Path(path_type=Path),
        help="Query texts: BEIR queries.jsonl or qid<TAB>text.",
    )(command)
    return click.option(
        "--qrels",
        "qrels_path",
        required=True,
        type=click.Path(path_type=Path),
        help="Judgments: TREC qrels, BEIR qrels TSV (plain or .gz), or a BEIR folder.",
    )(command)


def parquet_column_options(command: F) -> F:
    """``--qid-column``, ``--doc-column``, ``--score-column``, ``--rank-column``: a Parquet
    run's column of each field (the command takes ``qid_column``, ``doc_column``,
    ``score_column`` and ``rank_column``; ``app.eval.parquet.RunColumns``)."""
    for flag, default, what in reversed(
        (
            ("--qid-column", "qid", "the query id"),
            ("--doc-column", "doc_id", "the document id"),
            ("--score-column", "score", "the score (order trec_eval)"),
            ("--rank-column", "rank", "the rank (order rank)"),
        )
    ):
        command = click.option(
            flag, default=default, show_default=True, help=f"Parquet: the column of {what}."
        )(command)
    return command


def convention_options(command: F) -> F:
    """The evaluation conventions every command that computes measures takes: ``--gain``,
    ``--min-grade``, ``--all-judged-queries`` and ``--order`` (DESIGN.md's table)."""
    for option in reversed(
        (
            click.option(
                "--gain",
                type=click.Choice(GAINS),
                default="exp",
                show_default=True,
                help="nDCG gain: exp = 2^grade-1, linear = grade (trec_eval).",
            ),
            click.option(
                "--min-grade",
                type=int,
                default=1,
                show_default=True,
                help="Relevant means grade >= this.",
            ),
            click.option(
                "--all-judged-queries",
                is_flag=True,
                help="Also average judged queries without a relevant document, as trec_eval -c "
                "(R = 0; nDCG from their positive grades). Off: such queries are not averaged.",
            ),
            click.option(
                "--order",
                type=click.Choice(ORDERS),
                default="trec_eval",
                show_default=True,
                help="How run lines become a ranking.",
            ),
        )
    ):
        command = option(command)
    return command


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
#: app.eval.Gain's values
GAINS = ("exp", "linear")
#: app.eval.conventions.DEFAULT_DEPTH, DEFAULT_K and DEFAULT_DEPTHS
DEFAULT_DEPTH = 50
DEFAULT_K = 10
DEFAULT_DEPTHS = (10, 20, 50, 100, 200, 1000)
#: app.eval.depth_cost.DEFAULT_TOLERANCE
DEFAULT_TOLERANCE = 0.01
#: app.eval.diagnosis.DEFAULT_RECALL_THRESHOLD and DEFAULT_NDCG_THRESHOLD
DEFAULT_RECALL_THRESHOLD = 0.8
DEFAULT_NDCG_THRESHOLD = 0.5
#: app.eval.cluster_profile.DEFAULT_KS and DEFAULT_THRESHOLD
CLUSTER_KS = (10, 20, 30, 40, 50)
CLUSTER_THRESHOLD = 4
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
