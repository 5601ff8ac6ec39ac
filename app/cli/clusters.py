"""``misstriage clusters``: a run's duplicate profile without judgments, no server needed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from app import __version__
from app.cli.params import (
    CLUSTER_KS,
    CLUSTER_THRESHOLD,
    ORDERS,
    TABLE_OR_JSON,
    FiniteFloatRange,
    parquet_column_options,
)

if TYPE_CHECKING:
    from app.eval.cluster_profile import ClusterProfile

# The evaluation core (polars) is imported in the functions' bodies: --help loads click alone
# (the defaults written out in app/cli/params.py, kept equal to app.eval's by the tests).

EXIT_BAD_INPUT = 2


def _fail(message: str) -> NoReturn:
    click.echo(f"misstriage: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def source_sentence(corpus: Path) -> str:
    """What the figures rest on: the corpus file's ids, as given."""
    from app.provenance import of_file

    return of_file(corpus.name).sentence


def detector_run_document(corpus: Path) -> dict[str, Any]:
    """The ``detector_run`` block of the JSON answer, shaped as the API's (no run id)."""
    from app.provenance import of_file

    return of_file(corpus.name).model_dump(mode="json")


def profile_document(profile: ClusterProfile, *, run: Path, corpus: Path) -> dict[str, Any]:
    """The JSON answer: the same figures as the table."""
    from app.eval.cluster_profile import TOKEN_ESTIMATE

    return {
        "misstriage": __version__,
        "run": str(run),
        "corpus": str(corpus),
        "detector_run": detector_run_document(corpus),
        "queries": profile.queries,
        "threshold": profile.threshold,
        "short_queries_rule": "a query with fewer than k results counts the distinct clusters "
        "among what it returned",
        "token_estimate": TOKEN_ESTIMATE,
        "price_per_million": profile.price_per_million,
        "queries_per_day": profile.queries_per_day,
        "unclustered_results": profile.unclustered_results,
        "unknown_results": profile.unknown_results,
        "depths": [
            {
                "k": d.k,
                "mean_distinct": d.mean_distinct,
                "distinct_fraction": d.distinct_fraction,
                "marginal_per_slot": d.marginal_per_slot,
                "median": d.median,
                "p10": d.p10,
                "p90": d.p90,
                "share_at_or_below": d.share_at_or_below,
                "histogram": {str(n): c for n, c in d.histogram.items()},
                "short_queries": d.short_queries,
                "prompt_tokens": d.prompt_tokens,
                "daily_price": d.daily_price,
            }
            for d in profile.depths
        ],
    }


def render_profile(profile: ClusterProfile) -> str:
    """The table: one line per k, then the histogram at each k."""
    from app.eval import formatting
    from app.eval.cluster_profile import TOKEN_ESTIMATE

    cost = profile.depths[0].prompt_tokens is not None
    priced = profile.depths[0].daily_price is not None
    head = (
        f"{'k':>4}  {'mean':>6}  {'fraction':>8}  {'marginal':>8}  {'median':>6}  "
        f"{'p10':>5}  {'p90':>5}  {'<=' + str(profile.threshold):>6}  {'short':>5}"
    )
    head += f"  {'tokens':>8}" if cost else ""
    head += f"  {'per day':>10}" if priced else ""
    lines = [
        f"unique clusters over {profile.queries} queries (judged or not); a query with fewer "
        "than k results counts what it returned",
        head,
    ]
    for d in profile.depths:
        marginal = "" if d.marginal_per_slot is None else f"{d.marginal_per_slot:.3f}"
        shared = formatting.share(d.share_at_or_below)
        line = (
            f"{d.k:>4}  {d.mean_distinct:>6.2f}  {d.distinct_fraction:>8.3f}  {marginal:>8}  "
            f"{d.median:>6.1f}  {d.p10:>5.1f}  {d.p90:>5.1f}  {shared:>6}  "
            f"{d.short_queries:>5}"
        )
        if d.prompt_tokens is not None:
            line += f"  {d.prompt_tokens:>8.0f}"
        if d.daily_price is not None:
            line += f"  {d.daily_price:>10.2f}"
        lines.append(line)
    if cost:
        lines.append(
            f"tokens: the mean prompt tokens of the top k, estimated as {TOKEN_ESTIMATE}; "
            "doubling k doubles the prompt (less where queries return fewer than k results)"
        )
    lines.append(
        f"results without a cluster_id: {profile.unclustered_results} (each its own cluster; "
        f"{profile.unknown_results} not in the corpus)"
    )
    for d in profile.depths:
        counts = ", ".join(f"{n}: {c}" for n, c in d.histogram.items())
        lines.append(f"histogram at k={d.k} (distinct clusters: queries): {counts}")
    return "\n".join(lines)


@click.command()
@click.option(
    "--run",
    "run_path",
    required=True,
    type=click.Path(path_type=Path),
    help="A run (TREC, JSONL or Parquet, plain or .gz), e.g. a query log's results: no "
    "judgments needed; read block by block of whole queries.",
)
@click.option(
    "--corpus",
    "corpus_path",
    required=True,
    type=click.Path(path_type=Path),
    help="A corpus.jsonl whose documents carry cluster_id (a document without one, or absent "
    "from the corpus, is its own cluster).",
)
@click.option(
    "--k",
    "ks",
    default=",".join(map(str, CLUSTER_KS)),
    show_default=True,
    help="The cutoffs, comma-separated.",
)
@click.option(
    "--threshold",
    type=click.IntRange(min=0),
    default=CLUSTER_THRESHOLD,
    show_default=True,
    help="Share of queries with this many distinct clusters or fewer.",
)
@click.option(
    "--price-per-million",
    type=FiniteFloatRange(min=0),
    help="Price per million prompt tokens: adds the daily price (with --queries-per-day).",
)
@click.option(
    "--queries-per-day",
    type=FiniteFloatRange(min=0),
    help="Queries served per day, for the daily price.",
)
@click.option(
    "--order",
    type=click.Choice(ORDERS),
    default="trec_eval",
    show_default=True,
    help="How run lines become a ranking.",
)
@click.option(
    "--run-format",
    type=click.Choice(["trec", "jsonl", "parquet"]),
    help="Run file format; detected when absent.",
)
@parquet_column_options
@TABLE_OR_JSON
def clusters(
    run_path: Path,
    corpus_path: Path,
    ks: str,
    threshold: int,
    price_per_million: float | None,
    queries_per_day: float | None,
    order: str,
    run_format: str | None,
    qid_column: str,
    doc_column: str,
    score_column: str,
    rank_column: str,
    output_format: str,
) -> None:
    """unique-clusters@k over every query of a run, judged or not: per k the mean distinct
    clusters, the distinct fraction, the marginal distinct clusters per added slot and the
    distribution; with the corpus's text, the prompt tokens of the top k and their price.

    Exit status: 0 ok, 2 bad options or input.
    """
    from app.eval.cluster_profile import profile_of_tally
    from app.eval.conventions import Order, parse_depths
    from app.eval.errors import InputError

    try:
        cutoffs = parse_depths(ks)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--k") from None
    from app.eval.cluster_stream import tally_log
    from app.eval.parquet import RunColumns

    columns = RunColumns(qid=qid_column, doc_id=doc_column, score=score_column, rank=rank_column)
    try:
        from app.eval.cluster_corpus import read_cluster_corpus

        corpus = read_cluster_corpus(corpus_path)
        # The log is read block by block of whole queries: memory holds a few blocks, not
        # the log (app.eval.cluster_stream).
        tallied = tally_log(
            run_path, corpus, cutoffs, order=Order(order), fmt=run_format, columns=columns
        )
    except InputError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
    if not tallied.streamed:
        click.echo(
            f"misstriage: note: {run_path} was read whole (its queries' lines are not "
            "together, or a line needs the careful reader): memory grows with the file",
            err=True,
        )
    profile = profile_of_tally(
        tallied.tally,
        threshold=threshold,
        price_per_million=price_per_million,
        queries_per_day=queries_per_day,
    )
    if output_format == "json":
        document = profile_document(profile, run=run_path, corpus=corpus_path)
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        click.echo(render_profile(profile))
        click.echo(source_sentence(corpus_path))
