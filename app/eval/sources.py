"""Input discovery: which reader a file needs, and BEIR folders."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

from app.eval.conventions import Order
from app.eval.errors import InputError
from app.eval.golden import GoldenSet
from app.eval.jsonl import read_jsonl_run
from app.eval.ranking import RankedRun, rank_run
from app.eval.textio import GZIP_MAGIC, ProgressFn
from app.eval.trec import read_trec_run

RUN_FORMATS = ("trec", "jsonl")


def _head(path: Path, size: int = 4096) -> bytes:
    with path.open("rb") as handle:
        head = handle.read(size)
    if head.startswith(GZIP_MAGIC):
        try:
            with gzip.open(path, "rb") as handle:
                head = handle.read(size)
        except (OSError, EOFError):
            raise InputError(path, None, "not a readable gzip file") from None
    return head


def detect_run_format(path: Path) -> str:
    """``jsonl`` when the first non-blank character is ``{``, else ``trec``."""
    if not path.is_file():
        raise InputError(path, None, "file not found" if not path.exists() else "not a file")
    return "jsonl" if _head(path).lstrip().startswith(b"{") else "trec"


def load_run(
    path: Path,
    golden: GoldenSet,
    *,
    name: str,
    order: Order = Order.TREC_EVAL,
    fmt: str | None = None,
    keep_results: bool = False,
    progress: ProgressFn | None = None,
) -> RankedRun:
    """Read a run file (TREC or JSONL, plain or gzip) and rank it under the conventions."""
    fmt = fmt or detect_run_format(path)
    if fmt not in RUN_FORMATS:
        raise InputError(path, None, f"unknown run format {fmt!r} (expected trec or jsonl)")
    if fmt == "trec":
        frame = read_trec_run(path, with_rank=order is Order.RANK, progress=progress)
        detail = "trec"
    else:
        frame, detail = read_jsonl_run(path, progress=progress)
    if frame.height == 0:
        raise InputError(path, None, "the run is empty")
    return rank_run(
        frame,
        golden,
        order=order,
        name=name,
        source=str(path),
        fmt=detail,
        keep_results=keep_results,
    )


@dataclass(frozen=True, slots=True)
class GoldenPaths:
    qrels: Path
    queries: Path | None
    corpus: Path | None
    manifest: Path | None = None


def resolve_golden(path: Path, *, queries: Path | None = None, split: str = "test") -> GoldenPaths:
    """A qrels file, or a BEIR folder (``qrels/<split>.tsv``, ``queries.jsonl``,
    ``corpus.jsonl``, and our own optional ``manifest.txt``: the ids the index holds)."""
    if path.is_dir():
        qrels_dir = path / "qrels"
        candidates = [qrels_dir / f"{split}.tsv", path / "qrels.tsv", path / f"{split}.tsv"]
        if qrels_dir.is_dir():
            found = sorted(qrels_dir.glob("*.tsv"))
            if len(found) == 1:
                candidates.append(found[0])
        qrels = next((c for c in candidates if c.is_file()), None)
        if qrels is None:
            raise InputError(path, None, f"no qrels/{split}.tsv or qrels.tsv in this BEIR folder")
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
