"""Server-rendered SVG charts: geometry here, markup (escaped) in the templates."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

PALETTE = ["#1f5fbf", "#d9480f", "#2b8a3e", "#862e9c", "#e67700", "#0b7285", "#c2255c"]


@dataclass
class Point:
    x: float
    y: float
    label: str


@dataclass
class Series:
    name: str
    color: str
    points: list[Point]

    @property
    def path(self) -> str:
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in self.points)


@dataclass
class Tick:
    position: float
    label: str
    #: A second line under the label (the reranking cost at a depth), empty for none.
    note: str = ""


@dataclass
class LineChart:
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    series: list[Series]
    x_ticks: list[Tick] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)


def depth_curve_chart(
    curves: dict[str, dict[int, float]],
    *,
    width: int = 680,
    height: int = 320,
    costs: dict[int, str] | None = None,
) -> LineChart:
    """Recall against depth, log x axis; one line per run. The y axis starts at the lowest
    value rounded down to a tenth, so that close curves stay apart. ``costs`` (depth -> the
    reranking cost, written) puts the cost under each depth's tick, on a taller chart."""
    if costs:
        height += 16
    # Room for the cost under the last tick ("3100 ms" is wider than "1000").
    left, right, top, bottom = 56, width - (32 if costs else 16), 16, height - (56 if costs else 40)
    depths = sorted({d for curve in curves.values() for d in curve})
    values = [v for curve in curves.values() for v in curve.values()]
    if not depths or not values:
        return LineChart(width, height, left, right, top, bottom, [])
    low_x, high_x = math.log10(depths[0]), math.log10(depths[-1])
    low_y = min(math.floor(min(values) * 10) / 10, 0.9)

    def x(depth: int) -> float:
        span = (high_x - low_x) or 1.0
        return left + (math.log10(depth) - low_x) / span * (right - left)

    def y(value: float) -> float:
        return bottom - (value - low_y) / (1.0 - low_y) * (bottom - top)

    series = [
        Series(
            name=name,
            color=PALETTE[i % len(PALETTE)],
            points=[
                Point(x(d), y(v), f"{name}: R@{d} = {v:.4f}") for d, v in sorted(curve.items())
            ],
        )
        for i, (name, curve) in enumerate(curves.items())
    ]
    steps = round((1.0 - low_y) * 10)
    y_ticks = [Tick(y(low_y + i / 10), f"{low_y + i / 10:.1f}") for i in range(steps + 1)]
    return LineChart(
        width,
        height,
        left,
        right,
        top,
        bottom,
        series,
        x_ticks=[Tick(x(d), str(d), (costs or {}).get(d, "")) for d in depths],
        y_ticks=y_ticks,
    )
