"""``misstriage evaluate``: the offline metric table, no server needed."""

from __future__ import annotations

import atexit
import contextlib
import csv
import functools
import gc
import importlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click
import polars as pl

from app import __version__
from app.cli.output import render_clusters, render_depth_cost, render_per_query, render_summary
from app.cli.params import FiniteFloatRange
from app.eval import (
    Conventions,
    Gain,
    InputError,
    Judgments,
    Measure,
    MeasureKind,
    Order,
    RunEvaluation,
    Thresholds,
    evaluate_run,
    load_golden,
    load_run,
    misses_frame,
    parse_measure,
    resolve_golden,
    top_candidates,
)
from app.eval.clusters import ClusterEvaluation, evaluate_clusters
from app.eval.conventions import (
    DEFAULT_DEPTH,
    DEFAULT_DEPTHS,
    DEFAULT_K,
    CutoffError,
    check_cutoffs,
    parse_depths,
)
from app.eval.depth_cost import (
    DEFAULT_TOLERANCE,
    DepthAdvice,
    advise_depth,
    parse_retrieval_p95,
)
from app.eval.diagnosis import DEFAULT_NDCG_THRESHOLD, DEFAULT_RECALL_THRESHOLD
from app.eval.jsonl import read_corpus, read_manifest
from app.eval.textio import DecompressionLimit, ProgressFn, decompression_limit

EXIT_BELOW_THRESHOLD = 1
EXIT_BAD_INPUT = 2


def _corpus(path: Path) -> tuple[pl.DataFrame, set[str]]:
    """doc_id -> cluster_id of the documents of a corpus.jsonl that carry a cluster, and
    every doc_id it holds: what the index holds, the diagnosis's evidence (as for a golden set
    imported with a corpus and no separate manifest)."""
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
    from app.settings import get_settings

    try:
        return get_settings().decompression_limit()
    except ValueError:
        return DecompressionLimit()


def _fail(message: str) -> NoReturn:
    click.echo(f"misstriage: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def _parse_runs(specs: tuple[str, ...]) -> list[tuple[str, Path]]:
    runs: list[tuple[str, Path]] = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = Path(spec).name.split(".")[0], spec
        if not name or not path:
            raise click.BadParameter(f"{spec!r}: expected NAME=FILE", param_hint="--run")
        if any(name == seen for seen, _ in runs):
            raise click.BadParameter(f"run name {name!r} is used twice", param_hint="--run")
        runs.append((name, Path(path)))
    return runs


def _retrieval_p95(text: str | None) -> dict[int, float] | None:
    """``--retrieval-p95``: a usage error (exit 2) when it is not depth:ms pairs."""
    if not text:
        return None
    try:
        return parse_retrieval_p95(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--retrieval-p95'") from None


def _parse_fail_under(specs: tuple[str, ...]) -> list[tuple[Measure, float]]:
    thresholds: list[tuple[Measure, float]] = []
    for spec in specs:
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, sep, value = part.partition("=")
            try:
                if not sep:
                    raise ValueError(f"{part!r}: expected MEASURE=VALUE, e.g. 'R@50=0.85'")
                measure = parse_measure(name)
                threshold = float(value)
                if not 0.0 <= threshold <= 1.0:
                    raise ValueError(f"{part!r}: the threshold must be within [0, 1]")
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--fail-under") from None
            thresholds.append((measure, threshold))
    return thresholds


#: Modules needed once a run is read (numpy to rank it, the output's models): imported in
#: a thread while the run is read, since the parser leaves the interpreter free most of the
#: time (about 40 ms less wall time at 7M lines on two cores, measured).
_LATER_MODULES = ("numpy", "app.services.metrics")


def _import_in_background(modules: tuple[str, ...]) -> None:
    def run() -> None:
        # evaluate multiplies no matrices: OpenBLAS need not start a thread per core
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        for module in modules:
            # a module that fails to import fails again where it is used, and is reported there
            with contextlib.suppress(Exception):
                importlib.import_module(module)

    threading.Thread(target=run, name="misstriage-imports", daemon=True).start()


@contextmanager
def _start_up_frozen() -> Iterator[None]:
    """What start-up created (modules, classes) lives to the end: the collector leaves it
    out of the collections that the evaluation's own objects trigger, until the block ends.
    And at exit, where the interpreter would collect every object only to drop them all,
    they are frozen first (a twentieth of a second at every run)."""
    _freeze_at_exit()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@functools.cache
def _freeze_at_exit() -> None:
    atexit.register(gc.freeze)  # once per process


@contextmanager
def _progress(paths: list[Path]) -> Iterator[ProgressFn | None]:
    """A byte-count progress bar on stderr, shown only when reading takes over two seconds
    and stderr is a terminal."""
    if not sys.stderr.isatty():
        yield None  # tqdm would draw nothing: not even imported
        return
    from tqdm import tqdm

    total = sum(p.stat().st_size for p in paths if p.is_file())
    with tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        delay=2.0,
        file=sys.stderr,
        disable=None,
        desc="reading",
        leave=False,
    ) as bar:

        def advance(size: int) -> None:
            bar.update(size)

        yield advance


def _measure_value(result: RunEvaluation, measure: Measure) -> float:
    if measure.kind is MeasureKind.RECALL:
        return result.depth_curve[measure.cutoff]
    return result.measures[str(measure)]


def _check_computable(measures: list[tuple[Measure, float]], k: int) -> None:
    for measure, _ in measures:
        if measure.kind is not MeasureKind.RECALL and measure.cutoff != k:
            _fail(f"--fail-under {measure} is not computed at --k {k}; use --k {measure.cutoff}")


def _write_misses(path: Path, golden: Judgments, results: list[tuple[str, Any]]) -> int:
    """Write the misses of every run; CSV unless the name ends in .jsonl."""
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
                    writer.writerow(["" if v is None else v for v in row])
                count += 1
    return count


@click.command()
@click.option(
    "--qrels",
    "qrels_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Judgments: TREC qrels, BEIR qrels TSV (plain or .gz), or a BEIR folder.",
)
@click.option(
    "--queries",
    "queries_path",
    type=click.Path(path_type=Path),
    help="Query texts: BEIR queries.jsonl or qid<TAB>text.",
)
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
    help="A run (TREC or JSONL, plain or .gz); repeat for several runs.",
)
@click.option(
    "--run-format",
    type=click.Choice(["trec", "jsonl"]),
    help="Run file format; detected when absent.",
)
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
    callback=lambda _ctx, _param, value: _retrieval_p95(value),
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
@click.option(
    "--gain",
    type=click.Choice([g.value for g in Gain]),
    default="exp",
    show_default=True,
    help="nDCG gain: exp = 2^grade-1, linear = grade (trec_eval).",
)
@click.option(
    "--min-grade", type=int, default=1, show_default=True, help="Relevant means grade >= this."
)
@click.option(
    "--all-judged-queries",
    is_flag=True,
    help="Also average judged queries without a relevant document, as trec_eval -c "
    "(R = 0; nDCG from their positive grades). Off: such queries are not averaged.",
)
@click.option(
    "--order",
    type=click.Choice([o.value for o in Order]),
    default="trec_eval",
    show_default=True,
    help="How run lines become a ranking.",
)
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
    runs = _parse_runs(run_specs)
    try:
        check_cutoffs(k=k, depth=depth)
    except CutoffError as exc:
        raise click.BadParameter(str(exc), param_hint="--k") from None
    thresholds_below = _parse_fail_under(fail_under)
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
        with (
            decompression_limit(_decompression_limit),
            _progress([paths.qrels, *(p for _, p in runs)]) as progress,
            _start_up_frozen(),
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
            _import_in_background(_LATER_MODULES)
            for name, path in runs:
                ranked = load_run(
                    path,
                    golden,
                    name=name,
                    order=conventions.order,
                    fmt=run_format,
                    progress=progress,
                    keep_results=clusters is not None,
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
            _write_misses(misses_out, golden, missing)
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
    _emit(
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
    )
    for failure in failures:
        click.echo(
            f"misstriage: {failure['run']}: {failure['measure']} = {failure['value']:.4f} "
            f"is below {failure['threshold']}",
            err=True,
        )
    if failures:
        sys.exit(EXIT_BELOW_THRESHOLD)


def _emit(
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
) -> None:
    # the output's models (pydantic) are imported when an output is written, not at start-up
    from app.services.metrics import ConventionsPublic, EvaluatedRun, QueryRow

    first = results[0]
    if output_format == "json":
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
                    r, per_query=per_query, clusters=clusters.get(r.name), cost=advice.get(r.name)
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
        writer.writerow(list(rows[0]))
        writer.writerows([["" if v is None else v for v in row.values()] for row in rows])
    else:
        if golden.report.warnings:
            click.echo("golden set: " + "; ".join(golden.report.warnings), err=True)
        click.echo(render_summary(results))
        if advice:
            click.echo("\n" + render_depth_cost(advice))
        if clusters:
            click.echo("\n" + render_clusters(clusters))
        if per_query:
            for result in results:
                click.echo("\n" + render_per_query(result))
