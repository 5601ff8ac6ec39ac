"""The CI gate: a new run against a baseline on the same golden set.

Pure: no file is read here. The measures are ``evaluate_run``'s own (the same queries averaged,
the same conventions as ``misstriage evaluate``); this module adds the per-query differences,
a paired randomisation test over them and the relevant documents that left or entered the top
``depth``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

import numpy as np
import polars as pl

from app.eval.evaluate import RunEvaluation
from app.eval.golden import Judgments
from app.eval.ranking import RankedRun

DEFAULT_PERMUTATIONS = 10_000
DEFAULT_SEED = 42
DEFAULT_MAX_DROP = 0.01
#: sign flips drawn at once: bounds the memory of the test to BATCH x queries floats
_BATCH = 1_000


@dataclass(frozen=True, slots=True)
class MovedDocument:
    """A relevant document that left (or entered) the top ``depth``; a rank is None where the
    run did not return the document at all (a rank may be deeper than ``depth``)."""

    qid: str
    doc_id: str
    grade: int
    rank_before: int | None
    rank_after: int | None
    text: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "qid": self.qid,
            "doc_id": self.doc_id,
            "grade": self.grade,
            "rank_before": self.rank_before,
            "rank_after": self.rank_after,
        }
        if self.text is not None:
            out["text"] = self.text
        return out


@dataclass(frozen=True, slots=True)
class MeasureChange:
    name: str
    before: float
    after: float
    p_value: float

    @property
    def delta(self) -> float:
        return self.after - self.before

    def as_dict(self) -> dict[str, float]:
        return {
            "before": self.before,
            "after": self.after,
            "delta": self.delta,
            "p_value": self.p_value,
        }


@dataclass(frozen=True)
class GateResult:
    depth: int
    k: int
    queries: int
    permutations: int
    seed: int
    measures: dict[str, MeasureChange]
    left: list[MovedDocument]
    entered: list[MovedDocument]
    reasons: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.reasons

    def as_dict(self) -> dict[str, Any]:
        return {
            "left": [d.as_dict() for d in self.left],
            "entered": [d.as_dict() for d in self.entered],
            "measures": {name: m.as_dict() for name, m in self.measures.items()},
            "permutations": self.permutations,
            "seed": self.seed,
            "passed": self.passed,
            "reasons": list(self.reasons),
            "depth": self.depth,
            "k": self.k,
            "queries": self.queries,
        }


def randomisation_p_value(
    before: np.ndarray | list[float],
    after: np.ndarray | list[float],
    *,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = DEFAULT_SEED,
) -> float:
    """Two-sided paired randomisation (sign-flip permutation) test of the mean difference.

    With d_i = after_i - before_i over the n queries and T = |mean(d)|, under the null
    hypothesis that the two systems are exchangeable on each query, each d_i is as likely
    to be -d_i. For P draws s^(j) in {-1, +1}^n (numpy ``default_rng(seed)``):

        b = |{j : |mean(s^(j) * d)| >= T}|
        p = (b + 1) / (P + 1)

    (the observed assignment counts as one of the permutations: p is never 0, Phipson &
    Smyth 2010). A small tolerance keeps equal means from being lost to rounding. 1.0 when
    every difference is 0.
    """
    if permutations < 1:
        raise ValueError(f"permutations must be >= 1, got {permutations}")
    d = np.asarray(after, dtype=np.float64) - np.asarray(before, dtype=np.float64)
    if d.size == 0 or not d.any():
        return 1.0
    observed = abs(d.mean())
    tolerance = 1e-12 * max(1.0, observed)
    rng = np.random.default_rng(seed)
    extreme = 0
    left = permutations
    while left:
        size = min(_BATCH, left)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(size, d.size))
        extreme += int((np.abs(signs @ d) / d.size >= observed - tolerance).sum())
        left -= size
    return (extreme + 1) / (permutations + 1)


def _top_relevant(golden: Judgments, ranked: RankedRun) -> pl.DataFrame:
    """qid, doc_id, grade, rank (null: not returned) of every relevant document."""
    return golden.relevant.join(
        ranked.judged.select("qid", "doc_id", "rank"), on=["qid", "doc_id"], how="left"
    ).select("qid", "doc_id", "grade", "rank")


def moved_documents(
    golden: Judgments, baseline: RankedRun, new: RankedRun, depth: int
) -> tuple[list[MovedDocument], list[MovedDocument]]:
    """(left, entered): the relevant documents (grade >= min_grade) inside the baseline's top
    ``depth`` and outside the new run's (left), and the reverse (entered); by query in the
    judgments' order, then by the better of the two ranks."""
    before = _top_relevant(golden, baseline).rename({"rank": "rank_before"})
    after = _top_relevant(golden, new).select("qid", "doc_id", pl.col("rank").alias("rank_after"))
    both = before.join(after, on=["qid", "doc_id"], how="left")
    order = {q: i for i, q in enumerate(golden.evaluated_qids)}
    inside_before = pl.col("rank_before").is_not_null() & (pl.col("rank_before") <= depth)
    inside_after = pl.col("rank_after").is_not_null() & (pl.col("rank_after") <= depth)

    def listed(frame: pl.DataFrame, key: str) -> list[MovedDocument]:
        rows = [
            MovedDocument(
                qid=qid,
                doc_id=doc_id,
                grade=int(grade),
                rank_before=rb,
                rank_after=ra,
                text=golden.query_text(qid),
            )
            for qid, doc_id, grade, rb, ra in frame.select(
                "qid", "doc_id", "grade", "rank_before", "rank_after"
            ).iter_rows()
        ]
        return sorted(rows, key=lambda d: (order.get(d.qid, len(order)), getattr(d, key), d.doc_id))

    return (
        listed(both.filter(inside_before & ~inside_after), "rank_before"),
        listed(both.filter(inside_after & ~inside_before), "rank_after"),
    )


def _per_query(result: RunEvaluation, measure: str) -> dict[str, float]:
    if measure.startswith("R@"):
        return {q.qid: q.recall_depth for q in result.queries}
    return {q.qid: q.ndcg_k for q in result.queries}


def gate(
    golden: Judgments,
    baseline: RankedRun,
    new: RankedRun,
    before: RunEvaluation,
    after: RunEvaluation,
    *,
    max_drop: float = DEFAULT_MAX_DROP,
    max_new_misses: int | None = None,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = DEFAULT_SEED,
) -> GateResult:
    """Compare two evaluations (``evaluate_run`` of the baseline and the new run, same golden
    set, k, depth and conventions). Measures: R@depth and nDCG@k, macro means over the
    evaluated queries, each with the p-value of ``randomisation_p_value`` on the per-query
    values (the same seed for every measure).

    Fails when a measure's delta = after - before < -max_drop, or when more than
    ``max_new_misses`` relevant documents left the top depth (only when given).
    """
    if (before.k, before.depth) != (after.k, after.depth):
        raise ValueError("the two evaluations are not at the same k and depth")
    k, depth = before.k, before.depth
    measures: dict[str, MeasureChange] = {}
    for name in (f"R@{depth}", f"nDCG@{k}"):
        b, a = _per_query(before, name), _per_query(after, name)
        if b.keys() != a.keys():
            raise ValueError("the two evaluations do not average the same queries")
        qids = list(b)
        xs, ys = [b[q] for q in qids], [a[q] for q in qids]
        measures[name] = MeasureChange(
            name=name,
            before=fmean(xs),
            after=fmean(ys),
            p_value=randomisation_p_value(xs, ys, permutations=permutations, seed=seed),
        )
    left, entered = moved_documents(golden, baseline, new, depth)
    reasons = [
        f"{m.name} dropped by {-m.delta:.4f} ({m.before:.4f} -> {m.after:.4f}), "
        f"more than the allowed drop of {max_drop:g} (max drop)"
        for m in measures.values()
        if m.delta < -max_drop
    ]
    if max_new_misses is not None and len(left) > max_new_misses:
        documents = "document" if len(left) == 1 else "documents"
        reasons.append(
            f"{len(left)} relevant {documents} left the top {depth}, more than the "
            f"{max_new_misses} allowed (max new misses)"
        )
    return GateResult(
        depth=depth,
        k=k,
        queries=len(before.queries),
        permutations=permutations,
        seed=seed,
        measures=measures,
        left=left,
        entered=entered,
        reasons=reasons,
    )
