"""The overlap sample: reproducible, stratified by the hints' suggestion, exact at 0 and 1."""

from __future__ import annotations

import pytest

from app.eval.overlap import overlap_sample

STRATA = ["not-indexed"] * 10 + ["vocabulary-mismatch"] * 5 + [None] * 4 + ["chunk-boundary"]


def _per_stratum(chosen: list[bool]) -> dict[str | None, int]:
    counts: dict[str | None, int] = {}
    for stratum, taken in zip(STRATA, chosen, strict=True):
        counts[stratum] = counts.get(stratum, 0) + taken
    return counts


def test_each_stratum_gets_its_share_halves_rounded_up() -> None:
    chosen = overlap_sample(STRATA, fraction=0.5, seed=3)
    assert _per_stratum(chosen) == {
        "not-indexed": 5,
        "vocabulary-mismatch": 3,  # 2.5 rounds up
        None: 2,
        "chunk-boundary": 1,  # 0.5 rounds up: a lone stratum is still measured
    }


def test_the_same_seed_gives_the_same_sample_and_another_seed_another() -> None:
    first = overlap_sample(STRATA, fraction=0.4, seed=11)
    assert overlap_sample(STRATA, fraction=0.4, seed=11) == first
    others = {tuple(overlap_sample(STRATA, fraction=0.4, seed=s)) for s in range(12, 20)}
    assert len(others - {tuple(first)}) >= 1
    # One stratum's draw does not depend on the others: dropping a stratum keeps the rest.
    kept = [i for i, s in enumerate(STRATA) if s != "chunk-boundary"]
    alone = overlap_sample([STRATA[i] for i in kept], fraction=0.4, seed=11)
    assert alone == [first[i] for i in kept]


def test_all_or_nothing_and_bad_fractions() -> None:
    assert overlap_sample(STRATA, fraction=1.0, seed=0) == [True] * len(STRATA)
    assert overlap_sample(STRATA, fraction=0.0, seed=0) == [False] * len(STRATA)
    assert overlap_sample([], fraction=0.5, seed=0) == []
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="between 0 and 1"):
            overlap_sample(STRATA, fraction=bad, seed=0)
