"""Near-duplicate detection at 100,000 chunks: app.eval.dedup against plain library pipelines.

Usage:
    .venv/bin/python benchmarks/dedup.py [--docs 100000] [--repeat 3] [--copy-share 0.1]

Generates ``--docs`` chunks of about 200 words (tests/support/dupe_corpus.py: Zipf-sampled
pseudo-words; ``--copy-share`` of them copies of another chunk, of every kind the tests use),
writes them as a BEIR corpus.jsonl, and runs, in the same run, each pipeline in a subprocess of
its own (a clean peak RSS, ``ru_maxrss``), ``--repeat`` times in rotating order:

* ``detector``: ``app.eval.dedup.detect_corpus`` (rensa signatures from a flat uint64 buffer,
  numpy banding, exact-Jaccard verification, union-find);
* ``datasketch``: a plain datasketch pipeline: the same shingles (app.eval.dedup_text), one
  ``MinHash`` per document (same num_perm and seed; hashfunc = the shingle hash's low 32 bits),
  ``MinHashLSH(params=(bands, rows))`` with its own insert loop then a query per document, the
  same exact-Jaccard verification and union-find;
* ``rensa-lsh``: rensa's own objects: ``RMinHash`` per document (tokens = the 8 bytes of each
  shingle hash), ``RMinHashLSH`` insert and query loop, the same verification (125 permutations:
  it wants num_perm divisible by the bands; the detector also uses 25 x 5 = 125 of its 128).

Each pipeline is timed from reading the corpus to its clusters. Reported: the median wall time
and peak RSS per pipeline, and pair precision/recall of its clusters on the known truth.
Targets: the detector within 30 s and 1 GB, and no slower than datasketch (medians); pair
precision >= 0.99 and recall >= 0.95. Exits 1 when one is missed. The machine is shared (other
engineers' tests run on its two cores): compare pipelines within one run, not across runs.
Needs datasketch (``uv pip install --python .venv/bin/python datasketch``), not a dependency of
the app.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.eval.dedup import DedupParams, cluster_id_for, corpus_texts, detect_corpus  # noqa: E402
from app.eval.dedup_text import Shingler, jaccard  # noqa: E402

PIPELINES = ("detector", "datasketch", "rensa-lsh")
TIME_TARGET = 30.0
RSS_TARGET_MB = 1024.0


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _shingled(path: Path, size: int) -> tuple[list[str], list[Any]]:
    shingler = Shingler(size)
    ids: list[str] = []
    sets: list[Any] = []
    batch: list[tuple[str, str]] = []

    def flush() -> None:
        flat, offsets = shingler.batch([t for _, t in batch])
        for k, (doc_id, _) in enumerate(batch):
            if offsets[k + 1] > offsets[k]:
                ids.append(doc_id)
                sets.append(flat[offsets[k] : offsets[k + 1]].copy())
        batch.clear()

    for item in corpus_texts(path):
        batch.append(item)
        if len(batch) == 4096:
            flush()
    if batch:
        flush()
    return ids, sets


def _clusters(ids: list[str], sets: list[Any], candidates: set[tuple[int, int]], j: float) -> Any:
    parent = list(range(len(ids)))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    verified = 0
    for a, b in candidates:
        verified += 1
        if jaccard(sets[a], sets[b]) >= j:
            ra, rb = root(a), root(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[str]] = {}
    for i in range(len(ids)):
        groups.setdefault(root(i), []).append(ids[i])
    clusters = {cluster_id_for(m): sorted(m) for m in groups.values() if len(m) > 1}
    return clusters, verified


def run_datasketch(path: Path, p: DedupParams) -> dict[str, Any]:
    from datasketch import MinHash, MinHashLSH

    bands, rows = p.shape()
    t0 = time.perf_counter()
    ids, sets = _shingled(path, p.shingle_size)
    t1 = time.perf_counter()
    mask = 0xFFFFFFFF

    def low32(value: Any) -> int:
        return int(value) & mask

    lsh = MinHashLSH(num_perm=p.num_perm, params=(bands, rows))
    hashes = []
    for i, shingles in enumerate(sets):
        m = MinHash(num_perm=p.num_perm, seed=p.seed, hashfunc=low32)
        m.update_batch(shingles)
        lsh.insert(i, m)
        hashes.append(m)
    t2 = time.perf_counter()
    candidates = set()
    for i, m in enumerate(hashes):
        for k in lsh.query(m):
            if k != i:
                candidates.add((min(i, k), max(i, k)))
    t3 = time.perf_counter()
    clusters, verified = _clusters(ids, sets, candidates, p.threshold)
    t4 = time.perf_counter()
    phases = {"shingles": t1 - t0, "minhash+insert": t2 - t1, "query": t3 - t2, "verify": t4 - t3}
    return {"clusters": clusters, "candidates": verified, "phases": phases}


def run_rensa_lsh(path: Path, p: DedupParams) -> dict[str, Any]:
    import rensa

    bands, rows = p.shape()
    perms = bands * rows  # RMinHashLSH wants num_perm divisible by its bands: 125 = 25 x 5
    t0 = time.perf_counter()
    ids, sets = _shingled(path, p.shingle_size)
    t1 = time.perf_counter()
    lsh = rensa.RMinHashLSH(p.threshold, perms, bands)
    hashes = []
    for start in range(0, len(sets), 4096):
        tokens = [[h.to_bytes(8, "little") for h in s.tolist()] for s in sets[start : start + 4096]]
        made = rensa.RMinHash.from_token_sets(tokens, perms, p.seed)
        for k, m in enumerate(made):
            lsh.insert(start + k, m)
        hashes.extend(made)
    t2 = time.perf_counter()
    candidates = set()
    for i, m in enumerate(hashes):
        for k in lsh.query(m):
            if k != i:
                candidates.add((min(i, k), max(i, k)))
    t3 = time.perf_counter()
    clusters, verified = _clusters(ids, sets, candidates, p.threshold)
    t4 = time.perf_counter()
    phases = {"shingles": t1 - t0, "minhash+insert": t2 - t1, "query": t3 - t2, "verify": t4 - t3}
    return {"clusters": clusters, "candidates": verified, "phases": phases}


def run_detector(path: Path, p: DedupParams) -> dict[str, Any]:
    result = detect_corpus(path, p)
    return {
        "clusters": result.clusters,
        "candidates": result.stats.candidates,
        "phases": result.stats.seconds,
    }


def child(name: str, corpus: Path, out: Path) -> None:
    params = DedupParams()
    before = _peak_mb()
    start = time.perf_counter()
    runner = {"detector": run_detector, "datasketch": run_datasketch, "rensa-lsh": run_rensa_lsh}
    found = runner[name](corpus, params)
    seconds = time.perf_counter() - start
    report = {
        "pipeline": name,
        "seconds": seconds,
        "peak_rss_mb": _peak_mb(),
        "rss_before_mb": before,
        "candidates": found["candidates"],
        "phases": {k: round(v, 3) for k, v in found["phases"].items()},
        "clusters": list(found["clusters"].values()),
    }
    out.write_text(json.dumps(report))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--copy-share", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pipelines", default=",".join(PIPELINES))
    parser.add_argument("--child", choices=PIPELINES, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.corpus, args.out)
        return 0
    from tests.support.dupe_corpus import make_corpus, pair_quality

    pipelines = [name for name in args.pipelines.split(",") if name]
    if "datasketch" in pipelines and importlib.util.find_spec("datasketch") is None:
        print("datasketch is not installed: uv pip install --python .venv/bin/python datasketch")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        originals = round(args.docs * (1 - args.copy_share))
        corpus = make_corpus(originals, copy_share=args.copy_share, seed=args.seed)
        path = Path(tmp) / "corpus.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for doc in corpus.docs:
                handle.write(json.dumps(doc) + "\n")
        words = sum(len(d["text"].split()) for d in corpus.docs) / len(corpus.docs)
        print(
            f"corpus: {len(corpus.docs)} chunks, {len(corpus.kinds)} copies, "
            f"{words:.0f} words on average, {path.stat().st_size / 1e6:.0f} MB "
            f"(generated in {time.perf_counter() - t0:.1f} s)"
        )
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in pipelines}
        for r in range(args.repeat):
            order = pipelines[r % len(pipelines) :] + pipelines[: r % len(pipelines)]
            for name in order:
                out = Path(tmp) / f"{name}.json"
                cmd = [sys.executable, __file__, "--child", name, "--corpus", str(path)]
                subprocess.run([*cmd, "--out", str(out)], check=True, cwd=ROOT)
                report = json.loads(out.read_text())
                clusters = {str(i): m for i, m in enumerate(report.pop("clusters"))}
                report["quality"] = pair_quality(corpus.truth, clusters)
                runs[name].append(report)
                q = report["quality"]
                print(
                    f"  run {r + 1} {name:10s} {report['seconds']:6.1f} s "
                    f"peak {report['peak_rss_mb']:6.0f} MB  candidates {report['candidates']} "
                    f"P {q['precision']:.4f} R {q['recall']:.4f}  {report['phases']}"
                )
        print(f"\nmedians over {args.repeat} run(s), {len(corpus.docs)} chunks:")
        medians = {}
        for name, reports in runs.items():
            seconds = statistics.median(r["seconds"] for r in reports)
            peak = statistics.median(r["peak_rss_mb"] for r in reports)
            q = reports[-1]["quality"]
            medians[name] = (seconds, peak, q)
            print(
                f"  {name:10s} {seconds:6.1f} s  peak RSS {peak:6.0f} MB  pair precision "
                f"{q['precision']:.4f} recall {q['recall']:.4f} "
                f"({q['correct_pairs']}/{q['true_pairs']} true pairs)"
            )
    failures = []
    if "detector" in medians:
        seconds, peak, q = medians["detector"]
        failures += [f"detector {seconds:.1f} s > {TIME_TARGET} s"] if seconds > TIME_TARGET else []
        failures += [f"detector peak {peak:.0f} MB >= 1 GB"] if peak >= RSS_TARGET_MB else []
        failures += [f"precision {q['precision']:.4f} < 0.99"] if q["precision"] < 0.99 else []
        failures += [f"recall {q['recall']:.4f} < 0.95"] if q["recall"] < 0.95 else []
        if "datasketch" in medians and seconds > medians["datasketch"][0]:
            failures.append(f"detector slower than datasketch ({medians['datasketch'][0]:.1f} s)")
    print(
        f"targets: detector <= {TIME_TARGET:.0f} s, < 1 GB peak, no slower than datasketch, "
        "pair precision >= 0.99, recall >= 0.95"
    )
    print("MISSED: " + "; ".join(failures) if failures else "all targets met")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
