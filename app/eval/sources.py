"""Input discovery: which reader a file needs, and BEIR folders."""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from app.eval.cluster_profile import ClusterTraces, CorpusSource
from app.eval.conventions import Order
from app.eval.errors import InputError, shorten, shorten_name
from app.eval.golden import IdLimits, Judgments
from app.eval.jsonl import read_jsonl_run
from app.eval.parquet import PARQUET_MAGIC, RunColumns, read_parquet_run
from app.eval.ranking import RankedRun, RunReport, rank_every_query, rank_log_run, rank_run
from app.eval.textio import BOM, GZIP_MAGIC, ProgressFn, check_regular_file, plain_file
from app.eval.trec import read_trec_run
from app.eval.values import check_length

RUN_FORMATS = ("trec", "jsonl", "parquet")


def _head(path: Path, size: int = 4096) -> bytes:
    try:
        with path.open("rb") as handle:
            head = handle.read(size)
    except OSError as exc:
        raise InputError(path, None, f"cannot be read ({exc.strerror or exc})") from None
    if head.startswith(GZIP_MAGIC):
        try:
            with gzip.open(path, "rb") as handle:
                head = handle.read(size)
        except (OSError, EOFError, zlib.error):
            raise InputError(path, None, "not a readable gzip file") from None
    return head.removeprefix(BOM)


def detect_run_format(path: Path) -> str:
    """``parquet`` for a Parquet file, ``jsonl`` when the first non-blank character is ``{``,
    else ``trec``."""
    check_regular_file(path)
    head = _head(path)
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    return "jsonl" if head.lstrip().startswith(b"{") else "trec"


def load_run(
    path: Path,
    golden: Judgments,
    *,
    name: str,
    order: Order = Order.TREC_EVAL,
    fmt: str | None = None,
    keep_results: bool = False,
    progress: ProgressFn | None = None,
    id_limits: IdLimits | None = None,
    corpus: CorpusSource | None = None,
    columns: RunColumns | None = None,
) -> RankedRun:
    """Read a run file (TREC, JSONL or Parquet, plain or gzip) and rank it under the
    conventions.

    With ``id_limits`` (a store's column widths), a longer id is an error naming its line.
    With a ``corpus``, the cluster traces of every query of the run, judged or not.
    ``columns``: a Parquet file's columns of each field.

    A plain TREC run of ``COMPILED_FROM_BYTES`` or more whose ranking alone is asked for is
    read by the compiled pass when it is built (``app.eval.ranks_fast``), else as any
    other."""
    if id_limits is None and corpus is None and not keep_results and _compiled_run(path, fmt):
        from app.eval.ranks_fast import rank_compiled  # here: it loads numpy

        ranked = rank_compiled(path, golden, order=order, name=name, source=str(path))
        if ranked is not None:
            if progress is not None:
                progress(path.stat().st_size)
            return ranked
    frame, detail = _read_run_frame(path, order=order, fmt=fmt, progress=progress, columns=columns)
    check_ids(frame, path, id_limits)
    return rank_run(
        frame,
        golden,
        order=order,
        name=name,
        source=str(path),
        fmt=detail,
        keep_results=keep_results,
        corpus=corpus,
    )


#: A TREC run this long is read by the compiled pass (``load_run``): below, loading numpy
#: for it takes longer than the careful reader (a run of 1,000 lines: 0.47 s against 0.30).
COMPILED_FROM_BYTES = 2 << 20


def _compiled_run(path: Path, fmt: str | None) -> bool:
    """Whether ``path`` is a file for the compiled pass: a TREC run (``fmt``, or its first
    bytes) of ``COMPILED_FROM_BYTES`` or more."""
    return (
        path.is_file()
        and path.stat().st_size >= COMPILED_FROM_BYTES
        and ((fmt or detect_run_format(path)) == "trec")
    )


def check_ids(frame: pl.DataFrame, path: Path, id_limits: IdLimits | None) -> None:
    """An InputError naming the first line with an id longer than ``id_limits`` allow."""
    if id_limits is not None:
        check_length(frame, "qid", limit=id_limits.query, source=str(path), what="query id")
        check_length(
            frame, "doc_id", limit=id_limits.document, source=str(path), what="document id"
        )


def load_log_traces(
    path: Path,
    corpus: CorpusSource,
    *,
    order: Order = Order.TREC_EVAL,
    fmt: str | None = None,
    progress: ProgressFn | None = None,
    id_limits: IdLimits | None = None,
    columns: RunColumns | None = None,
) -> tuple[RunReport, ClusterTraces]:
    """Read a log run (production query-log results, no judgments) and trace every query of
    it for the cluster measures, under the same conventions as ``load_run``."""
    frame, detail = _read_run_frame(path, order=order, fmt=fmt, progress=progress, columns=columns)
    check_ids(frame, path, id_limits)
    return rank_log_run(frame, order=order, source=str(path), fmt=detail, corpus=corpus)


def _read_run_frame(
    path: Path,
    *,
    order: Order,
    fmt: str | None,
    progress: ProgressFn | None,
    columns: RunColumns | None = None,
) -> tuple[pl.DataFrame, str]:
    """A run file's rows (qid, doc_id, score, and the rank column under ``order=rank``) and
    the format read, for both readers: with a golden set and without. ``columns``: the
    Parquet columns of each field (default: their own names)."""
    check_regular_file(path)
    fmt = fmt or detect_run_format(path)
    if fmt not in RUN_FORMATS:
        raise InputError(
            path, None, f"unknown run format {fmt!r} (expected trec, jsonl or parquet)"
        )
    if fmt == "parquet":
        with plain_file(path) as plain:
            frame = read_parquet_run(
                plain,
                columns or RunColumns(),
                with_rank=order is Order.RANK,
                needs_score=order is Order.TREC_EVAL,
            )
        detail = "parquet"
    elif fmt == "trec":
        frame = read_trec_run(path, with_rank=order is Order.RANK, progress=progress)
        detail = "trec"
    else:
        frame, detail = read_jsonl_run(path, progress=progress)
    if frame.height == 0:
        raise InputError(path, None, "the run is empty")
    return frame, detail


def load_log_run(
    path: Path,
    *,
    depth: int,
    order: Order = Order.TREC_EVAL,
    fmt: str | None = None,
    progress: ProgressFn | None = None,
    columns: RunColumns | None = None,
) -> pl.DataFrame:
    """Read a run without a golden set (a query log's results) and rank every query of it:
    qid, rank, doc_id of the first ``depth`` results, under the same conventions as
    ``load_run``."""
    frame, detail = _read_run_frame(path, order=order, fmt=fmt, progress=progress, columns=columns)
    return rank_every_query(frame, order=order, fmt=detail, source=str(path), depth=depth)


@dataclass(frozen=True, slots=True)
class GoldenPaths:
    qrels: Path
    queries: Path | None
    corpus: Path | None
    manifest: Path | None = None


def resolve_golden(path: Path, *, queries: Path | None = None, split: str = "test") -> GoldenPaths:
    """A qrels file, or a BEIR folder (``qrels/<split>.tsv``, ``queries.jsonl``,
    ``corpus.jsonl``, and our own optional ``manifest.txt``: the ids the index holds).

    A folder with a ``qrels/`` directory must hold the requested split: another split is never
    read in its place. A folder without one may hold ``<split>.tsv`` or ``qrels.tsv``.
    """
    if path.is_dir():
        qrels_dir = path / "qrels"
        if qrels_dir.is_dir():
            wanted = qrels_dir / f"{split}.tsv"
            if not wanted.is_file():
                found = sorted(p.name for p in qrels_dir.iterdir() if p.is_file())
                listed = ", ".join(shorten_name(f"qrels/{n}", 60) for n in found[:10])
                more = f" and {len(found) - 10} more" if len(found) > 10 else ""
                raise InputError(
                    path,
                    None,
                    f"no qrels/{shorten_name(split, 60)}.tsv in this BEIR folder (split "
                    f"{shorten(split, 60)}); found "
                    + (listed + more if found else "an empty qrels folder"),
                )
            qrels = wanted
        else:
            candidates = [path / f"{split}.tsv", path / "qrels.tsv"]
            found_qrels = next((c for c in candidates if c.is_file()), None)
            if found_qrels is None:
                raise InputError(
                    path,
                    None,
                    f"no qrels/{shorten_name(split, 60)}.tsv, {shorten_name(split, 60)}.tsv "
                    "or qrels.tsv in this BEIR folder",
                )
            qrels = found_qrels
        beir_queries = path / "queries.jsonl"
        beir_corpus = path / "corpus.jsonl"
        manifest = path / "manifest.txt"
        return GoldenPaths(
            qrels=qrels,
            queries=queries or (beir_queries if beir_queries.is_file() else None),
            corpus=beir_corpus if beir_corpus.is_file() else None,
            manifest=manifest if manifest.is_file() and beir_corpus.is_file() else None,
        )
    if not path.exists():
        raise InputError(path, None, "file not found")
    return GoldenPaths(qrels=path, queries=queries, corpus=None)
