"""``clusters_at_thresholds`` (one union-find pass, the calibration table's per-threshold
counts) equals clustering the pairs at or above each threshold separately
(``clusters_of_pairs``), on random pair sets."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.eval.dedup import clusters_at_thresholds, clusters_of_pairs

DOCS = [f"d{i}" for i in range(12)]
PAIRS = st.lists(
    st.tuples(
        st.sampled_from(DOCS), st.sampled_from(DOCS), st.sampled_from([0.3, 0.5, 0.55, 0.8, 1.0])
    ).filter(lambda p: p[0] < p[1]),
    max_size=40,
    unique_by=lambda p: (p[0], p[1]),
)


@settings(max_examples=200, deadline=None)
@given(PAIRS)
def test_one_pass_equals_clustering_at_each_threshold(pairs: list[tuple[str, str, float]]) -> None:
    thresholds = [0.3, 0.5, 0.55, 0.6, 0.8, 0.95, 1.0]
    counted = clusters_at_thresholds(pairs, thresholds)
    assert [c.threshold for c in counted] == thresholds
    for at in counted:
        kept = [(a, b) for a, b, s in pairs if s >= at.threshold]
        clusters = clusters_of_pairs(kept)
        assert at.pairs == len(kept)
        assert at.clusters == len(clusters)
        assert at.clustered_documents == sum(len(m) for m in clusters.values())


def test_no_pairs() -> None:
    assert [(c.pairs, c.clusters) for c in clusters_at_thresholds([], [0.5, 0.8])] == [
        (0, 0),
        (0, 0),
    ]
