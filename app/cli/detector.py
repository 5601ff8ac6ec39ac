"""``misstriage detector``: a golden set's detector runs in the store, from the shell (the
same use cases as ``/api/v1/.../detector-runs``): find duplicates, show the calibration
table, apply a threshold, import ids made elsewhere. Reviewers judge the sample in the
browser or through the API."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.cli.params import FiniteFloatRange
from app.cli.service import ROW_ID, _emit, _golden_by_ref, database, output_option

if TYPE_CHECKING:
    from app.models.dedup_public import DetectorRunPublic


def _interval(value: float | None, ci: list[float]) -> str:
    shown = "–" if value is None else f"{value:.2f}"  # noqa: RUF001
    return f"{shown} [{ci[0]:.2f}, {ci[1]:.2f}]"


def table(run: DetectorRunPublic) -> str:
    """The calibration table as text: per band, then per threshold."""
    lines = [f"detector run {run.id} ({run.state}): {run.sentence}"]
    if run.source == "imported":
        lines.append(
            f"{run.clusters or 0:,} clusters over {run.clustered_documents or 0:,} documents, "
            "as imported"
        )
        return "\n".join(lines)
    c = run.candidate_recall
    if c is not None:
        lines.append(
            f"{run.pairs:,} pairs at J >= {run.low:.2f} over {run.documents:,} documents in "
            f"{run.seconds:.1f} s; candidate search recall {_interval(c.value, c.ci)} "
            f"({c.how}, {c.pairs:,} pairs)"
        )
    lines.append(f"sample: {run.reviewed} of {run.sampled} pairs reviewed")
    lines.append("")
    lines.append(
        f"{'band':<11} {'pairs':>7} {'sampled':>8} {'reviewed':>9} {'same':>5}  share [95%]"
    )
    for b in run.bands:
        lines.append(
            f"{b.label:<11} {b.pairs:>7,} {b.sampled:>8} {b.reviewed:>9} {b.same:>5}  "
            f"{_interval(b.share.value, b.share.ci)}"
        )
    lines.append("")
    lines.append(f"{'J >=':<6} {'pairs':>7} {'clusters':>9}  {'precision [95%]':<20} recall [95%]")
    for t in run.thresholds:
        lines.append(
            f"{t.threshold:<6.2f} {t.pairs:>7,} {t.clusters:>9,}  "
            f"{_interval(t.precision.value, t.precision.ci):<20} "
            f"{_interval(t.recall.value, t.recall.ci)}"
        )
    return "\n".join(lines)


@click.group("detector")
def detector() -> None:
    """A golden set's near-duplicate detector runs: find, calibrate, apply, import ids."""


@detector.command("detect")
@click.option("--golden-set", "golden_ref", required=True, help="Golden set id or name.")
@click.option("--threshold", default=0.8, show_default=True, type=FiniteFloatRange(0.5, 1.0))
@click.option(
    "--per-band",
    default=20,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Pairs of each similarity band sampled for review.",
)
@output_option
def detect(golden_ref: str, threshold: float, per_band: int, output: str) -> None:
    """Find the corpus's near-duplicates: every verified pair down to J - 0.2, a sample of
    each band on the pair-review queue. Nothing is applied yet."""
    from app.services.dedup import detector_runs as service

    with database() as session:
        golden = _golden_by_ref(session, golden_ref)
        run = service.detect_duplicates(
            session=session, golden=golden, user=None, threshold=threshold, per_band=per_band
        )
        shown = service.public(session=session, run=run)
    _emit(shown.model_dump(mode="json"), output, table(shown))


@detector.command("show")
@click.argument("detector_run_id", type=ROW_ID)
@output_option
def show(detector_run_id: int, output: str) -> None:
    """The calibration table of a detector run."""
    from app.services.dedup import detector_runs as service

    with database() as session:
        run = service.get_detector_run(session=session, detector_run_id=detector_run_id)
        shown = service.public(session=session, run=run)
    _emit(shown.model_dump(mode="json"), output, table(shown))


@detector.command("apply")
@click.argument("detector_run_id", type=ROW_ID)
@click.option("--threshold", required=True, type=FiniteFloatRange(0.0, 1.0))
@output_option
def apply(detector_run_id: int, threshold: float, output: str) -> None:
    """Make the run's clusters at the threshold the corpus's cluster ids (earlier runs kept);
    the golden set's runs are measured again with them."""
    from app.clock import utcnow
    from app.services.dedup import detector_runs as service

    with database() as session:
        run = service.get_detector_run(session=session, detector_run_id=detector_run_id)
        applied = service.apply_threshold(
            session=session, run=run, threshold=threshold, user=None, now=utcnow()
        )
        shown = service.public(session=session, run=applied)
    _emit(shown.model_dump(mode="json"), output, shown.sentence)


@detector.command("import-ids")
@click.option("--golden-set", "golden_ref", required=True, help="Golden set id or name.")
@click.argument("ids", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@output_option
def import_ids(golden_ref: str, ids: Path, output: str) -> None:
    """Import a side file of cluster ids (doc_id,cluster_id: CSV, TSV, JSONL or Parquet) as
    a detector run, applied at once (not calibrated)."""
    from app.clock import utcnow
    from app.services.dedup import detector_runs as service
    from app.services.dedup.side_files import read_side_file

    with database() as session:
        golden = _golden_by_ref(session, golden_ref)
        run = service.import_cluster_ids(
            session=session,
            golden=golden,
            cluster_of=read_side_file(ids, ids.name),
            file_name=ids.name,
            user=None,
            now=utcnow(),
        )
        shown = service.public(session=session, run=run)
    _emit(shown.model_dump(mode="json"), output, table(shown))
