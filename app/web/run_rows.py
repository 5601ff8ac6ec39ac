"""The golden-set page's runs table: each run's measures at k and depth, and the reranker check."""

from __future__ import annotations

from typing import Any

from app.eval import Gain
from app.eval.conventions import DEFAULT_DEPTHS
from app.models import GoldenSet
from app.services import comparisons
from app.services import runs as run_service
from app.services import triages as triage_service


def run_rows(
    session: Any, golden: GoldenSet, *, k: int, depth: int, gain: Gain
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    depths = tuple(sorted({*DEFAULT_DEPTHS, k, depth}))
    for run in run_service.list_runs(session=session, golden=golden):
        evaluation = run_service.evaluate_stored_run(
            session=session, run=run, golden=golden, k=k, depth=depth, gain=gain, depths=depths
        )
        triage = next(
            (
                t
                for t in triage_service.list_triages(session=session, run=run)
                if t.depth == depth and t.k == k
            ),
            None,
        )
        rows.append(
            {
                "run": run,
                "recall_k": evaluation.measures[f"R@{k}"],
                "recall_depth": evaluation.measures[f"R@{depth}"],
                "ndcg_k": evaluation.measures[f"nDCG@{k}"],
                "micro_depth": evaluation.micro[f"R@{depth}"],
                "misses": evaluation.misses,
                "queries": run.queries,
                "evaluated": len(evaluation.queries),
                "relevant": evaluation.relevant,
                "curve": {d: evaluation.depth_curve[d] for d in DEFAULT_DEPTHS},
                "triage": triage,
            }
        )
    best: dict[str, Any] = {}
    if rows:
        for key in ("recall_k", "recall_depth", "ndcg_k", "micro_depth"):
            best[key] = max(float(r[key]) for r in rows)
        best["misses"] = min(int(r["misses"]) for r in rows)
    return rows, best


def reranker_checks(session: Any, rows: list[dict[str, Any]], *, k: int, depth: int) -> list[str]:
    """For each pair of runs with the same top-``depth`` documents for every query: say that
    recall@depth is the same and that the recall@k change is ordering alone."""
    notes = []
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            same = comparisons.same_candidates(session=session, a=a["run"], b=b["run"], depth=depth)
            if same:
                notes.append(
                    f"{a['run'].name} and {b['run'].name} return the same top {depth} documents "
                    f"for every query: R@{depth} is identical ({a['recall_depth']:.4f}), and "
                    f"the R@{k} change ({a['recall_k']:.4f} to {b['recall_k']:.4f}) is "
                    "ordering alone."
                )
    return notes
