"""The calibration table's arithmetic (app/eval/calibration.py): bands, the stratified
sample, Wilson intervals (checked against statsmodels and a textbook value), and the
precision and recall estimates at a threshold, on worked examples."""

from __future__ import annotations

import math

import pytest
from statsmodels.stats.proportion import proportion_confint

from app.eval import calibration as cal


def test_bands_run_from_low_to_one_with_copies_apart() -> None:
    table = cal.bands(0.6)
    assert [b.low for b in table] == [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0]
    assert table[-1].label() == "1.00"
    assert table[0].label() == "0.60\u20130.65"
    assert cal.band_of(0.6, table) == 0
    assert cal.band_of(0.8, table) == 4  # 0.6 + 4 * 0.05 is 0.8, not 0.80000001
    assert cal.band_of(0.9999, table) == 7
    assert cal.band_of(1.0, table) == 8
    with pytest.raises(ValueError, match="lowest"):
        cal.bands(0.0)


def test_the_sample_is_stratified_stable_and_interleaved() -> None:
    pairs = [(f"a{i}", f"b{i}", i % 3) for i in range(30)]
    first = cal.sample(pairs, per_band=4, seed=5)
    assert first == cal.sample(list(reversed(pairs)), per_band=4, seed=5)
    assert len(first) == 12
    by_band = {
        band: sum(1 for a, b, x in pairs if x == band and (a, b) in first) for band in range(3)
    }
    assert by_band == {0: 4, 1: 4, 2: 4}
    order = sorted(first, key=first.__getitem__)
    bands_in_order = [next(x for a, b, x in pairs if (a, b) == p) for p in order]
    assert bands_in_order[:3] == [2, 1, 0]  # one of each band first, highest first
    assert cal.sample(pairs, per_band=4, seed=6) != first


@pytest.mark.parametrize(("same", "n"), [(0, 1), (1, 1), (8, 10), (19, 20), (3, 7), (50, 50)])
def test_wilson_is_statsmodels(same: int, n: int) -> None:
    lo, hi = proportion_confint(same, n, alpha=0.05, method="wilson")
    share = cal.wilson(same, n)
    assert [share.low, share.high] == pytest.approx([lo, hi])
    assert list(cal.wilson_at(same / n, n)) == pytest.approx([lo, hi])


def test_wilson_textbook_value() -> None:
    # 8 of 10: Wilson 95% interval [0.490, 0.943] (Brown, Cai and DasGupta's worked numbers)
    share = cal.wilson(8, 10)
    assert (round(share.low, 3), round(share.high, 3)) == (0.490, 0.943)
    assert cal.wilson(0, 0).value is None


def _rows(spec: list[tuple[int, int, int]]) -> list[cal.BandRow]:
    """(pairs, reviewed, same) per band of bands(0.8): 0.80, 0.85, 0.90, 0.95, 1.00."""
    table = cal.bands(0.8)
    return [
        cal.BandRow(band=b, pairs=p, sampled=r, reviewed=r, same=s)
        for b, (p, r, s) in zip(table, spec, strict=True)
    ]


def test_precision_is_the_stratified_estimate() -> None:
    rows = _rows([(100, 10, 5), (50, 10, 8), (0, 0, 0), (0, 0, 0), (50, 10, 10)])
    at_08 = cal.precision_at(rows, 0.8)
    assert at_08.value is not None
    assert at_08.value == pytest.approx((100 * 0.5 + 50 * 0.8 + 50 * 1.0) / 200)
    n_eff = 1 / ((0.5**2) / 10 + (0.25**2) / 10 + (0.25**2) / 10)
    assert [at_08.low, at_08.high] == pytest.approx(list(cal.wilson_at(at_08.value, n_eff)))
    assert at_08.reviewed == 30
    at_085 = cal.precision_at(rows, 0.85)
    assert at_085.value == pytest.approx((50 * 0.8 + 50 * 1.0) / 100)


def test_a_band_without_review_leaves_precision_unestimated() -> None:
    rows = _rows([(100, 0, 0), (50, 10, 8), (0, 0, 0), (0, 0, 0), (50, 10, 10)])
    at_08 = cal.precision_at(rows, 0.8)
    assert at_08.value is None
    assert at_08.missing == ("0.80\u20130.85",)
    # the interval: the unreviewed band at 0 and 1
    s1, s4 = cal.wilson(8, 10), cal.wilson(10, 10)
    assert at_08.low == pytest.approx((50 * s1.low + 50 * s4.low) / 200)
    assert at_08.high == pytest.approx((100 + 50 * s1.high + 50 * s4.high) / 200)


def test_recall_counts_the_same_pairs_above_the_threshold_times_candidate_recall() -> None:
    rows = _rows([(100, 10, 5), (50, 10, 8), (0, 0, 0), (0, 0, 0), (50, 10, 10)])
    candidate = cal.Share(0.9, 0.8, 0.95)
    at_085 = cal.recall_at(rows, 0.85, candidate)
    same_all = 100 * 0.5 + 50 * 0.8 + 50 * 1.0
    assert at_085.value == pytest.approx(0.9 * (50 * 0.8 + 50 * 1.0) / same_all)
    assert at_085.value is not None
    assert at_085.low <= at_085.value <= at_085.high
    assert cal.recall_at(rows, 0.8, None).value == pytest.approx(1.0)


def test_candidate_recall() -> None:
    share = cal.candidate_recall({("a", "b"), ("c", "d")}, [("a", "b"), ("c", "d"), ("e", "f")])
    assert share.value == pytest.approx(2 / 3)
    assert math.isclose(share.low, cal.wilson(2, 3).low)


def test_the_detector_refuses_thresholds_that_make_every_pair_a_candidate() -> None:
    from app.eval.dedup import DedupParams

    for threshold, near in ((0.3, 0.0), (0.6, 0.4), (0.8, -0.1)):
        with pytest.raises(ValueError, match=r"threshold|near"):
            DedupParams(threshold=threshold, near=near).resolved()
    assert DedupParams(threshold=0.5, near=0.2).resolved().shape() == (42, 3)
