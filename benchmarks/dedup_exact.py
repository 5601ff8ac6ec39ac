"""The exact similarity join (app.eval.dedup_exact.exact_pairs) at 5,000 and 20,000 documents.

Usage:
    .venv/bin/python benchmarks/dedup_exact.py [--docs 5000,20000] [--low 0.6] [--repeat 3]

Generates each corpus in code (tests/support/dupe_corpus.py: chunks of about 200 Zipf-sampled
pseudo-words, ``--copy-share`` of them copies of another chunk, of every kind the tests use)
and times ``exact_pairs`` at ``--low`` over its (doc id, text) pairs, ``--repeat`` times,
reporting the median wall time (from the texts, shingling included) and the pairs found. Once
per corpus it also runs the detector (``detect``, default parameters) and reports its recall
against the exact pairs: the share of the pairs at or above ``--low``, and at or above the
detector's threshold (0.8), that its LSH candidate search found.

Target: the largest corpus within 60 s (median) on this two-core machine. Exits 1 when it is
missed. The machine is shared: figures vary by a few tenths between runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.eval.dedup import detect  # noqa: E402
from app.eval.dedup_exact import exact_pairs  # noqa: E402

TIME_TARGET = 60.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", default="5000,20000")
    parser.add_argument("--low", type=float, default=0.6)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--copy-share", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    from tests.support.dupe_corpus import make_corpus

    sizes = [int(d) for d in args.docs.split(",") if d]
    medians: dict[int, float] = {}
    for size in sizes:
        t0 = time.perf_counter()
        originals = round(size * (1 - args.copy_share))
        corpus = make_corpus(originals, copy_share=args.copy_share, seed=args.seed)
        texts = corpus.texts()
        words = sum(len(t.split()) for _, t in texts) / len(texts)
        print(
            f"corpus: {len(texts)} documents, {len(corpus.kinds)} copies, {words:.0f} words on "
            f"average (generated in {time.perf_counter() - t0:.1f} s)"
        )
        seconds = []
        for r in range(args.repeat):
            start = time.perf_counter()
            pairs = exact_pairs(texts, args.low)
            seconds.append(time.perf_counter() - start)
            print(
                f"  run {r + 1} exact_pairs(low={args.low}) {seconds[-1]:6.2f} s, "
                f"{len(pairs)} pairs"
            )
        medians[len(texts)] = statistics.median(seconds)
        start = time.perf_counter()
        result = detect(texts)
        took = time.perf_counter() - start
        found = {(p.doc_a, p.doc_b) for p in result.pairs}
        threshold = result.params.threshold
        for floor in sorted({args.low, threshold}):
            wanted = [(p.doc_a, p.doc_b) for p in pairs if p.similarity >= floor]
            hits = sum(pair in found for pair in wanted)
            recall = hits / len(wanted) if wanted else 1.0
            print(
                f"  detector ({took:.1f} s) LSH recall at J >= {floor}: {recall:.4f} "
                f"({hits}/{len(wanted)} exact pairs)"
            )
    print(f"\nmedians over {args.repeat} run(s), exact_pairs at low = {args.low}:")
    for count, seconds_ in medians.items():
        print(f"  {count:6d} documents {seconds_:6.2f} s")
    largest = max(medians)
    print(f"target: {largest} documents within {TIME_TARGET:.0f} s")
    if medians[largest] > TIME_TARGET:
        print(f"MISSED: {medians[largest]:.1f} s > {TIME_TARGET:.0f} s")
        return 1
    print("all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
