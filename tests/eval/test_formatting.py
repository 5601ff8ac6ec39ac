"""One formatter for numbers and shares: the pages and the terminal say the same thing."""

from __future__ import annotations

import pytest

from app.cli.output import render_depth_cost
from app.eval import formatting
from app.eval.depth_cost import advise_depth
from app.web.render import templates


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "\N{EN DASH}"),
        (0.0, "0%"),
        (0.0004, "<0.1%"),
        (0.003, "0.3%"),
        (0.0746, "7.5%"),
        (0.0996, "10%"),
        (0.42, "42%"),
        (0.9996, "99.9%"),
        (1.0, "100%"),
    ],
)
def test_share(value: float | None, shown: str) -> None:
    assert formatting.share(value) == shown


def test_rate_per_second_never_scientific() -> None:
    assert formatting.rate(4.8e-05) == "0.048 R per second"
    assert formatting.rate(0.0012) == "1.2 R per second"
    assert formatting.rate(3.0e-09) == "0.000003 R per second"
    assert formatting.rate(0.0) == "buys nothing"
    assert formatting.rate(1e-7, gain=0.0004) == "buys nothing"  # the gain rounds to 0
    assert formatting.rate(None) == "\N{EN DASH}"
    assert "e-" not in formatting.rate(1.234e-06)


def test_gain_and_ms() -> None:
    assert formatting.gain(0.0304) == "+0.030 R"
    assert formatting.gain(0.0004) == "nothing"
    assert formatting.gain(0.0) == "nothing"
    assert formatting.ms(31.000000000000004) == "31"
    assert formatting.ms(24.8) == "24.8"
    assert formatting.ms(0.31) == "0.31"
    assert formatting.ms(2_500_000) == "2500000"  # never 2.5e+06
    assert formatting.measure(0.74604) == "0.7460"
    assert formatting.measure(None, missing="-") == "-"


def test_the_pages_use_the_same_filters() -> None:
    env = templates.env
    assert env.filters["share"] is formatting.share
    assert env.filters["measure"] is formatting.measure
    assert env.from_string("{{ 0.0746|share }}").render() == "7.5%"


def test_the_advisor_in_words() -> None:
    """A curve that flattens: no "+0.000 R" and no "4.8e-05" anywhere."""
    curve = {10: 0.5, 20: 0.5, 1000: 0.5002}
    advice = advise_depth(curve, cost_per_candidate_ms=3.0)
    assert advice is not None
    assert advice.sentences() == [
        "depth 20 buys nothing for +30 ms per query",
        "depth 1000 buys nothing for +2940 ms per query",
    ]
    assert advice.advice().endswith("going to depth 1000 adds 2970 ms and buys nothing")
    text = render_depth_cost({"bm25": advice})
    assert "+0.000 R" not in text
    assert "e-0" not in text
    assert "recall per added second" in text
    steep = advise_depth({10: 0.2, 20: 0.3}, cost_per_candidate_ms=1.0)
    assert steep is not None
    assert "10 R per second" in render_depth_cost({"dense": steep})
