"""What ``misstriage evaluate`` writes: the metric table (text, JSON or CSV) on stdout and
the misses file (CSV, or JSONL by its name)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import click

from app import __version__
from app.cli.output import render_clusters, render_depth_cost, render_per_query, render_summary
from app.eval import Judgments, Measure, RunEvaluation
from app.eval.cells import spreadsheet_cell
from app.eval.clusters import ClusterEvaluation
from app.eval.depth_cost import DepthAdvice


def write_misses(path: Path, golden: Judgments, results: list[tuple[str, Any]]) -> int:
    """Write the misses of every run; CSV (no cell a spreadsheet would run) unless the name
    ends in .jsonl (the raw values)."""
    fields = ["run", "qid", "doc_id", "grade", "rank", "query"]
    count = 0
    as_jsonl = path.suffix == ".jsonl"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = None if as_jsonl else csv.writer(handle)
        if writer is not None:
            writer.writerow(fields)
        for name, frame in results:
            for qid, doc_id, grade, rank in frame.iter_rows():
                row = [name, qid, doc_id, grade, rank, golden.query_text(qid)]
                if writer is None:
                    handle.write(json.dumps(dict(zip(fields, row, strict=True))) + "\n")
                else:
                    writer.writerow([spreadsheet_cell(v) for v in row])
                count += 1
    return count


def emit(
    output_format: str,
    golden: Judgments,
    qrels: Path,
    queries: Path | None,
    results: list[RunEvaluation],
    per_query: bool,
    failures: list[dict[str, Any]],
    thresholds_below: list[tuple[Measure, float]],
    curve: tuple[int, ...],
    clusters: dict[str, ClusterEvaluation],
    *,
    advice: dict[str, DepthAdvice],
    corpus: Path | None = None,
) -> None:
    """The metric table of every run on stdout: JSON (the API's shapes), CSV (one row per
    run, or per query with ``per_query``) or text tables with the depth advice and clusters."""
    # The output's models (pydantic) are imported when JSON or CSV is written: the table
    # needs none of them (importing them took 0.13-0.18 s on the machine that measured it).
    rests_on = None
    if corpus is not None and clusters:
        from app.provenance import of_file

        # what the cluster figures rest on: the corpus file's ids, as given
        rests_on = of_file(corpus.name)

    first = results[0]
    if output_format == "json":
        from app.services.imports.metrics import ConventionsPublic, EvaluatedRun

        document = {
            "misstriage": __version__,
            "k": first.k,
            "depth": first.depth,
            "depths": list(curve),
            "conventions": ConventionsPublic.of(first.conventions).model_dump(mode="json"),
            "golden_set": {
                "qrels": str(qrels),
                "queries": str(queries) if queries else None,
                "report": golden.report.as_dict(),
            },
            "runs": [
                EvaluatedRun.of_evaluation(
                    r,
                    per_query=per_query,
                    clusters=clusters.get(r.name),
                    cost=advice.get(r.name),
                    detector_run=rests_on,
                ).document()
                for r in results
            ],
            "fail_under": {
                "thresholds": {str(m): t for m, t in thresholds_below},
                "failures": failures,
            },
        }
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
    elif output_format == "csv":
        from app.services.imports.metrics import QueryRow

        writer = csv.writer(sys.stdout, lineterminator="\n")
        if per_query:
            rows = [
                {"run": r.name, **QueryRow.of(q, r.k, r.depth).in_reading_order()}
                for r in results
                for q in r.queries
            ]
        else:
            rows = [
                {
                    "run": r.name,
                    **r.measures,
                    **{f"micro {name}": v for name, v in r.micro.items()},
                    f"misses@{r.depth}": r.misses,
                    "relevant": r.relevant,
                    "queries": len(r.queries),
                }
                for r in results
            ]
        # text cells a spreadsheet would run as formulas start with ' (app/eval/cells.py)
        writer.writerow([spreadsheet_cell(name) for name in rows[0]])
        writer.writerows([[spreadsheet_cell(v) for v in row.values()] for row in rows])
    else:
        if golden.report.warnings:
            click.echo("golden set: " + "; ".join(golden.report.warnings), err=True)
        click.echo(render_summary(results))
        if advice:
            click.echo("\n" + render_depth_cost(advice))
        if clusters:
            click.echo("\n" + render_clusters(clusters))
            if rests_on is not None:
                click.echo(rests_on.sentence)
        if per_query:
            for result in results:
                click.echo("\n" + render_per_query(result))
