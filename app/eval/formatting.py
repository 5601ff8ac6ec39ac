"""Numbers as people read them, one way for the pages and the terminal: measures, shares as
percentages, milliseconds, recall gains and the recall bought per second of reranking.

Owns only text: JSON answers keep their numbers and never pass through here. Pure, so the
Jinja filters (app/web/render.py) and the CLI (app/cli/output.py) call the same functions."""

from __future__ import annotations

import math

EN_DASH = "\N{EN DASH}"
#: Decimals of a recall gain: a gain that rounds to 0 here "buys nothing".
GAIN_DECIMALS = 3


def measure(value: float | None, missing: str = EN_DASH) -> str:
    """A measure in [0, 1] with four decimals ("0.7460"); ``missing`` for None (no value, not 0)."""
    return missing if value is None else f"{value:.4f}"


def share(value: float | None, missing: str = EN_DASH) -> str:
    """A share in [0, 1] as a percentage with sensible digits: one decimal below 10 % ("7.5%",
    "0.3%"), whole percents above ("42%", "100%"); "0%" only for exactly nothing, "<0.1%" for
    less than a tenth of a percent, and never "100%" for a share short of all of it."""
    if value is None:
        return missing
    percent = 100 * value
    if percent == 0:
        return "0%"
    if 0 < percent < 0.05:
        return "<0.1%"
    if percent < 9.95:
        return f"{percent:.1f}%"
    if value < 1 and round(percent) >= 100:
        return f"{min(percent, 99.9):.1f}%"
    return f"{percent:.0f}%"


def ms(value: float) -> str:
    """Milliseconds as a person reads them: 31, 465, 0.31 (no float noise such as
    31.000000000000004, no scientific notation)."""
    rounded = round(value, 2)
    return f"{rounded:.2f}".rstrip("0").rstrip(".") if rounded % 1 else f"{rounded:.0f}"


def significant(value: float, digits: int = 2) -> str:
    """``value`` with ``digits`` significant digits in plain decimals, never scientific
    notation, without trailing zeros: 0.048, 1.2, 350, 10 (not 10.0)."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def buys_nothing(gain: float) -> bool:
    """Whether a recall gain rounds to 0 at the decimals a gain is shown with."""
    return round(gain, GAIN_DECIMALS) <= 0


def gain(value: float) -> str:
    """What a recall gain buys: "+0.030 R", or "nothing" when it rounds to 0."""
    return "nothing" if buys_nothing(value) else f"+{value:.{GAIN_DECIMALS}f} R"


def rate(gain_per_ms: float | None, gain: float | None = None, missing: str = EN_DASH) -> str:
    """Recall bought per second of added time ("0.048 R per second", never "4.8e-05 R per
    ms"), from recall per millisecond; "buys nothing" when the step's ``gain`` (or the rate
    itself) rounds to 0, ``missing`` when no time was added (None)."""
    if gain is not None and buys_nothing(gain):
        return "buys nothing"
    if gain_per_ms is None:
        return missing
    if gain_per_ms <= 0:
        return "buys nothing"
    return f"{significant(1000 * gain_per_ms)} R per second"
