"""Benchmark: importing an MS MARCO-train-sized golden set, against a raw bulk load.

Generates in a temporary folder (fixed seed, generated data only) a TREC qrels file of
530,000 judgments over 500,000 queries and a BEIR ``queries.jsonl`` of 800,000 query texts
(the judged ones and 300,000 more, as MS MARCO train: 532,761 judgments, 502,939 judged
queries, 808,731 texts), and beside them the rows the import stores, as CSV. Then, for each
backend (a fresh SQLite file; a throwaway PostgreSQL database, dropped afterwards), alternating:

* misstriage: ``import_golden_set`` (app/services/imports/golden_sets.py, the function
  ``misstriage import-golden-set`` and the API call) on a migrated database in a fresh
  process: parse, check, write, commit; wall time of the call, peak RSS of the process;
* reference: a raw bulk load of the same rows into tables with the same keys (a primary key
  and the unique key of each of ``golden_query`` and ``judgment``), read from the CSV files,
  in one transaction with its commit: PostgreSQL ``COPY ... FROM STDIN`` (psycopg), SQLite
  ``executemany`` (sqlite3, WAL and synchronous=NORMAL as the product's).

Interpreter start-up and library imports are outside both timings (they are the same for
every import; on this machine they cost more than the reference itself).
Targets (issue 29): the import's median wall <= 2x the reference's median, its peak RSS
< 1 GB, on both backends; the script exits 1 when a target is missed or a run fails.

Usage: python benchmarks/import_golden_set_scale.py [--runs 3] [--scale 1.0]
    [--backends sqlite,postgresql] [--profile DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from support import PG_URL, bench_database, run_bounded

SEED = 20261204
JUDGED_QUERIES = 500_000
JUDGMENTS = 530_000
TEXTS = 800_000
CORPUS = 8_841_823  # MS MARCO passages
VOCABULARY = 30_000
BACKENDS = ("sqlite", "postgresql")
#: the import's wall time over the reference's, and its peak RSS (issue 29)
TARGET_RATIO = 2.0
TARGET_RSS_MB = 1000
MB = 1_000_000

REFERENCE_TABLES = (
    "CREATE TABLE golden_query (id {serial} PRIMARY KEY, golden_set_id INTEGER NOT NULL, "
    "qid VARCHAR(200) NOT NULL, text TEXT, UNIQUE (golden_set_id, qid))",
    "CREATE TABLE judgment (id {serial} PRIMARY KEY, golden_set_id INTEGER NOT NULL, "
    "qid VARCHAR(200) NOT NULL, doc_id VARCHAR(300) NOT NULL, grade INTEGER NOT NULL, "
    "UNIQUE (golden_set_id, qid, doc_id))",
)
ROW_FILES = {
    "golden_query": ("golden_set_id", "qid", "text"),
    "judgment": ("golden_set_id", "qid", "doc_id", "grade"),
}


def generate(folder: Path, scale: float) -> dict[str, int]:
    """Write qrels.txt, queries.jsonl and the stored rows (golden_query.csv, judgment.csv)."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(SEED)
    n_judged = max(1, round(JUDGED_QUERIES * scale))
    n_judgments = max(n_judged, round(JUDGMENTS * scale))
    n_texts = max(n_judged, round(TEXTS * scale))
    # MS MARCO train qids are integers below 1.2M; distinct, in random order.
    qids = rng.choice(max(1_200_000, 2 * n_texts), n_texts, replace=False).astype(str)
    judged = qids[:n_judged]
    # every judged query once, the rest of the judgments on random judged queries; documents
    # distinct, so no pair is judged twice; all grade 1 (MS MARCO's qrels)
    rel_q = np.concatenate([np.arange(n_judged), rng.integers(0, n_judged, n_judgments - n_judged)])
    rng.shuffle(rel_q)
    docs = rng.choice(CORPUS, n_judgments, replace=False).astype(str)
    judgments = pl.DataFrame({"qid": judged[rel_q], "doc_id": docs, "grade": 1})
    judgments.select("qid", pl.lit("0"), "doc_id", "grade").write_csv(
        folder / "qrels.txt", separator=" ", include_header=False
    )
    # texts of 2 to 12 words (MS MARCO: 6 on average) from a vocabulary of made-up words
    lengths = rng.integers(2, 12, n_texts)
    words = pl.Series("w", _words(rng, VOCABULARY)).gather(
        rng.zipf(1.3, int(lengths.sum())) % VOCABULARY
    )
    texts = (
        pl.DataFrame({"w": words, "q": np.repeat(np.arange(n_texts), lengths)})
        .group_by("q", maintain_order=True)
        .agg(pl.col("w").str.join(" "))
        .get_column("w")
    )
    order = rng.permutation(n_texts)
    queries = pl.DataFrame({"_id": qids[order], "text": texts.gather(order)})
    queries.write_ndjson(folder / "queries.jsonl")
    # the rows stored: a query row per judged query and per text, a judgment row per line
    stored = pl.DataFrame({"qid": qids, "text": texts})
    stored.select(pl.lit(1).alias("golden_set_id"), "qid", "text").write_csv(
        folder / "golden_query.csv", include_header=False
    )
    judgments.select(pl.lit(1).alias("golden_set_id"), "qid", "doc_id", "grade").write_csv(
        folder / "judgment.csv", include_header=False
    )
    return {"judged": n_judged, "judgments": n_judgments, "texts": n_texts}


def _words(rng: Any, n: int) -> list[str]:
    """``n`` distinct made-up words of 3 to 10 letters."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    found: set[str] = set()
    while len(found) < n:
        size = int(rng.integers(3, 11))
        found.add("".join(letters[i] for i in rng.integers(0, 26, size)))
    return sorted(found)


def child_product(url: str, folder: Path, profile: Path | None) -> dict[str, Any]:
    """In a fresh process: migrate (untimed), then time ``import_golden_set``."""
    from sqlmodel import Session

    from app.db import make_engine
    from app.migrate import upgrade
    from app.services.imports.golden_sets import import_golden_set
    from app.settings import Settings

    settings = Settings(database_url=url)
    upgrade(settings)
    engine = make_engine(settings)
    with Session(engine, expire_on_commit=False) as session:
        profiler = None
        if profile is not None:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        start = time.perf_counter()
        golden = import_golden_set(
            session=session,
            name="msmarco-train-scale",
            qrels=folder / "qrels.txt",
            queries=folder / "queries.jsonl",
        )
        wall = time.perf_counter() - start
        if profiler is not None:
            profiler.disable()
            assert profile is not None
            profiler.dump_stats(profile)
    engine.dispose()
    return {
        "wall": wall,
        "queries": golden.queries,
        "judgments": golden.judgments,
        "texts": golden.report["judgments"]["queries_without_text"],
    }


def child_reference(url: str, folder: Path) -> dict[str, Any]:
    """In a fresh process: create the keyed tables (untimed), then time the bulk load."""
    if url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(url) as connection:
            for statement in REFERENCE_TABLES:
                connection.execute(statement.format(serial="BIGSERIAL"))  # type: ignore[arg-type]
            connection.commit()
            start = time.perf_counter()
            with connection.cursor() as cursor:
                for table, columns in ROW_FILES.items():
                    names = ", ".join(columns)
                    statement = f"COPY {table} ({names}) FROM STDIN WITH (FORMAT csv)"
                    with cursor.copy(statement) as copy, (folder / f"{table}.csv").open("rb") as f:
                        while block := f.read(1 << 20):
                            copy.write(block)
            connection.commit()
            wall = time.perf_counter() - start
        return {"wall": wall}
    import csv
    import sqlite3

    connection = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    for statement in REFERENCE_TABLES:
        connection.execute(statement.format(serial="INTEGER"))
    start = time.perf_counter()
    connection.execute("BEGIN IMMEDIATE")
    for table, columns in ROW_FILES.items():
        marks = ", ".join("?" for _ in columns)
        with (folder / f"{table}.csv").open(newline="") as handle:
            connection.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", csv.reader(handle)
            )
    connection.execute("COMMIT")
    wall = time.perf_counter() - start
    connection.close()
    return {"wall": wall}


def measure(arguments: list[str]) -> tuple[dict[str, Any], float]:
    """Run this script as a child; its JSON answer and its peak RSS in MB (wait4)."""
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            [sys.executable, __file__, *arguments], stdout=subprocess.PIPE, stderr=errors
        )
        out = process.stdout.read() if process.stdout is not None else b""
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            errors.seek(0)
            text = errors.read().decode(errors="replace")[-3000:]
            raise RuntimeError(f"{' '.join(arguments[:2])} failed ({code}):\n{text}")
    return json.loads(out), usage.ru_maxrss * 1024 / MB


def bench_backend(
    backend: str, folder: Path, runs: int, expected: dict[str, int], profile: Path | None
) -> dict[str, list[tuple[float, float]]]:
    """``runs`` alternating pairs (product, reference), each on a fresh database."""
    found: dict[str, list[tuple[float, float]]] = {"misstriage": [], "reference": []}
    for run in range(runs):
        for who in ("misstriage", "reference"):
            if backend == "sqlite":
                database = folder / f"{who}-{run}.db"
                url = f"sqlite:///{database}"
                answer, rss = _one(who, url, folder, profile if run == 0 else None, backend)
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{database}{suffix}").unlink(missing_ok=True)
            else:
                with bench_database() as name:
                    url = PG_URL.format(name=name)
                    answer, rss = _one(who, url, folder, profile if run == 0 else None, backend)
            if who == "misstriage" and (
                answer["queries"] != expected["judged"]
                or answer["judgments"] != expected["judgments"]
            ):
                raise RuntimeError(f"{backend}: the import stored {answer}, expected {expected}")
            found[who].append((answer["wall"], rss))
            print(
                f"  {backend} {who} run {run + 1}: {answer['wall']:.2f} s, {rss:.0f} MB", flush=True
            )
    return found


def _one(
    who: str, url: str, folder: Path, profile: Path | None, backend: str
) -> tuple[dict[str, Any], float]:
    arguments = ["--child", who, "--url", url, "--folder", str(folder)]
    if profile is not None and who == "misstriage":
        profile.mkdir(parents=True, exist_ok=True)
        arguments += ["--profile-file", str(profile / f"{backend}.prof")]
    return measure(arguments)


def report(results: dict[str, dict[str, list[tuple[float, float]]]], runs: int) -> bool:
    """Print the table and the targets; whether every target is met."""
    print(f"\n| backend | who ({runs} runs, median) | wall s | peak RSS MB | runs (wall s) |")
    print("|---|---|---|---|---|")
    ok = True
    verdicts = []
    for backend, found in results.items():
        medians = {}
        for who, samples in found.items():
            wall = statistics.median(s[0] for s in samples)
            rss = statistics.median(s[1] for s in samples)
            medians[who] = (wall, rss)
            listed = ", ".join(f"{s[0]:.2f}" for s in samples)
            print(f"| {backend} | {who} | {wall:.2f} | {rss:.0f} | {listed} |")
        ratio = medians["misstriage"][0] / medians["reference"][0]
        rss = max(s[1] for s in found["misstriage"])
        ratio_met, rss_met = ratio <= TARGET_RATIO, rss < TARGET_RSS_MB
        ok = ok and ratio_met and rss_met
        verdicts.append(
            f"{backend}: import / reference = {ratio:.2f} (target <= {TARGET_RATIO}: "
            f"{'met' if ratio_met else 'NOT met'}); peak RSS at most {rss:.0f} MB (target < "
            f"{TARGET_RSS_MB}: {'met' if rss_met else 'NOT met'})"
        )
    print("\n" + "\n".join(verdicts))
    return ok


def main() -> None:
    """Parse arguments; as the parent, generate and measure; as a child, answer JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="of the MS MARCO train sizes")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--timeout", type=int, default=1800, help="seconds for everything")
    parser.add_argument("--profile", type=Path, metavar="DIR", help="cProfile the first import")
    parser.add_argument("--child", choices=("misstriage", "reference", "generate"))
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--profile-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "generate":
        print(json.dumps(generate(args.folder, args.scale)))
        return
    if args.child == "misstriage":
        print(json.dumps(child_product(args.url, args.folder, args.profile_file)))
        return
    if args.child == "reference":
        print(json.dumps(child_reference(args.url, args.folder)))
        return
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if unknown := set(backends) - set(BACKENDS):
        parser.error(f"unknown backends {sorted(unknown)}; choose from {BACKENDS}")

    def body(_processes: list[subprocess.Popen[bytes]]) -> bool:
        with tempfile.TemporaryDirectory(prefix="misstriage-golden-bench-") as tmp:
            folder = Path(tmp)
            started = time.perf_counter()
            expected, _ = measure(
                ["--child", "generate", "--folder", tmp, "--scale", str(args.scale)]
            )
            sizes = ", ".join(
                f"{p.name} {p.stat().st_size / 2**20:.0f} MiB"
                for p in (folder / "qrels.txt", folder / "queries.jsonl")
            )
            print(
                f"input: {expected['judgments']:,} judgments over {expected['judged']:,} "
                f"queries, {expected['texts']:,} texts; {sizes} "
                f"(ready in {time.perf_counter() - started:.1f} s)",
                flush=True,
            )
            results = {}
            for backend in backends:
                results[backend] = bench_backend(backend, folder, args.runs, expected, args.profile)
            return report(results, args.runs)

    run_bounded(args.timeout, body, name="import_golden_set_scale")


if __name__ == "__main__":
    main()
