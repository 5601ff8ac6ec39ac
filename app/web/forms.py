"""Reading form and query fields as people fill them: an empty optional field means "none"
(or the default), a bad value becomes a message next to its field, never a silent change."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from app.eval.cluster_profile import DEFAULT_KS, DEFAULT_THRESHOLD
from app.eval.conventions import (
    DEFAULT_DEPTH,
    DEFAULT_K,
    MAX_CUTOFF,
    CutoffError,
    Gain,
    check_cutoffs,
)
from app.eval.depth_cost import DEFAULT_TOLERANCE, parse_retrieval_p95
from app.services.errors import Invalid
from app.services.imports.clusters import parse_ks

E = TypeVar("E", bound=StrEnum)
N = TypeVar("N", int, float, None)

#: How much of an offending value a message repeats.
ECHO_CHARS = 40


def _echo(raw: str) -> str:
    return raw if len(raw) <= ECHO_CHARS else raw[:ECHO_CHARS] + "…"


class Fields:
    """Parses fields one by one and collects a message per bad field (``errors``)."""

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}

    def refuse(self, name: str, message: str) -> None:
        self.errors.setdefault(name, message)

    def integer(
        self, name: str, raw: str | None, *, default: N, minimum: int, maximum: int
    ) -> int | N:
        """A whole number in ``minimum..maximum``; empty means ``default``."""
        text = (raw or "").strip()
        if not text:
            return default
        try:
            value = int(text)
        except ValueError:
            self.refuse(name, f"{name} must be a whole number, not {_echo(text)!r}")
            return default
        if not minimum <= value <= maximum:
            self.refuse(name, f"{name} must be between {minimum} and {maximum}, not {value}")
            return default
        return value

    def number(
        self,
        name: str,
        raw: str | None,
        *,
        default: N,
        minimum: float,
        below: float | None = None,
        maximum: float | None = None,
    ) -> float | N:
        """A finite number in ``minimum <= value < below`` (or ``<= maximum``); empty means
        ``default``."""
        text = (raw or "").strip()
        if not text:
            return default
        try:
            value = float(text)
        except ValueError:
            self.refuse(name, f"{name} must be a number, not {_echo(text)!r}")
            return default
        if maximum is not None:
            if not math.isfinite(value) or not minimum <= value <= maximum:
                self.refuse(name, f"{name} must be from {minimum:g} to {maximum:g}")
                return default
        elif below is not None and (not math.isfinite(value) or not minimum <= value < below):
            self.refuse(name, f"{name} must be at least {minimum:g} and below {below:g}")
            return default
        return value

    def retrieval_p95(self, name: str, raw: str | None) -> dict[int, float] | None:
        """Depth:ms pairs (``10:12,100:30``); empty means none."""
        text = (raw or "").strip()
        if not text:
            return None
        try:
            return parse_retrieval_p95(text)
        except ValueError as exc:
            self.refuse(name, f"{name}: {exc}")
            return None

    def flag(self, name: str, raw: str | None) -> bool:
        """A checkbox: absent or empty is off; ``true``, ``on`` or ``1`` is on."""
        text = (raw or "").strip().lower()
        if text in ("", "false", "off", "0"):
            return False
        if text in ("true", "on", "1"):
            return True
        self.refuse(name, f"{name} must be true or false, not {_echo(text)!r}")
        return False

    def choice(self, name: str, raw: str | None, kind: type[E], *, default: E) -> E:
        """One of an enumeration's values; empty means ``default``."""
        text = (raw or "").strip()
        if not text:
            return default
        try:
            return kind(text)
        except ValueError:
            allowed = ", ".join(m.value for m in kind)
            self.refuse(name, f"{name} must be one of {allowed}, not {_echo(text)!r}")
            return default


@dataclass
class View:
    """The golden-set page's controls: the values shown, the values entered, and a message
    for each entered value that cannot be used (the page then shows the defaults for it)."""

    k: int = DEFAULT_K
    depth: int = DEFAULT_DEPTH
    gain: Gain = Gain.EXP
    cost_ms: float | None = None
    #: The first stage's p95 measured at some depths (``10:12,100:30``), added to the cost.
    retrieval_p95: dict[int, float] | None = None
    tolerance: float = DEFAULT_TOLERANCE
    #: trec_eval -c: the judged queries without a relevant document averaged too.
    all_judged_queries: bool = False
    entered: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def read_view(
    k: str | None = None,
    depth: str | None = None,
    gain: str | None = None,
    cost_ms: str | None = None,
    tolerance: str | None = None,
    retrieval_p95: str | None = None,
    all_judged_queries: str | None = None,
) -> View:
    """Parse the controls; empty means the default (no cost for ``cost_ms``; the depth
    advisor's ``tolerance`` 0.01 R; ``all_judged_queries`` off, a checkbox)."""
    fields = Fields()
    view = View(
        k=fields.integer("k", k, default=DEFAULT_K, minimum=1, maximum=MAX_CUTOFF),
        depth=fields.integer("depth", depth, default=DEFAULT_DEPTH, minimum=1, maximum=MAX_CUTOFF),
        gain=fields.choice("gain", gain, Gain, default=Gain.EXP),
        cost_ms=fields.number("cost_ms", cost_ms, default=None, minimum=0, below=1e6),
        tolerance=fields.number(
            "tolerance", tolerance, default=DEFAULT_TOLERANCE, minimum=0, below=1
        ),
        all_judged_queries=fields.flag("all_judged_queries", all_judged_queries),
        retrieval_p95=fields.retrieval_p95("retrieval_p95", retrieval_p95),
        entered={
            name: (value or "")[:200]
            for name, value in (
                ("k", k),
                ("depth", depth),
                ("gain", gain),
                ("cost_ms", cost_ms),
                ("retrieval_p95", retrieval_p95),
                ("tolerance", tolerance),
                ("all_judged_queries", all_judged_queries),
            )
        },
        errors=fields.errors,
    )
    if "k" not in view.errors and "depth" not in view.errors:
        try:
            check_cutoffs(k=view.k, depth=view.depth)
        except CutoffError as exc:
            view.errors["k"] = str(exc)
    if view.k > view.depth:  # what is shown is always computable
        view.k, view.depth = DEFAULT_K, DEFAULT_DEPTH
    return view


def refuse_bad_view(view: View) -> None:
    """For pages whose controls are links, not fields: a bad value answers the error page
    (422) with every field's message."""
    if view.errors:
        raise Invalid(
            "; ".join(view.errors[name] for name in sorted(view.errors)),
            code="invalid_" + sorted(view.errors)[0],
        )


@dataclass
class ClusterView:
    """The clusters page's controls, as ``View``: shown values, entered values, messages."""

    ks: tuple[int, ...]
    threshold: int
    price_per_mtok: float | None = None
    queries_per_day: float | None = None
    entered: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def read_cluster_view(
    k: str | None = None,
    threshold: str | None = None,
    price_per_mtok: str | None = None,
    queries_per_day: str | None = None,
) -> ClusterView:
    """Parse the clusters page's controls; empty means the default (k 10,20,30,40,50,
    threshold 4, no price)."""
    fields = Fields()
    try:
        ks = parse_ks(k, DEFAULT_KS)
    except Invalid as exc:
        fields.refuse("k", exc.message)
        ks = DEFAULT_KS
    return ClusterView(
        ks=ks,
        threshold=fields.integer(
            "threshold", threshold, default=DEFAULT_THRESHOLD, minimum=0, maximum=MAX_CUTOFF
        ),
        price_per_mtok=fields.number(
            "price_per_mtok", price_per_mtok, default=None, minimum=0, below=1e12
        ),
        queries_per_day=fields.number(
            "queries_per_day", queries_per_day, default=None, minimum=0, below=1e12
        ),
        entered={
            name: (value or "")[:ECHO_CHARS]
            for name, value in (
                ("k", k),
                ("threshold", threshold),
                ("price_per_mtok", price_per_mtok),
                ("queries_per_day", queries_per_day),
            )
        },
        errors=fields.errors,
    )
