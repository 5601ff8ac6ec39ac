"""``misstriage gate``: an offline CI gate, a new run against a baseline."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from app.cli.params import convention_options, golden_options, parquet_column_options

if TYPE_CHECKING:
    from app.eval.gate import GateResult, MovedDocument

# literal here, checked equal to app.eval's by the tests: importing app.eval (polars) for
# ``--help`` is what the help must not pay (tests/cli/test_cli_help.py)
DEFAULT_DEPTH = 50
DEFAULT_K = 10
DEFAULT_MAX_DROP = 0.01
DEFAULT_PERMUTATIONS = 10_000
DEFAULT_SEED = 42
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
#: the most rows of each list the markdown shows
MARKDOWN_ROWS = 50


def _fail(message: str) -> NoReturn:
    click.echo(f"misstriage: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def _rank(rank: int | None) -> str:
    return "—" if rank is None else str(rank)


def _p(p: float) -> str:
    return f"{p:.4f}"


def markdown(result: GateResult) -> str:
    """The gate as a pull-request comment: every text and id from the inputs made inert by
    the exporters' escaping (``markdown_text``; ids exact in ``markdown_code`` spans)."""
    # imported here: ``--help`` loads nothing of the exporters
    from app.exporters.markup import markdown_code, markdown_text

    verdict = "PASSED" if result.passed else "FAILED"
    out = [f"## misstriage gate: {verdict}", ""]
    out += [f"- {markdown_text(r)}" for r in result.reasons]
    if result.reasons:
        out.append("")
    out += [
        f"{result.queries} queries, depth {result.depth}, k {result.k}; p: paired randomisation "
        f"test, {result.permutations} permutations, seed {result.seed}.",
        "",
        "| measure | before | after | change | p |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, m in result.measures.items():
        out.append(
            f"| {markdown_text(name)} | {m.before:.4f} | {m.after:.4f} | {m.delta:+.4f} | "
            f"{_p(m.p_value)} |"
        )
    for title, docs in (
        (f"Left the top {result.depth}", result.left),
        (f"Entered the top {result.depth}", result.entered),
    ):
        out += ["", f"### {title}: {len(docs)}", ""]
        if not docs:
            continue
        out += ["| qid | query | doc | grade | rank |", "|---|---|---|---:|---|"]
        for d in docs[:MARKDOWN_ROWS]:
            out.append(
                f"| {markdown_code(d.qid)} | {markdown_text(d.text)} | "
                f"{markdown_code(d.doc_id)} | {d.grade} | "
                f"{_rank(d.rank_before)} → {_rank(d.rank_after)} |"
            )
        if len(docs) > MARKDOWN_ROWS:
            out += ["", f"and {len(docs) - MARKDOWN_ROWS} more"]
    return "\n".join(out)


def _table_rows(docs: list[MovedDocument]) -> list[str]:
    rows = []
    for d in docs:
        text = f"  {' '.join(d.text.split())[:60]}" if d.text else ""
        rows.append(
            f"  {d.qid}  {d.doc_id}  grade {d.grade}  "
            f"{_rank(d.rank_before)} -> {_rank(d.rank_after)}{text}"
        )
    return rows


def table(result: GateResult) -> str:
    out = [
        f"gate: {'PASSED' if result.passed else 'FAILED'}  ({result.queries} queries, "
        f"depth {result.depth}, k {result.k}, {result.permutations} permutations, "
        f"seed {result.seed})",
        "",
        f"{'measure':<10} {'before':>8} {'after':>8} {'change':>8} {'p':>8}",
    ]
    for name, m in result.measures.items():
        out.append(
            f"{name:<10} {m.before:>8.4f} {m.after:>8.4f} {m.delta:>+8.4f} {m.p_value:>8.4f}"
        )
    out += ["", f"left the top {result.depth}: {len(result.left)}", *_table_rows(result.left)]
    out += [
        "",
        f"entered the top {result.depth}: {len(result.entered)}",
        *_table_rows(result.entered),
    ]
    if result.reasons:
        out += ["", *(f"failed: {r}" for r in result.reasons)]
    return "\n".join(out)


@click.command()
@golden_options
@click.option(
    "--baseline",
    "baseline_path",
    required=True,
    type=click.Path(path_type=Path),
    help="The baseline run (TREC, JSONL or Parquet, plain or .gz).",
)
@click.option(
    "--run",
    "run_path",
    required=True,
    type=click.Path(path_type=Path),
    help="The new run (TREC, JSONL or Parquet, plain or .gz).",
)
@parquet_column_options
@click.option(
    "--depth",
    type=click.IntRange(min=1),
    default=DEFAULT_DEPTH,
    show_default=True,
    help="Candidate depth: R@depth, and the top depth documents leave or enter.",
)
@click.option(
    "--k",
    "k",
    type=click.IntRange(min=1),
    default=DEFAULT_K,
    show_default=True,
    help="Cutoff of nDCG@k.",
)
@click.option(
    "--max-drop",
    type=click.FloatRange(min=0),
    default=DEFAULT_MAX_DROP,
    show_default=True,
    help="Fail when a measure drops by more than this.",
)
@click.option(
    "--max-new-misses",
    type=click.IntRange(min=0),
    help="Fail when more relevant documents than this left the top depth.",
)
@convention_options
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json", "markdown"]),
    default="table",
    show_default=True,
)
@click.option(
    "--permutations",
    type=click.IntRange(min=1),
    default=DEFAULT_PERMUTATIONS,
    show_default=True,
    help="Sign flips of the paired randomisation test.",
)
@click.option(
    "--seed",
    type=int,
    default=DEFAULT_SEED,
    show_default=True,
    help="Seed of the randomisation test.",
)
def gate_command(
    qrels_path: Path,
    baseline_path: Path,
    run_path: Path,
    queries_path: Path | None,
    depth: int,
    k: int,
    max_drop: float,
    max_new_misses: int | None,
    qid_column: str,
    doc_column: str,
    score_column: str,
    rank_column: str,
    gain: str,
    min_grade: int,
    all_judged_queries: bool,
    order: str,
    output_format: str,
    permutations: int,
    seed: int,
) -> None:
    """Gate a new run against a baseline on a golden set: R@depth and nDCG@k before and
    after with a paired randomisation test, and the relevant documents that left or entered
    the top depth.

    Exit status: 0 passed, 1 failed (a measure dropped by more than --max-drop, or more than
    --max-new-misses documents left), 2 bad options or input.
    """
    from app.eval import (
        Conventions,
        InputError,
        evaluate_run,
        load_golden,
        load_run,
        resolve_golden,
    )
    from app.eval.conventions import CutoffError, Gain, Order, check_cutoffs
    from app.eval.gate import gate
    from app.eval.parquet import RunColumns

    columns = RunColumns(qid=qid_column, doc_id=doc_column, score=score_column, rank=rank_column)

    try:
        check_cutoffs(k=k, depth=depth)
    except CutoffError as exc:
        raise click.BadParameter(str(exc), param_hint="--k") from None
    conventions = Conventions(
        order=Order(order),
        gain=Gain(gain),
        min_grade=min_grade,
        all_judged_queries=all_judged_queries,
    )
    try:
        paths = resolve_golden(qrels_path, queries=queries_path)
        golden = load_golden(paths.qrels, queries=paths.queries, min_grade=min_grade)
        runs = [
            load_run(path, golden, name=name, order=conventions.order, columns=columns)
            for name, path in (("baseline", baseline_path), ("run", run_path))
        ]
    except InputError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
    before, after = (
        evaluate_run(golden, r, k=k, depth=depth, conventions=conventions) for r in runs
    )
    result = gate(
        golden,
        runs[0],
        runs[1],
        before,
        after,
        max_drop=max_drop,
        max_new_misses=max_new_misses,
        permutations=permutations,
        seed=seed,
    )
    if output_format == "json":
        click.echo(json.dumps(result.as_dict(), indent=2, ensure_ascii=False))
    elif output_format == "markdown":
        click.echo(markdown(result))
    else:
        click.echo(table(result))
    if not result.passed:
        sys.exit(EXIT_FAILED)
