"""A detection over a corpus holding thousands of copies of one text, as the service runs it.

Usage:
    .venv/bin/python benchmarks/dedup_copies.py [--copies 10000] [--distinct 90000]
        [--repeat 3] [--scaling 1000,2000,4000] [--scaling-distinct 1000]

Real corpora hold thousands of copies of a footer, a cookie notice or an empty template. The
corpus is generated in code (tests/support/dupe_corpus.py: chunks of about 200 Zipf-sampled
pseudo-words; the copied text a cookie notice of about 60 words, every copy laid out
differently: white space and case, the same text after normalisation): ``--copies`` copies of
it among ``--distinct`` distinct chunks. Each case runs in a subprocess of its own (a clean
peak RSS, ``ru_maxrss``) the in-memory part of a detector run,
``app.services.dedup.detector_runs.detection``: the detection (MinHash LSH over distinct
shingle sets, copies grouped first), the pairs kept down to the lowest band, the candidate
search's recall against the exact join (over a sample of 20,000 documents past EXACT_LIMIT,
as the service does) and the review sample; what the service then writes is one row per
pair kept. Timed from the documents in memory to the sample (the generation is not timed; its
texts are in the peak, as the service holds them too).

Printed per case: the median seconds and peak RSS of ``--repeat`` runs, the pairs kept, the
clusters and the largest one. Target for the main case: under 60 s and 1 GB (medians), and
the copies in one cluster; exits 1 on a miss. Then the scaling case of the issue (1,000 /
2,000 / 4,000 copies of one chunk among ``--scaling-distinct`` distinct ones; before copies
were grouped: 3.4 / 17.6 / 90.7 s and +104 / +324 / +1,614 MiB): its seconds should grow
linearly with the copies, not as their square. The machine is shared: compare within a run.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TIME_TARGET = 60.0
RSS_TARGET_MB = 1024.0
NOTICE = (
    "We use cookies and similar technologies to run this site, to remember your settings, "
    "to measure how the site is used and to show you content that fits your interests. "
    "You can accept all cookies, refuse those that are not needed, or choose which kinds "
    "you allow in the settings. Your choice is kept for twelve months and you can change it "
    "at any time from the link at the foot of every page."
)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def corpus(copies: int, distinct: int, seed: int = 7) -> list[tuple[str, str]]:
    """``copies`` layouts of the notice among ``distinct`` distinct chunks, shuffled."""
    from tests.support.dupe_corpus import Writer, relayout, vocabulary

    rng = random.Random(seed)
    writer = Writer(rng, vocabulary(rng, 20_000))
    docs = [(f"n{i:06d}", relayout(rng, NOTICE)) for i in range(copies)]
    docs += [(f"d{i:06d}", writer.text(200)) for i in range(distinct)]
    rng.shuffle(docs)
    return docs


def child(copies: int, distinct: int) -> None:
    from app.eval.dedup import DedupParams
    from app.services.dedup.detector_runs import detection

    documents = corpus(copies, distinct)
    before = _peak_mb()
    start = time.perf_counter()
    result, _, kept, _, sampled, candidate = detection(documents, DedupParams())
    seconds = time.perf_counter() - start
    notice = {d for d, _ in documents if d.startswith("n")}
    largest = max(result.clusters.values(), key=len, default=[])
    print(
        json.dumps(
            {
                "seconds": seconds,
                "peak_mb": _peak_mb(),
                "generated_mb": before,
                "pairs": len(kept),
                "sampled": len(sampled),
                "clusters": len(result.clusters),
                "largest": len(largest),
                "copies_one_cluster": set(largest) == notice if copies > 1 else True,
                "candidate_recall": candidate["value"],
                "candidate_pairs": candidate["pairs"],
                "copy_pairs": candidate["copy_pairs"],
                "how": candidate["how"],
            }
        )
    )


def run_case(copies: int, distinct: int, repeat: int) -> dict[str, Any]:
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(copies), str(distinct)],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            sys.stderr.write(out.stderr)
            raise SystemExit(f"the case {copies} copies + {distinct} failed")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    median = dict(runs[0])
    median["seconds"] = statistics.median(r["seconds"] for r in runs)
    median["peak_mb"] = statistics.median(r["peak_mb"] for r in runs)
    median["all_seconds"] = [round(r["seconds"], 2) for r in runs]
    median["all_peak_mb"] = [round(r["peak_mb"]) for r in runs]
    return median


def show(copies: int, distinct: int, r: dict[str, Any]) -> str:
    return (
        f"{copies:>6,} copies + {distinct:>6,} distinct: {r['seconds']:7.2f} s "
        f"(runs {r['all_seconds']}), peak RSS {r['peak_mb']:7.0f} MB "
        f"(after generating {r['generated_mb']:.0f} MB); {r['pairs']:,} pairs kept, "
        f"{r['clusters']:,} clusters, largest {r['largest']:,}; candidate recall "
        f"{r['candidate_recall']} over {r['candidate_pairs']:,} pairs ({r['how']}; "
        f"{r['copy_pairs']:,} within copies)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=10_000)
    parser.add_argument("--distinct", type=int, default=90_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scaling", default="1000,2000,4000")
    parser.add_argument("--scaling-distinct", type=int, default=1000)
    parser.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    print(f"medians of {args.repeat} run(s), each in a process of its own\n")
    main_case = run_case(args.copies, args.distinct, args.repeat)
    print(show(args.copies, args.distinct, main_case))
    ok_time = main_case["seconds"] < TIME_TARGET
    ok_rss = main_case["peak_mb"] < RSS_TARGET_MB
    ok_cluster = bool(main_case["copies_one_cluster"])
    print(
        f"  target: under {TIME_TARGET:.0f} s ({'met' if ok_time else 'MISSED'}), under "
        f"{RSS_TARGET_MB:.0f} MB peak RSS ({'met' if ok_rss else 'MISSED'}), the copies one "
        f"cluster ({'yes' if ok_cluster else 'NO'})"
    )
    print(
        "\nscaling (before copies were grouped: 3.4 / 17.6 / 90.7 s, "
        "+104 / +324 / +1,614 MiB for 1,000 / 2,000 / 4,000 copies):"
    )
    for copies in [int(c) for c in args.scaling.split(",") if c]:
        print(
            show(
                copies, args.scaling_distinct, run_case(copies, args.scaling_distinct, args.repeat)
            )
        )
    return 0 if ok_time and ok_rss and ok_cluster else 1


if __name__ == "__main__":
    raise SystemExit(main())
