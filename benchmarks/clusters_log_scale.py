"""Benchmark: ``misstriage clusters`` over a production-sized log, beside polars' scan of it.

Generates (once, in benchmarks/data/) a log of --queries queries x --per-query results (the
issue's size: 5,000,000 x 20 = 100M lines) over 100,000 documents, a third of them in
duplicate clusters, with repeated documents, tied scores, short queries and documents absent
from the corpus, written as TREC, TREC gzip, JSONL and Parquet, and a corpus.jsonl with cluster
ids. Then measures, alternating, --runs times each, as separate processes (wall time and peak
RSS from wait4):

* ``misstriage clusters --run <log> --corpus corpus.jsonl --k 10,20`` (JSON output);
* the reference: polars' streaming scan of the same file's two id columns (a group-by of query
  id counting documents, which reads every line and keeps one row a query), from scan_csv,
  scan_ndjson or scan_parquet (gzip: read_csv, polars' one way into a gzip file).

Targets (issue 29): per format, misstriage's median wall time at most 1.5x the reference's, and
its peak RSS under 1 GB. Prints the table and exits 1 on a miss.

    python benchmarks/clusters_log_scale.py [--queries 5000000] [--per-query 20] [--runs 3]
        [--formats trec,gzip,jsonl,parquet]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
MISSTRIAGE = Path(sys.executable).with_name("misstriage")
SEED = 20261204
DOCUMENTS = 100_000
TIME_RATIO = 1.5
MAX_RSS_MB = 1024.0
FORMATS = ("trec", "gzip", "jsonl", "parquet")
SUFFIX = {"trec": "trec", "gzip": "trec.gz", "jsonl": "jsonl", "parquet": "parquet"}

#: The reference, per format: polars reads every line of the two id columns.
REFERENCE = {
    "trec": (
        "import polars as pl, sys; pl.scan_csv(sys.argv[1], separator=' ', has_header=False, "
        "new_columns=['qid','q0','doc','rank','score','tag']).group_by('qid')"
        ".agg(pl.col('doc').len()).collect(engine='streaming')"
    ),
    "gzip": (
        "import polars as pl, sys; pl.read_csv(sys.argv[1], separator=' ', has_header=False, "
        "new_columns=['qid','q0','doc','rank','score','tag'], columns=[0, 2]).group_by('qid')"
        ".agg(pl.col('doc').len())"
    ),
    "jsonl": (
        "import polars as pl, sys; pl.scan_ndjson(sys.argv[1], schema={'qid': pl.String, "
        "'doc_id': pl.String, 'score': pl.Float64}).group_by('qid')"
        ".agg(pl.col('doc_id').len()).collect(engine='streaming')"
    ),
    "parquet": (
        "import polars as pl, sys; pl.scan_parquet(sys.argv[1]).select('qid', 'doc_id')"
        ".group_by('qid').agg(pl.col('doc_id').len()).collect(engine='streaming')"
    ),
}


def paths(queries: int, per_query: int) -> tuple[dict[str, Path], Path]:
    stem = DATA / f"log-{queries}x{per_query}"
    return {f: stem.with_suffix("." + SUFFIX[f]) for f in FORMATS}, DATA / "log-corpus.jsonl"


def generate(queries: int, per_query: int, formats: list[str]) -> None:
    """Write the log in every format and the corpus (in a child process: a child's peak RSS
    starts from its parent's at fork, so the measuring parent stays small)."""
    import gzip
    import json
    import shutil

    import numpy as np
    import polars as pl

    DATA.mkdir(exist_ok=True)
    logs, corpus = paths(queries, per_query)
    rng = np.random.default_rng(SEED)
    with corpus.open("w") as out:
        for d in range(DOCUMENTS - 500):  # the last 500 ids are absent from the corpus
            doc: dict[str, object] = {"_id": f"d{d}", "title": "", "text": "w" * (d % 97)}
            if d % 3 == 0:
                doc["cluster_id"] = f"c{d // 30}"  # clusters of ten documents
            out.write(json.dumps(doc) + "\n")
    chunk = 250_000
    jsonl_path = logs["jsonl"] if "jsonl" in formats else Path(os.devnull)
    with logs["trec"].open("w") as trec, jsonl_path.open("w") as jsonl:
        parts = []
        for start in range(0, queries, chunk):
            n = min(chunk, queries - start)
            # one query in 20 returns fewer results (a short query)
            lengths = np.where(rng.random(n) < 0.05, rng.integers(1, per_query, n), per_query)
            qids = np.repeat(np.arange(start, start + n), lengths)
            # a query's results are neighbours (d, d+1, ...: ten documents share a cluster
            # where d % 3 == 0, so clusters repeat), one query in 50 holds the same document
            # twice (its fourth result again), some documents are not in the corpus
            base = np.repeat(rng.integers(0, DOCUMENTS - 40, n), lengths)
            starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
            offset = np.arange(qids.size) - starts
            twice = np.repeat(rng.random(n) < 0.02, lengths) & (offset == lengths.max() - 1)
            docs = base + np.where(twice, 3, offset)
            ranks = np.concatenate([np.arange(1, k + 1) for k in lengths])
            # written best first, as a system serves them; scores to one decimal, so deep
            # ranks tie now and then (the tied ones then need the conventions' sort)
            scores = np.round(1000.0 / (ranks + 10), 1)
            frame = pl.DataFrame(
                {
                    "qid": pl.Series(qids).cast(pl.String).str.pad_start(7, "0"),
                    "doc_id": "d" + pl.Series(docs).cast(pl.String),
                    "rank": ranks,
                    "score": scores,
                }
            )
            frame.select(
                "qid",
                pl.lit("Q0").alias("q0"),
                "doc_id",
                "rank",
                "score",
                pl.lit("log").alias("tag"),
            ).write_csv(trec, separator=" ", include_header=False)
            if "jsonl" in formats:
                frame.select("qid", "doc_id", "score").write_ndjson(jsonl)
            parts.append(frame)
            if len(parts) * chunk >= 2_000_000 or start + n >= queries:
                path = DATA / f"part-{start}.parquet"
                pl.concat(parts).write_parquet(path, row_group_size=1_000_000)
                parts = []
    pieces = sorted(DATA.glob("part-*.parquet"), key=lambda p: int(p.stem.split("-")[1]))
    if "parquet" in formats:
        pl.scan_parquet(pieces).sink_parquet(logs["parquet"], row_group_size=1_000_000)
    for piece in pieces:
        piece.unlink()
    if "gzip" in formats:
        with logs["trec"].open("rb") as src, gzip.open(logs["gzip"], "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    for fmt in {"trec", *formats}:
        done_marker(queries, per_query, fmt).touch()


def done_marker(queries: int, per_query: int, fmt: str) -> Path:
    """Present once the log's file in ``fmt`` is written whole."""
    return DATA / f"log-{queries}x{per_query}.{fmt}.done"


def measure(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS in MB of one process (its stdout dropped)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        stderr = process.stderr.read().decode() if process.stderr else ""
        raise SystemExit(f"{command[:3]} failed: {stderr[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=5_000_000)
    parser.add_argument("--per-query", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--formats", default=",".join(FORMATS))
    args = parser.parse_args()
    formats = [f for f in args.formats.split(",") if f]
    if unknown := set(formats) - set(FORMATS):
        parser.error(f"unknown formats {sorted(unknown)}")
    logs, corpus = paths(args.queries, args.per_query)
    if not all(done_marker(args.queries, args.per_query, f).is_file() for f in formats):
        print(f"generating {args.queries:,} x {args.per_query} lines in {DATA} ...", flush=True)
        here = [sys.executable, __file__, "--queries", str(args.queries)]
        here += ["--per-query", str(args.per_query), "--formats", ",".join(formats)]
        subprocess.run([*here, "--generate-only"], check=True)
    missed = False
    print(f"\nlog: {args.queries:,} queries x {args.per_query} results; corpus {corpus.name}")
    print(
        f"| format | misstriage s (runs) | peak MB | polars scan s (runs) | peak MB | ratio "
        f"(target <= {TIME_RATIO}) |"
    )
    print("|---|---|---|---|---|---|")
    for fmt in formats:
        ours: list[tuple[float, float]] = []
        theirs: list[tuple[float, float]] = []
        for _ in range(args.runs):
            theirs.append(measure([sys.executable, "-c", REFERENCE[fmt], str(logs[fmt])]))
            ours.append(
                measure(
                    [
                        str(MISSTRIAGE),
                        "clusters",
                        "--run",
                        str(logs[fmt]),
                        "--corpus",
                        str(corpus),
                        "--k",
                        "10,20",
                        "--format",
                        "json",
                    ]
                )
            )
        wall = statistics.median(w for w, _ in ours)
        rss = max(r for _, r in ours)
        ref = statistics.median(w for w, _ in theirs)
        ref_rss = max(r for _, r in theirs)
        ratio = wall / ref
        met = ratio <= TIME_RATIO and rss < MAX_RSS_MB
        missed = missed or not met
        runs = " ".join(f"{w:.2f}" for w, _ in ours)
        ref_runs = " ".join(f"{w:.2f}" for w, _ in theirs)
        print(
            f"| {fmt} | {wall:.2f} ({runs}) | {rss:.0f} | {ref:.2f} ({ref_runs}) | "
            f"{ref_rss:.0f} | {ratio:.2f} {'met' if met else 'MISSED'} |",
            flush=True,
        )
    print(
        f"target: time <= {TIME_RATIO}x polars' scan and peak RSS < {MAX_RSS_MB:.0f} MB: "
        + ("MISSED" if missed else "met")
    )
    return 1 if missed else 0


if __name__ == "__main__":
    if "--generate-only" in sys.argv:
        argv = [a for a in sys.argv[1:] if a != "--generate-only"]
        values = dict(zip(argv[::2], argv[1::2], strict=True))
        generate(
            int(values["--queries"]), int(values["--per-query"]), values["--formats"].split(",")
        )
        sys.exit(0)
    sys.exit(main())
