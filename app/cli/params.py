"""Parameter types the commands share."""

from __future__ import annotations

import math
from typing import cast

import click


class FiniteFloatRange(click.FloatRange):
    """click's FloatRange that also refuses ``nan`` and ``inf``: Python's float() reads them,
    and a NaN passes every range comparison (it is neither below nor above a bound)."""

    name = "finite float range"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        # click's stubs say float; the command line hands the text, which the base converts
        number: float = super().convert(cast(float, value), param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number
