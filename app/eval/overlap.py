"""Which misses of a triage get more than one reviewer: a reproducible sample, stratified by
the hints' suggested cause, so every suggested cause is measured in proportion."""

from __future__ import annotations

import random
from collections.abc import Sequence


def overlap_sample(strata: Sequence[str | None], *, fraction: float, seed: int) -> list[bool]:
    """For each miss (in queue order, named by its stratum: the hints' suggested cause, or
    None) whether it is in the overlap sample.

    Within each stratum, ``round(fraction * n)`` misses (halves rounded up) are drawn without
    replacement by a generator seeded with ``seed`` and the stratum's name, so the same
    misses, seed and fraction always give the same sample, and one stratum's draw does not
    depend on the others'. ``fraction`` 1 takes every miss, 0 none.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"the overlap fraction must be between 0 and 1, not {fraction}")
    chosen = [False] * len(strata)
    if fraction == 0.0:
        return chosen
    members: dict[str | None, list[int]] = {}
    for index, stratum in enumerate(strata):
        members.setdefault(stratum, []).append(index)
    for stratum, indexes in members.items():
        take = min(len(indexes), int(fraction * len(indexes) + 0.5))
        # a string seed is hashed with SHA-512 by random.seed: stable across processes
        draw = random.Random(f"{seed}:{stratum}").sample(indexes, take)
        for index in draw:
            chosen[index] = True
    return chosen
