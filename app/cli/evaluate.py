"""``misstriage evaluate``: the offline metric table, no server needed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from app.cli import evaluate_setup as setup
from app.cli.params import (
    DEFAULT_DEPTH,
    DEFAULT_DEPTHS,
    DEFAULT_K,
    DEFAULT_NDCG_THRESHOLD,
    DEFAULT_RECALL_THRESHOLD,
    DEFAULT_TOLERANCE,
    FiniteFloatRange,
    convention_options,
    golden_options,
    parquet_column_options,
)

if TYPE_CHECKING:
    import polars as pl

    from app.eval import Measure, RunEvaluation
    from app.eval.clusters import ClusterEvaluation
    from app.eval.textio import DecompressionLimit

# The evaluation core (polars, numpy) is imported in the command's body: --help loads click
# alone (under 0.3 s; tests/cli/test_cli_help.py). The defaults above are written out in
# app/cli/params.py, kept equal to app.eval's by the tests.

EXIT_BELOW_THRESHOLD = 1
EXIT_BAD_INPUT = 2


def _corpus(path: Path) -> tuple[pl.DataFrame, set[str]]:
    """doc_id -> cluster_id of the documents of a corpus.jsonl that carry a cluster, and
    every doc_id it holds: what the index holds, the diagnosis's evidence (as for a golden set
    imported with a corpus and no separate manifest)."""
    import polars as pl

    from app.eval.jsonl import read_corpus

    pairs: list[tuple[str, str]] = []
    doc_ids: set[str] = set()
    for d in read_corpus(path):
        doc_ids.add(d.doc_id)
        if d.cluster_id:
            pairs.append((d.doc_id, d.cluster_id))
    frame = pl.DataFrame(pairs, schema={"doc_id": pl.String, "cluster_id": pl.String}, orient="row")
    return frame, doc_ids


def _decompression_limit() -> DecompressionLimit:
    """MISSTRIAGE_DECOMPRESSED_MAX_BYTES and friends, as the service reads them; the
    defaults where the service's settings do not load (evaluate needs no secret key).
    Called only when a gzip file is read: loading the settings costs more than reading a
    small run."""
    from app.eval.textio import DecompressionLimit
    from app.settings import get_settings

    try:
        return get_settings().decompression_limit()
    except ValueError:
        return DecompressionLimit()


def _fail(message: str) -> NoReturn:
    click.echo(f"misstriage: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def _measure_value(result: RunEvaluation, measure: Measure) -> float:
    from app.eval import MeasureKind

    if measure.kind is MeasureKind.RECALL:
        return result.depth_curve[measure.cutoff]
    return result.measures[str(measure)]


def _check_computable(measures: list[tuple[Measure, float]], k: int) -> None:
    from app.eval import MeasureKind

    for measure, _ in measures:
        if measure.kind is not MeasureKind.RECALL and measure.cutoff != k:
            _fail(f"--fail-under {measure} is not computed at --k {k}; use --k {measure.cutoff}")


@click.command()
@golden_options
@click.option(
    "--corpus",
    "corpus_path",
    type=click.Path(path_type=Path),
    help="A corpus.jsonl: what the index holds (the diagnosis calls a query 'ingestion' only "
    "when every miss is outside it); with cluster_id, adds unique-clusters@k and "
    "cluster-recall@k (a document without a cluster is its own).",
)
@click.option(
    "--manifest",
    "manifest_path",
    type=click.Path(path_type=Path),
    help="An index manifest (the ids the search index holds, one a line): what the index "
    "holds, instead of the corpus's documents (the diagnosis's evidence for 'ingestion').",
)
@click.option(
    "--split",
    default="test",
    show_default=True,
    help="Which qrels/<split>.tsv to read from a BEIR folder.",
)
@click.option(
    "--run",
    "run_specs",
    multiple=True,
    required=True,
    metavar="NAME=FILE",
    help="A run (TREC or JSONL, plain or .gz, or Parquet); repeat for several runs.",
)
@click.option(
    "--run-format",
    type=click.Choice(["trec", "jsonl", "parquet"]),
    help="Run file format; detected when absent.",
)
@parquet_column_options
@click.option(
    "--k",
    "k",
    type=click.IntRange(min=1),
    default=DEFAULT_K,
    show_default=True,
    help="Cutoff of the consumed results (recall@k, nDCG@k).",
)
@click.option(
    "--depth",
    type=click.IntRange(min=1),
    default=DEFAULT_DEPTH,
    show_default=True,
    help="Candidate depth: misses are relevant documents outside the top depth.",
)
@click.option(
    "--depths",
    default=",".join(map(str, DEFAULT_DEPTHS)),
    show_default=True,
    help="Depths of the recall curve.",
)
@click.option(
    "--cost-ms",
    type=FiniteFloatRange(min=0, max=1e6, max_open=True),
    help="Reranking cost per candidate (ms): a cost beside every depth of the curve, the "
    "recall per added ms and the depth where depth stops paying.",
)
@click.option(
    "--retrieval-p95",
    callback=lambda _ctx, _param, value: setup.retrieval_p95(value),
    help="With --cost-ms: the first stage's p95 in ms measured at some depths, "
    "'10:12,100:30,1000:95' (linear in between, the nearest beyond), added to the cost.",
)
@click.option(
    "--tolerance",
    type=FiniteFloatRange(0, 1, max_open=True),
    default=DEFAULT_TOLERANCE,
    show_default=True,
    help="With --cost-ms: the advised depth is the smallest within this of the best recall.",
)
@convention_options
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json", "csv"]),
    default="table",
    show_default=True,
)
@click.option("--per-query", is_flag=True, help="Also print one row per query.")
@click.option(
    "--misses-out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write every miss at --depth to this CSV (or .jsonl) file.",
)
@click.option(
    "--fail-under",
    "fail_under",
    multiple=True,
    metavar="MEASURE=VALUE",
    help="Exit 1 when any run is below, e.g. 'R@50=0.85'.",
)
@click.option(
    "--recall-threshold",
    type=FiniteFloatRange(0, 1),
    default=DEFAULT_RECALL_THRESHOLD,
    show_default=True,
    help="Diagnosis: recall@depth at or above this is high.",
)
@click.option(
    "--ndcg-threshold",
    type=FiniteFloatRange(0, 1),
    default=DEFAULT_NDCG_THRESHOLD,
    show_default=True,
    help="Diagnosis: nDCG_cand@k (nDCG on the top-depth candidates) at or above this is high.",
)
def evaluate(
    qrels_path: Path,
    queries_path: Path | None,
    corpus_path: Path | None,
    manifest_path: Path | None,
    split: str,
    run_specs: tuple[str, ...],
    run_format: str | None,
    qid_column: str,
    doc_column: str,
    score_column: str,
    rank_column: str,
    k: int,
    depth: int,
    depths: str,
    cost_ms: float | None,
    retrieval_p95: dict[int, float] | None,
    tolerance: float,
    gain: str,
    min_grade: int,
    all_judged_queries: bool,
    order: str,
    output_format: str,
    per_query: bool,
    misses_out: Path | None,
    fail_under: tuple[str, ...],
    recall_threshold: float,
    ndcg_threshold: float,
) -> None:
    """Evaluate runs against a golden set: recall@k, recall@depth, nDCG@k, micro recall,
    the depth curve and the misses at the candidate depth.

    Exit status: 0 ok, 1 a run is below --fail-under, 2 bad options or input.
    """
    with setup.collector_off():
        from app.cli import evaluate_output
        from app.eval import (
            Conventions,
            Gain,
            InputError,
            MeasureKind,
            Order,
            Thresholds,
            evaluate_run,
            load_golden,
            load_run,
            misses_frame,
            resolve_golden,
            top_candidates,
        )
        from app.eval.clusters import evaluate_clusters
        from app.eval.conventions import CutoffError, check_cutoffs, parse_depths
        from app.eval.depth_cost import advise_depth
        from app.eval.jsonl import read_manifest
        from app.eval.parquet import RunColumns
        from app.eval.textio import decompression_limit

    runs = setup.parse_runs(run_specs)
    columns = RunColumns(qid=qid_column, doc_id=doc_column, score=score_column, rank=rank_column)
    try:
        check_cutoffs(k=k, depth=depth)
    except CutoffError as exc:
        raise click.BadParameter(str(exc), param_hint="--k") from None
    thresholds_below = setup.parse_fail_under(fail_under)
    _check_computable(thresholds_below, k)
    try:
        curve = parse_depths(depths)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--depths") from None
    curve = tuple(
        sorted({*curve, *(m.cutoff for m, _ in thresholds_below if m.kind is MeasureKind.RECALL)})
    )
    conventions = Conventions(
        order=Order(order),
        gain=Gain(gain),
        min_grade=min_grade,
        all_judged_queries=all_judged_queries,
    )
    thresholds = Thresholds(recall=recall_threshold, ndcg=ndcg_threshold)
    try:
        paths = resolve_golden(qrels_path, queries=queries_path, split=split)
        # a BEIR folder's corpus.jsonl and manifest.txt count as given, as import-golden-set
        # reads them: the diagnosis's evidence for "ingestion" is the same here as on its page
        corpus_path = corpus_path or paths.corpus
        manifest_path = manifest_path or paths.manifest
        with (
            decompression_limit(_decompression_limit),
            setup.progress([paths.qrels, *(p for _, p in runs)]) as progress,
            setup.start_up_frozen(),
        ):
            golden = load_golden(
                paths.qrels, queries=paths.queries, min_grade=min_grade, progress=progress
            )
            clusters, indexed = _corpus(corpus_path) if corpus_path is not None else (None, None)
            if manifest_path is not None:
                indexed = set(read_manifest(manifest_path))
            results: list[RunEvaluation] = []
            by_cluster: dict[str, ClusterEvaluation] = {}
            missing: list[tuple[str, Any]] = []
            setup.import_in_background(setup.later_modules(output_format, [p for _, p in runs]))
            for name, path in runs:
                ranked = load_run(
                    path,
                    golden,
                    name=name,
                    order=conventions.order,
                    fmt=run_format,
                    progress=progress,
                    keep_results=clusters is not None,
                    columns=columns,
                )
                results.append(
                    evaluate_run(
                        golden,
                        ranked,
                        k=k,
                        depth=depth,
                        depths=curve,
                        conventions=conventions,
                        thresholds=thresholds,
                        indexed=indexed,
                    )
                )
                if clusters is not None:
                    top = top_candidates(ranked, k)
                    by_cluster[name] = evaluate_clusters(golden, top, clusters, k)
                if misses_out is not None:
                    missing.append((name, misses_frame(golden, ranked, depth)))
        if misses_out is not None:
            evaluate_output.write_misses(misses_out, golden, missing)
    except InputError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))

    failures = [
        {"run": r.name, "measure": str(m), "value": _measure_value(r, m), "threshold": t}
        for r in results
        for m, t in thresholds_below
        if _measure_value(r, m) < t
    ]
    evaluate_output.emit(
        output_format,
        golden,
        paths.qrels,
        paths.queries,
        results,
        per_query,
        failures,
        thresholds_below,
        curve,
        by_cluster,
        advice={
            r.name: a
            for r in results
            if (
                a := advise_depth(
                    r.depth_curve,
                    cost_per_candidate_ms=cost_ms,
                    tolerance=tolerance,
                    retrieval_p95_ms=retrieval_p95 or None,
                )
            )
        },
        corpus=corpus_path,
    )
    for failure in failures:
        click.echo(
            f"misstriage: {failure['run']}: {failure['measure']} = {failure['value']:.4f} "
            f"is below {failure['threshold']}",
            err=True,
        )
    if failures:
        sys.exit(EXIT_BELOW_THRESHOLD)
