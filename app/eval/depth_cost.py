"""The depth advisor: the reranking cost beside every depth of the recall curve, and where
depth stops paying.

The method: "a decision about depth is entirely the collision of those two shapes", the recall
curve (concave, flattening) and the reranking cost (linear in depth). With ``c`` ms per
candidate and an optional retrieval p95 ``p(d)`` at each depth:

* cost at depth ``d``: ``cost(d) = d * c + p(d)`` ms per query (``p(d) = 0`` when not given);
  at 3.1 ms per candidate: 31, 155, 310, 620 ms at depths 10, 50, 100, 200;
* between neighbouring depths ``a < b``: recall gained ``ΔR = R(b) - R(a)``, time added
  ``Δt = cost(b) - cost(a)`` and recall per added millisecond ``ΔR / Δt`` (0 on a flat step);
* the advised depth: the smallest depth whose recall is within ``tolerance`` of the best
  recall on the curve, ``min{d : R(d) >= max R - tolerance}``.

Edge cases, explicit: a cost of 0 or none means there is nothing to trade, so there is no
advice (``advise_depth`` answers None); a step whose gain rounds to 0 (three decimals, as it is
shown: app.eval.formatting) "buys nothing"; a step whose added time is
not positive (a retrieval p95 that falls faster than the reranking cost grows) has no recall
per millisecond (None). Pure: imports nothing of the application but its number formatting.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

from app.eval import formatting
from app.eval.formatting import ms as format_ms

#: The default tolerance: a depth within 0.01 recall of the best is as good as the best.
DEFAULT_TOLERANCE = 0.01

#: Recall differences below this are float noise (macro means of ratios), not a gain.
_NOISE = 1e-12


def parse_retrieval_p95(text: str) -> dict[int, float]:
    """``"10:12,100:30,1000:95"``: the retrieval p95 in ms measured at some depths. Raises
    ValueError naming the bad part (a depth below 1, a negative or non-finite time, a depth
    given twice)."""
    measured: dict[int, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        depth_text, sep, ms_text = part.partition(":")
        try:
            depth, ms = int(depth_text), float(ms_text)
        except ValueError:
            raise ValueError(f"{part[:40]!r} is not depth:ms (as in 10:12,100:30)") from None
        if not sep or depth < 1 or not math.isfinite(ms) or ms < 0:
            raise ValueError(f"{part[:40]!r} is not depth:ms with depth >= 1 and ms >= 0")
        if depth in measured:
            raise ValueError(f"depth {depth} is given twice")
        measured[depth] = ms
    if not measured:
        raise ValueError("no depth:ms pair (as in 10:12,100:30)")
    return measured


def fill_retrieval_p95(depths: list[int], measured: Mapping[int, float]) -> dict[int, float]:
    """The retrieval p95 at every depth of a curve from the depths it was measured at: linear
    in depth between two measured depths, the nearest measured value beyond them (a p95 is
    rarely measured at every depth a curve has)."""
    known = sorted(measured)
    filled: dict[int, float] = {}
    for depth in depths:
        if depth <= known[0]:
            filled[depth] = measured[known[0]]
        elif depth >= known[-1]:
            filled[depth] = measured[known[-1]]
        else:
            upper = next(d for d in known if d >= depth)
            lower = max(d for d in known if d <= depth)
            share = 0.0 if upper == lower else (depth - lower) / (upper - lower)
            filled[depth] = measured[lower] + share * (measured[upper] - measured[lower])
    return filled


@dataclass(frozen=True, slots=True)
class DepthCost:
    """One depth of the curve with its reranking cost (ms per query) and the recall gained
    per added millisecond since the previous depth (None at the first depth)."""

    depth: int
    recall: float
    cost_ms: float
    gain_per_ms: float | None


@dataclass(frozen=True, slots=True)
class DepthStep:
    """From one depth of the curve to the next: the recall gained and the time added."""

    from_depth: int
    to_depth: int
    recall_gain: float
    added_ms: float

    @property
    def gain_per_ms(self) -> float | None:
        """``ΔR / Δt``; 0 on a flat step, None when no time is added."""
        if self.recall_gain <= _NOISE:
            return 0.0
        if self.added_ms <= 0:
            return None
        return self.recall_gain / self.added_ms

    def sentence(self) -> str:
        """ "depth 200 buys +0.030 R for +465 ms per query" (or "buys nothing")."""
        bought = formatting.gain(self.recall_gain)
        sign = "+" if self.added_ms >= 0 else "-"
        added = f"{sign}{format_ms(abs(self.added_ms))}"
        return f"depth {self.to_depth} buys {bought} for {added} ms per query"


@dataclass(frozen=True)
class DepthAdvice:
    """The curve with its costs, the steps between neighbouring depths, and the advised depth
    (the smallest within ``tolerance`` of ``best_recall``)."""

    cost_per_candidate_ms: float
    tolerance: float
    points: list[DepthCost]
    steps: list[DepthStep]
    advised_depth: int
    best_recall: float

    @property
    def advised(self) -> DepthCost:
        return next(p for p in self.points if p.depth == self.advised_depth)

    def sentences(self) -> list[str]:
        """One sentence per step, shallow to deep."""
        return [step.sentence() for step in self.steps]

    def advice(self) -> str:
        """Where depth stops paying, in one sentence."""
        point = self.advised
        deepest = self.points[-1]
        if point.depth == deepest.depth:
            return (
                f"depth still pays at {point.depth}, the deepest measured: R@{point.depth} = "
                f"{point.recall:.3f} at {format_ms(point.cost_ms)} ms per query"
            )
        further = max(deepest.recall - point.recall, 0.0)
        bought = (
            "and buys nothing"
            if formatting.buys_nothing(further)
            else f"for {formatting.gain(further)}"
        )
        return (
            f"depth stops paying at {point.depth}: R@{point.depth} = {point.recall:.3f} is within "
            f"{self.tolerance:g} R of the best on the curve ({self.best_recall:.3f}) at "
            f"{format_ms(point.cost_ms)} ms per query; going to depth {deepest.depth} adds "
            f"{format_ms(deepest.cost_ms - point.cost_ms)} ms {bought}"
        )


def reranking_cost(depth: int, cost_per_candidate_ms: float, p95_ms: float = 0.0) -> float:
    """``depth * cost_per_candidate_ms + p95_ms``: the time one query spends at ``depth``."""
    return depth * cost_per_candidate_ms + p95_ms


def cost_at(
    depth: int,
    cost_per_candidate_ms: float,
    retrieval_p95_ms: Mapping[int, float] | None = None,
) -> float:
    """The time one query spends at ``depth`` (``reranking_cost``), the retrieval p95 filled
    in at that depth as the curve's are (``fill_retrieval_p95``): what the runs table shows
    beside the curve's costs, so the two never differ."""
    p95 = fill_retrieval_p95([depth], retrieval_p95_ms)[depth] if retrieval_p95_ms else 0.0
    return reranking_cost(depth, cost_per_candidate_ms, p95)


def advise_depth(
    curve: Mapping[int, float],
    *,
    cost_per_candidate_ms: float | None,
    tolerance: float = DEFAULT_TOLERANCE,
    retrieval_p95_ms: Mapping[int, float] | None = None,
) -> DepthAdvice | None:
    """The depth advice for a recall curve (depth -> macro recall) and a reranking cost per
    candidate in ms (with, optionally, the retrieval p95 in ms measured at some depths:
    ``fill_retrieval_p95`` gives it at every depth of the curve).

    None when the cost is None or 0 (nothing to trade). Raises ValueError on a negative or
    non-finite cost, a negative tolerance, an empty curve, a depth below 1, or an empty or
    negative p95."""
    if cost_per_candidate_ms is None or cost_per_candidate_ms == 0:
        return None
    if not math.isfinite(cost_per_candidate_ms) or cost_per_candidate_ms < 0:
        raise ValueError(f"the cost per candidate must be >= 0 ms, got {cost_per_candidate_ms}")
    if not math.isfinite(tolerance) or tolerance < 0:
        raise ValueError(f"the tolerance must be >= 0, got {tolerance}")
    if not curve:
        raise ValueError("the depth curve is empty")
    depths = sorted(curve)
    if depths[0] < 1:
        raise ValueError(f"depths must be >= 1, got {depths[0]}")
    p95: dict[int, float] = {}
    if retrieval_p95_ms is not None:
        if not retrieval_p95_ms:
            raise ValueError("no retrieval p95 was given (depth -> ms)")
        if any(not math.isfinite(ms) or ms < 0 for ms in retrieval_p95_ms.values()):
            raise ValueError("a retrieval p95 must be a finite number of ms >= 0")
        p95 = fill_retrieval_p95(depths, retrieval_p95_ms)
    costs = {d: reranking_cost(d, cost_per_candidate_ms, p95.get(d, 0.0)) for d in depths}
    steps = [
        DepthStep(
            from_depth=a, to_depth=b, recall_gain=curve[b] - curve[a], added_ms=costs[b] - costs[a]
        )
        for a, b in itertools.pairwise(depths)
    ]
    points = [DepthCost(depths[0], curve[depths[0]], costs[depths[0]], None)] + [
        DepthCost(s.to_depth, curve[s.to_depth], costs[s.to_depth], s.gain_per_ms) for s in steps
    ]
    best = max(curve.values())
    # The noise margin keeps a depth exactly at best - tolerance inside despite float sums.
    advised = next(d for d in depths if curve[d] >= best - tolerance - _NOISE)
    return DepthAdvice(
        cost_per_candidate_ms=cost_per_candidate_ms,
        tolerance=tolerance,
        points=points,
        steps=steps,
        advised_depth=advised,
        best_recall=best,
    )
