"""``misstriage dedup``: near-duplicate clusters of a corpus, written back as ``cluster_id``.

The detector is ``app.eval.dedup`` (imported in the command's body: ``--help`` stays quick).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from app import __version__
from app.cli.params import TABLE_OR_JSON, FiniteFloatRange

if TYPE_CHECKING:
    from app.eval.dedup import DedupResult

EXIT_BAD_INPUT = 2
#: Clusters listed by the table (the largest first); ``--format json`` lists them all.
SHOWN_CLUSTERS = 10
#: The similarity bands the table counts the verified pairs in (lower bounds).
BANDS = (1.0, 0.9, 0.8, 0.7, 0.6)


def _fail(message: str) -> NoReturn:
    click.echo(f"misstriage: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def corpus_file(path: Path) -> Path:
    """The corpus file of ``path``: the file itself, or a BEIR folder's ``corpus.jsonl``
    (or ``corpus.jsonl.gz``)."""
    if not path.is_dir():
        return path
    for name in ("corpus.jsonl", "corpus.jsonl.gz"):
        if (path / name).is_file():
            return path / name
    _fail(f"{path}: a folder without corpus.jsonl")


def band_counts(result: DedupResult) -> list[dict[str, Any]]:
    """Verified pairs per similarity band: [1.0], [0.9, 1.0), ... down to the lowest kept."""
    lows = [b for b in BANDS if b >= result.params.threshold - result.params.near - 1e-12]
    counts = []
    for i, low in enumerate(lows):
        high = None if i == 0 else lows[i - 1]
        n = sum(
            1 for p in result.pairs if p.similarity >= low and (high is None or p.similarity < high)
        )
        counts.append({"from": low, "below": high, "pairs": n})
    return counts


def result_document(
    result: DedupResult, *, corpus: Path, out: Path, elapsed: float
) -> dict[str, Any]:
    """The JSON answer: parameters, counts, time, every cluster and every verified pair."""
    stats = result.stats
    return {
        "misstriage": __version__,
        "corpus": str(corpus),
        "out": str(out),
        "parameters": stats.parameters,
        "documents": stats.documents,
        "shingled": stats.shingled,
        "candidates": stats.candidates,
        "pairs_at_threshold": stats.pairs_at_threshold,
        "near_pairs": stats.near_pairs,
        "clusters": stats.clusters,
        "clustered_documents": stats.clustered_documents,
        "largest_cluster": stats.largest_cluster,
        "seconds": {**stats.seconds, "elapsed": elapsed},
        "bands": band_counts(result),
        "cluster_members": result.clusters,
        "pairs": [
            {"doc_a": p.doc_a, "doc_b": p.doc_b, "similarity": p.similarity} for p in result.pairs
        ],
    }


def render_result(
    result: DedupResult, *, corpus: Path, out: Path, given: int, elapsed: float
) -> str:
    """The table: what was found, with which parameters, in how long."""
    stats = result.stats
    p = result.params.resolved()
    lines = [
        f"corpus      {corpus}: {stats.documents:,} document{'' if stats.documents == 1 else 's'}"
        f" ({stats.shingled:,} with text)",
        f"parameters  Jaccard >= {p.threshold:g} over normalised word {p.shingle_size}-shingles;"
        f" MinHash {p.num_perm} permutations (seed {p.seed}), LSH {p.bands} bands x {p.rows}"
        f" rows (50% candidate point {p.midpoint:.3f}); every candidate verified exactly",
        f"found       {stats.candidates:,} candidate pairs, {stats.pairs_at_threshold:,} at the"
        f" threshold, {stats.near_pairs:,} near it (>= {p.threshold - p.near:g});"
        f" {stats.clusters:,} clusters of {stats.clustered_documents:,} documents"
        f" (largest {stats.largest_cluster:,})",
        f"wrote       {out}: {stats.documents:,} documents, {given:,} with a cluster_id",
        f"time        {elapsed:.2f} s, the file read and written included (detection: "
        + ", ".join(f"{k} {v:.2f}" for k, v in stats.seconds.items())
        + ")",
        "",
        "pairs by similarity",
    ]
    for band in band_counts(result):
        upper = "" if band["below"] is None else f" < {band['below']:g}"
        lines.append(f"  {band['from']:g} <= J{upper}: {band['pairs']:,}")
    if result.clusters:
        largest = sorted(result.clusters.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        lines += ["", f"largest clusters (of {len(largest):,})"]
        for cid, members in largest[:SHOWN_CLUSTERS]:
            shown = ", ".join(members[:5]) + (", ..." if len(members) > 5 else "")
            lines.append(f"  {cid}  {len(members):>4}  {shown}")
    lines += [
        "",
        "The cluster measures inherit the detector's errors (a false merge makes a window look "
        "less diverse, a missed pair more): review a sample of the pairs by band before "
        "trusting a threshold.",
    ]
    return "\n".join(lines)


@click.command("dedup")
@click.option(
    "--corpus",
    "corpus_path",
    type=click.Path(exists=True, path_type=Path),
    required=True,
    help="A BEIR corpus.jsonl (or .gz), or a BEIR folder holding one.",
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Where to write the corpus with cluster_id on every document that has a copy.",
)
@click.option(
    "--threshold",
    type=FiniteFloatRange(0.5, 1.0),
    default=0.8,
    show_default=True,
    help="Jaccard similarity of two documents' shingles from which they are copies (0.5 to "
    "1: below, nearly every pair of a corpus shares some words).",
)
@TABLE_OR_JSON
def dedup(corpus_path: Path, out_path: Path, threshold: float, output_format: str) -> None:
    """Find near-duplicate documents of a corpus (MinHash LSH candidates, each verified by
    its exact Jaccard similarity, clusters as connected components) and write the corpus
    again with a shared cluster_id on every document that has a copy.

    Exit status: 0 ok, 2 bad options or input.
    """
    from app.eval.dedup import DedupParams, detect_corpus, write_clustered_corpus
    from app.eval.errors import InputError

    started = time.perf_counter()
    corpus = corpus_file(corpus_path)
    if out_path.exists() and out_path.resolve() == corpus.resolve():
        _fail(f"{out_path}: --out must not be the corpus it reads")
    if not out_path.parent.is_dir():
        _fail(f"{out_path}: its folder does not exist")
    try:
        result = detect_corpus(corpus, DedupParams(threshold=threshold))
        # All or nothing: the new corpus appears whole under its name, or not at all.
        handle, temporary = tempfile.mkstemp(dir=out_path.parent, prefix=f".{out_path.name}.")
        os.close(handle)
        try:
            given = write_clustered_corpus(corpus, Path(temporary), result.cluster_of())
            os.replace(temporary, out_path)
        finally:
            Path(temporary).unlink(missing_ok=True)
    except InputError as exc:
        _fail(str(exc))
    except ValueError as exc:
        _fail(f"{corpus}: {exc}")
    except OSError as exc:
        _fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))
    elapsed = time.perf_counter() - started
    if output_format == "json":
        document = result_document(result, corpus=corpus, out=out_path, elapsed=elapsed)
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        shown = render_result(result, corpus=corpus, out=out_path, given=given, elapsed=elapsed)
        click.echo(shown)
