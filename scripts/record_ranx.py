"""Record ranx's ``ndcg_burges`` values for the oracle tests' exponential-gain cases.

ranx compiles its kernels with numba on first use (about 40 s), so the tests compare with
values recorded here instead of running ranx. Run from the repository root::

    python scripts/record_ranx.py          # rewrite tests/eval/ranx_expected.json
    python scripts/record_ranx.py --check  # exit 1 if ranx now disagrees with the file

The cases are ``tests.support.oracle_cases.ranx_case(n)``; the file stores each case's input
fingerprint, so tests/eval/test_oracles.py fails (asking for this script) when the generator
changes, and ``--check`` shows when a new ranx computes other values.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "tests" / "eval" / "ranx_expected.json"
sys.path.insert(0, str(ROOT))  # tests.support is not installed; run from a checkout

from ranx import Qrels, Run  # noqa: E402
from ranx import evaluate as ranx_evaluate  # noqa: E402

from tests.support.oracle_cases import CUTOFFS, RANX_CASES, ranx_case  # noqa: E402

#: Digits kept: the tests compare within 1e-9, and the file stays small.
DIGITS = 12


def record() -> dict[str, object]:
    """ranx's per-query ``ndcg_burges@k`` for every case, for the queries our evaluation
    averages (at least one relevant document, grade >= 1) that the run contains."""
    cases: dict[str, object] = {}
    for n in range(RANX_CASES):
        case = ranx_case(n)
        evaluated = sorted(
            q for q, docs in case.qrels.items() if q in case.run and max(docs.values()) >= 1
        )
        run = Run({q: case.run[q] for q in evaluated})
        metrics = [f"ndcg_burges@{k}" for k in CUTOFFS]
        ranx_evaluate(Qrels({q: case.qrels[q] for q in evaluated}), run, metrics, return_mean=False)
        scores = {
            q: [round(float(run.scores[f"ndcg_burges@{k}"][q]), DIGITS) for k in CUTOFFS]
            for q in evaluated
        }
        cases[str(n)] = {"inputs": case.fingerprint(), "ndcg_burges": scores}
    return {
        "command": "python scripts/record_ranx.py",
        "ranx": version("ranx"),
        "cutoffs": list(CUTOFFS),
        "cases": cases,
    }


def render(document: dict[str, object]) -> str:
    """Indented JSON with each query's list of values on one line, so a diff shows the query."""
    text = json.dumps(document, indent=1, sort_keys=True)
    return re.sub(r"\[[^\[\]{}]*\]", lambda m: json.dumps(json.loads(m.group())), text) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args()
    document = record()
    if args.check:
        recorded = json.loads(OUTPUT.read_text())
        recorded.pop("ranx", None)
        document.pop("ranx")
        if recorded != document:
            print(f"{OUTPUT.relative_to(ROOT)} differs from ranx {version('ranx')}: re-record")
            return 1
        print(f"{OUTPUT.relative_to(ROOT)} agrees with ranx {version('ranx')}")
        return 0
    OUTPUT.write_text(render(document))
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
