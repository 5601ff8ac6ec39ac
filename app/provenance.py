"""Where a figure's inputs come from: the detector run behind every cluster figure
(DESIGN.md, Duplicates). A light module (pydantic only), so the CLI and the metrics reports
can carry it without loading the tables."""

from __future__ import annotations

from app.readmodel import ReadModel


class Interval(ReadModel):
    """A proportion and its 95% interval; ``value`` None when it cannot be estimated yet."""

    value: float | None
    ci: list[float]


class DetectorRunRef(ReadModel):
    """The detector run a cluster figure rests on (API.md): every cluster figure carries it."""

    #: None for cluster ids read from a file (the CLI): as given, not calibrated
    id: int | None
    #: "detector" (found and calibrated here) or "imported" (made elsewhere, not calibrated)
    source: str
    threshold: float | None
    precision: Interval | None
    recall: Interval | None
    #: "clusters from detector run 2 (J >= 0.70): precision 0.98 [0.95, 0.99], recall 0.96"
    sentence: str


def of_file(name: str) -> DetectorRunRef:
    """What cluster figures computed from a corpus file rest on: its ids, as given (a stored
    golden set's figures name their detector run and its error rates instead)."""
    return DetectorRunRef(
        id=None,
        source="imported",
        threshold=None,
        precision=None,
        recall=None,
        sentence=f"clusters from the cluster_id of {name} (as given): not calibrated; "
        "misstriage dedup finds them, and a detector run in the app measures their error rates",
    )
