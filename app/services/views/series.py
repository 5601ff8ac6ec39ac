"""A series' history: each run of one configuration with its measures at (k, depth) and its
misses by cause (from the run's latest triage at that depth), oldest first. The series page,
``GET /api/v1/golden-sets/{id}/series/{name}`` and the demo read this one function."""

from __future__ import annotations

from sqlmodel import Session, col, select

from app.eval import Gain
from app.eval.conventions import DEFAULT_DEPTH, DEFAULT_K
from app.models import GoldenSet, Triage
from app.models.runs import RunPublic
from app.readmodel import ReadModel
from app.services.imports.runs import evaluate_stored_run
from app.services.imports.series import series_runs
from app.services.queue.lifecycle import Stage
from app.services.triage.closure import tally_of


class SeriesTriage(ReadModel):
    """A run's latest triage at the series' depth, as its tally stands now."""

    id: int
    depth: int
    k: int
    misses: int
    #: misses per named cause (labelled here or carried), the golden set's causes in
    #: taxonomy order
    counts: dict[str, int]
    other: int
    unlabelled: int
    covered: int
    #: of ``counts``, the labels carried from the series' earlier triage
    carried: int = 0
    closes: bool


class SeriesPoint(ReadModel):
    """One run of the series."""

    run: RunPublic
    #: ``R@k``, ``R@depth`` and ``nDCG@k`` (macro)
    measures: dict[str, float]
    misses: int
    queries: int
    #: null when the run has no triage at this depth yet
    triage: SeriesTriage | None


class SeriesHistory(ReadModel):
    golden_set_id: int
    series: str
    k: int
    depth: int
    #: the golden set's named causes, in order (the columns of the misses by cause)
    causes: list[str]
    runs: list[SeriesPoint]


def series_history(
    *,
    session: Session,
    golden: GoldenSet,
    series: str,
    k: int = DEFAULT_K,
    depth: int = DEFAULT_DEPTH,
    gain: Gain = Gain.EXP,
) -> SeriesHistory:
    """The runs of ``series`` oldest first, each measured at (k, depth) from its stored ranks
    (the same numbers as its run page) with its latest triage at ``depth``; 404
    ``series_not_found`` for a series without runs."""
    assert golden.id is not None
    runs = series_runs(session=session, golden=golden, series=series)
    causes = list(golden.causes)
    latest = _latest_triages(session, [r.id for r in runs if r.id is not None], depth)
    points = []
    for run in runs:
        evaluation = evaluate_stored_run(
            session=session, run=run, golden=golden, k=k, depth=depth, gain=gain
        )
        names = (f"R@{k}", f"R@{depth}", f"nDCG@{k}")
        triage = latest.get(run.id or 0)
        points.append(
            SeriesPoint(
                run=RunPublic.of(run),
                measures={name: evaluation.measures[name] for name in names},
                misses=evaluation.misses,
                queries=len(evaluation.queries),
                triage=None if triage is None else _triage_point(session, triage, causes),
            )
        )
    return SeriesHistory(
        golden_set_id=golden.id, series=series, k=k, depth=depth, causes=causes, runs=points
    )


def _latest_triages(session: Session, run_ids: list[int], depth: int) -> dict[int, Triage]:
    rows = session.exec(
        select(Triage)
        .where(col(Triage.run_id).in_(run_ids), Triage.depth == depth)
        .order_by(col(Triage.id))
    ).all()
    return {t.run_id: t for t in rows}  # the last one wins: the latest


def _triage_point(session: Session, triage: Triage, causes: list[str]) -> SeriesTriage:
    assert triage.id is not None
    tally = tally_of(session=session, triage=triage, causes=causes)
    return SeriesTriage(
        id=triage.id,
        depth=triage.depth,
        k=triage.k,
        misses=tally.misses,
        counts=dict(tally.causes),
        other=tally.stages[Stage.OTHER],
        unlabelled=tally.unlabelled,
        covered=tally.stages[Stage.COVERED],
        carried=tally.stages[Stage.CARRIED],
        closes=tally.closes,
    )
