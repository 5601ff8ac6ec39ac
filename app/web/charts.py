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


def _nice_step(span: float) -> float:
    """A round tick step giving about five ticks over ``span``."""
    raw = span / 5 if span > 0 else 1.0
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return float(next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw))


def clusters_chart(
    curves: dict[str, dict[int, float]],
    *,
    width: int = 680,
    height: int = 320,
    notes: dict[int, str] | None = None,
) -> LineChart:
    """Distinct clusters against k, linear axes from 0; one line per curve (the mean, the
    median, p10 and p90). ``notes`` (k -> the prompt tokens, written) goes under each tick."""
    if notes:
        height += 16
    left, right, top, bottom = 56, width - 32, 16, height - (56 if notes else 40)
    ks = sorted({k for curve in curves.values() for k in curve})
    values = [v for curve in curves.values() for v in curve.values()]
    if not ks or not values:
        return LineChart(width, height, left, right, top, bottom, [])
    step = _nice_step(max(values))
    high_y = max(step, math.ceil(max(values) / step) * step)
    low_x, high_x = ks[0], ks[-1]

    def x(k: int) -> float:
        span = (high_x - low_x) or 1
        return left + (k - low_x) / span * (right - left)

    def y(value: float) -> float:
        return bottom - value / high_y * (bottom - top)

    series = [
        Series(
            name=name,
            color=PALETTE[i % len(PALETTE)],
            points=[
                Point(x(k), y(v), f"{name} at k={k}: {v:.2f}") for k, v in sorted(curve.items())
            ],
        )
        for i, (name, curve) in enumerate(curves.items())
    ]
    ticks = round(high_y / step)
    return LineChart(
        width,
        height,
        left,
        right,
        top,
        bottom,
        series,
        x_ticks=[Tick(x(k), str(k), (notes or {}).get(k, "")) for k in ks],
        y_ticks=[Tick(y(i * step), f"{i * step:g}") for i in range(ticks + 1)],
    )


def series_chart(
    lines: dict[str, list[tuple[str, float]]], *, width: int = 680, height: int = 300
) -> LineChart:
    """Measures over a series' runs, oldest on the left: one line per measure, one point per
    run (``(run label, value)``, the label under its tick). The y axis starts at the lowest
    value rounded down to a tenth, as the depth curve's."""
    left, right, top, bottom = 56, width - 48, 16, height - 48
    count = max((len(points) for points in lines.values()), default=0)
    values = [v for points in lines.values() for _, v in points]
    if not count or not values:
        return LineChart(width, height, left, right, top, bottom, [])
    low_y = min(math.floor(min(values) * 10) / 10, 0.9)

    def x(index: int) -> float:
        if count == 1:
            return (left + right) / 2
        return left + index / (count - 1) * (right - left)

    def y(value: float) -> float:
        return bottom - (value - low_y) / (1.0 - low_y) * (bottom - top)

    series = [
        Series(
            name=name,
            color=PALETTE[i % len(PALETTE)],
            points=[
                Point(x(j), y(v), f"{label}: {name} = {v:.4f}")
                for j, (label, v) in enumerate(points)
            ],
        )
        for i, (name, points) in enumerate(lines.items())
    ]
    labels = next(iter(lines.values()))
    steps = round((1.0 - low_y) * 10)
    return LineChart(
        width,
        height,
        left,
        right,
        top,
        bottom,
        series,
        x_ticks=[Tick(x(j), label) for j, (label, _) in enumerate(labels)],
        y_ticks=[Tick(y(low_y + i / 10), f"{low_y + i / 10:.1f}") for i in range(steps + 1)],
    )
