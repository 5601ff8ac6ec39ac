"""Detector runs of a golden set: detect over the stored corpus, the calibration table, apply
a threshold, import ids made elsewhere (app/models/dedup.py says what each is).

Applying writes the run's clusters as a clustering nobody reads yet and makes it the golden
set's in one short transaction (app/services/imports/clusterings.py), then measures every run
of the golden set with them again (``measure_again``, a run at a time): a judged run from its
stored rankings (the kept head and the judged documents), exact up to its ``keep_depth``; a
run that keeps no rankings of some query (a log run, a judged run's queries outside the
golden set) stays on the clustering it was measured with, and names it. A triage keeps
the detector run whose clusters decided its covered misses: no label moves.

Writes to a golden set's clusters (an apply, an import of cluster ids) take the golden set's
row first (app/services/locks.py) for the switch and read the detector run again under it:
two at once make their clusterings live one after the other, and every apply answered is in
the run's ``applications``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime
from typing import Any

import polars as pl
from sqlalchemy import delete
from sqlmodel import Session, col, select

from app.db import end_reading, writing
from app.eval import calibration as cal
from app.eval.cluster_profile import ClusterCorpus, trace_ranking
from app.eval.cluster_ranks import judged_cluster_ranks
from app.eval.dedup import (
    MIN_LOW,
    MIN_THRESHOLD,
    DedupParams,
    DedupResult,
    SimilarPair,
    clusters_at_thresholds,
    clusters_of_pairs,
    detect,
)
from app.eval.errors import printable_name
from app.models import (
    JUDGED,
    DetectorRun,
    DetectorSource,
    DocPair,
    Document,
    GoldenSet,
    JobPublic,
    Run,
    RunClusterQuery,
    RunClusterTotals,
    RunJudged,
    RunJudgedCluster,
    User,
)
from app.models.dedup_public import (
    ApplicationPublic,
    BandPublic,
    CandidateRecall,
    DetectorRunPublic,
    DetectorRunRef,
    EstimatePublic,
    Interval,
    ThresholdPublic,
    sentence,
)
from app.services import locks
from app.services.errors import Conflict, Invalid, NotFound
from app.services.imports.bulk import bulk_insert
from app.services.imports.clusterings import (
    cluster_frame,
    drop_clustering,
    make_live,
    write_clustering,
)
from app.services.imports.detector_refs import band_rows, estimates, live_ref
from app.services.jobs import MEASURING, Progress, create_job
from app.services.jobs import public as public_job

#: Documents compared pair by pair for the candidate search's recall; a larger corpus is
#: measured on a sample of this many documents (the pairs among them).
EXACT_LIMIT = 20_000
#: The most documents one detection reads, inside one request (its texts are held while the
#: detector and the exact join run: 100,000 chunks of 200 words take about 13 s and 0.4 GB).
#: A larger corpus: ``misstriage dedup`` on the files, or a cluster tool, then import its ids.
MAX_DOCUMENTS = 300_000


def get_detector_run(*, session: Session, detector_run_id: int) -> DetectorRun:
    run = session.get(DetectorRun, detector_run_id)
    if run is None:
        raise NotFound(f"no detector run {detector_run_id}", code="detector_run_not_found")
    return run


def list_detector_runs(*, session: Session, golden: GoldenSet) -> list[DetectorRun]:
    return list(
        session.exec(
            select(DetectorRun)
            .where(DetectorRun.golden_set_id == golden.id)
            .order_by(col(DetectorRun.id).desc())
        )
    )


def _texts(session: Session, golden: GoldenSet) -> Iterable[tuple[str, str]]:
    rows = session.exec(
        select(Document.doc_id, Document.text)
        .where(Document.golden_set_id == golden.id)
        .order_by(col(Document.id))
        .execution_options(yield_per=5000)
    )
    yield from rows


def check_detection(
    *, golden: GoldenSet, threshold: float, near: float, per_band: int, seed: int
) -> None:
    """What a detection refuses before it starts (inline or as a job)."""
    if golden.documents == 0:
        raise Conflict(
            f"golden set {golden.name!r} has no corpus: import one with its judgments to "
            "find duplicates (or import cluster ids made elsewhere)",
            code="no_corpus",
        )
    if golden.documents > MAX_DOCUMENTS:
        raise Conflict(
            f"{golden.documents:,} documents is more than one detection reads here "
            f"({MAX_DOCUMENTS:,}): run `misstriage dedup` on the files, or a cluster tool, "
            "and import its ids",
            code="corpus_too_large",
        )
    if not MIN_THRESHOLD <= threshold <= 1.0:
        raise Invalid(
            f"the threshold must be from {MIN_THRESHOLD} to 1 (below, nearly every pair of a "
            "corpus shares some words)",
            code="invalid_threshold",
        )
    if not 0.0 <= near <= threshold - MIN_LOW + 1e-9:
        raise Invalid(
            f"near must be from 0 to {threshold - MIN_LOW:.2f}: pairs are kept down to "
            f"threshold - near, at least {MIN_LOW}",
            code="invalid_near",
        )
    if not 1 <= per_band <= 1000:
        raise Invalid("per_band must be from 1 to 1000", code="invalid_per_band")


def detect_duplicates(
    *,
    session: Session,
    golden: GoldenSet,
    user: User | None,
    threshold: float = 0.8,
    near: float = 0.2,
    per_band: int = cal.PER_BAND,
    seed: int = 1,
    progress: Progress | None = None,
) -> DetectorRun:
    """Run the detector over the golden set's stored corpus: keep every verified pair down
    to ``threshold - near``, sample ``per_band`` of each band for review, measure the
    candidate search's recall against the exact similarity. Nothing is applied yet. Run as
    a job (app/services/background.py), it says its ``progress`` (the documents read, then
    its steps) and stops at the next step once a cancel was asked; its rows are written in
    one transaction at its end, so a detection that did not finish left nothing."""
    check_detection(golden=golden, threshold=threshold, near=near, per_band=per_band, seed=seed)
    params = DedupParams(threshold=threshold, near=near, seed=seed)
    start = time.perf_counter()
    progress = progress or Progress()
    progress.start("reading the corpus", golden.documents)
    documents: list[tuple[str, str]] = []
    for row in _texts(session, golden):
        documents.append(row)
        if len(documents) % 5000 == 0:
            progress.advance(5000)
    progress.done = len(documents)
    end_reading(session)  # no transaction held open through the search
    progress.start("finding the near-duplicates", len(documents))
    result, low, kept, banded, sampled, candidate = detection(documents, params, per_band=per_band)
    progress.start("writing the pairs", len(kept))
    seconds = time.perf_counter() - start
    parameters: dict[str, Any] = dict(result.stats.parameters)
    parameters |= {"low": low, "per_band": per_band, "band_width": cal.BAND_WIDTH}
    run = DetectorRun(
        golden_set_id=golden.id,  # type: ignore[arg-type]
        source=DetectorSource.DETECTOR.value,
        parameters=parameters,
        low=low,
        documents=len(documents),
        pairs=len(kept),
        candidate_recall=candidate,
        seconds=round(seconds, 3),
        created_by_id=user.id if user else None,
    )
    with writing(session):
        session.add(run)
        session.flush()
        bulk_insert(
            session,
            DocPair,
            pl.DataFrame(
                {
                    "detector_run_id": [run.id] * len(kept),
                    "doc_a": [p.doc_a for p in kept],
                    "doc_b": [p.doc_b for p in kept],
                    "similarity": [round(p.similarity, 6) for p in kept],
                    "band": [b for _, _, b in banded],
                    "sampled": [(a, b) in sampled for a, b, _ in banded],
                    "position": [sampled.get((a, b), 0) for a, b, _ in banded],
                    "labelled": [False] * len(kept),
                    "version": [1] * len(kept),
                },
                schema={
                    "detector_run_id": pl.Int64,
                    "doc_a": pl.String,
                    "doc_b": pl.String,
                    "similarity": pl.Float64,
                    "band": pl.Int64,
                    "sampled": pl.Boolean,
                    "position": pl.Int64,
                    "labelled": pl.Boolean,
                    "version": pl.Int64,
                },
            ),
        )
        # a cancel asked while the pairs were written, or the job failed meanwhile by another
        # process (its heartbeat late): rolled back
        progress.confirm(session)
    progress.done = len(kept)
    session.refresh(run)
    return run


def detect_or_queue(
    *,
    session: Session,
    golden: GoldenSet,
    user: User | None,
    now: datetime,
    job_documents: int,
    asked: dict[str, Any],
) -> DetectorRun | JobPublic:
    """A detection (``asked``: threshold, near, per_band, seed), inline over a corpus of
    fewer than ``job_documents`` documents (the detector run), else queued as a background
    job (its read model): the one place that says which."""
    check_detection(golden=golden, **asked)
    if golden.documents >= job_documents:
        job = create_job(
            session=session,
            kind="detection",
            golden_set_id=golden.id,
            params=asked,
            user=user,
            total=golden.documents,
            now=now,
        )
        return public_job(job)
    return detect_duplicates(session=session, golden=golden, user=user, **asked)


def detection(
    documents: list[tuple[str, str]], params: DedupParams, *, per_band: int = cal.PER_BAND
) -> tuple[
    DedupResult,
    float,
    list[SimilarPair],
    list[tuple[str, str, int]],
    dict[tuple[str, str], int],
    dict[str, Any],
]:
    """What ``detect_duplicates`` computes before it writes (``benchmarks/dedup_copies.py``
    times it): the detection, the lowest band's edge, the pairs kept down to it, each with its
    band, the review sample, and the candidate search's recall. Linear in the copies of one
    text: a group of n identical documents is n - 1 pairs (each copy to the group's smallest
    id), and the exact join counts its n(n - 1)/2 pairs without listing them."""
    result = detect(documents, params)
    table = cal.bands(params.threshold - params.near)
    low = table[0].low
    kept = [p for p in result.pairs if p.similarity >= low - 1e-12]
    # the pairs the candidate search found between distinct texts (a copy's link to its
    # group, similarity 1, is found by construction)
    found = {(p.doc_a, p.doc_b) for p in kept if p.similarity < 1.0}
    group_of = {doc: first for first, members in result.copies.items() for doc in members}
    candidate = _candidate_recall(documents, low, found, group_of, params, table)
    banded = [(p.doc_a, p.doc_b, cal.band_of(p.similarity, table)) for p in kept]
    sampled = cal.sample(banded, per_band=per_band, seed=params.seed)
    return result, low, kept, banded, sampled, candidate


def _candidate_recall(
    documents: list[tuple[str, str]],
    low: float,
    found: set[tuple[str, str]],
    group_of: dict[str, str],
    params: DedupParams,
    table: list[cal.Band],
) -> dict[str, Any]:
    """The candidate search's recall against the exact similarity join, overall and per band:
    every pair compared when the corpus is small enough, else the pairs within a sample.

    Counted in pairs of documents: a pair of two groups of identical texts (``exact_join``)
    counts |A| x |B|, found when the detection paired the two groups (``found``: pairs of
    groups named by their smallest ids, ``group_of``: a copy's group); the n(n - 1)/2 pairs
    within a group of n copies are in the 1.00 band, found by construction. Without copies,
    every figure is the pair-by-pair count it was."""
    from app.eval.dedup_exact import exact_join, sample_ids

    how = "exact"
    if len(documents) > EXACT_LIMIT:
        keep = set(sample_ids([d for d, _ in documents], EXACT_LIMIT, seed=params.seed))
        documents = [d for d in documents if d[0] in keep]
        how = "sample"
    join = exact_join(documents, low, shingle_size=params.shingle_size)
    total = [0] * len(table)
    hits = [0] * len(table)
    for a, b, similarity, count in join.pairs:
        band = cal.band_of(similarity, table)
        total[band] += count
        x, y = group_of.get(a, a), group_of.get(b, b)
        if (min(x, y), max(x, y)) in found:
            hits[band] += count
    copy_pairs = join.copy_pairs
    total[table[-1].index] += copy_pairs
    hits[table[-1].index] += copy_pairs
    share = cal.wilson(sum(hits), sum(total))
    return share.as_json() | {
        "how": how,
        "pairs": sum(total),
        "documents": len(documents),
        "bands": [h / t if t else None for h, t in zip(hits, total, strict=True)],
        # of ``pairs``: within groups of identical texts (found by construction); and the
        # groups (distinct shingle sets) and their pairs the join compared
        "copy_pairs": copy_pairs,
        "groups": join.groups,
        "group_pairs": len(join.pairs),
    }


# --- the calibration table ------------------------------------------------------------------


def _similarities(session: Session, run: DetectorRun) -> list[tuple[str, str, float]]:
    return list(
        session.exec(
            select(DocPair.doc_a, DocPair.doc_b, DocPair.similarity).where(
                DocPair.detector_run_id == run.id
            )
        )
    )


def _state(run: DetectorRun, golden: GoldenSet) -> str:
    if golden.detector_run_id == run.id:
        return "applied"
    return "earlier" if run.applied_at is not None else "reviewing"


def ref_by_id(*, session: Session, detector_run_id: int | None) -> DetectorRunRef | None:
    """The reference a figure resting on the run carries, with its estimates now."""
    return live_ref(session=session, detector_run_id=detector_run_id)


def public(*, session: Session, run: DetectorRun, thresholds: bool = True) -> DetectorRunPublic:
    """The run with its calibration table; with ``thresholds``, also what each threshold
    would give (its pairs read and clustered: the run's page and answer, not a list of runs,
    which leaves the list empty)."""
    golden = session.get(GoldenSet, run.golden_set_id)
    assert golden is not None
    assert run.id is not None
    rows = band_rows(session=session, run=run)
    counted: list[Any] = []
    held: list[tuple[int, int]] | None = None
    if thresholds:
        similarities = _similarities(session, run)
        counted = clusters_at_thresholds(similarities, [r.band.low for r in rows])
        held = cal.band_documents(similarities, [r.band for r in rows])
    per_threshold: list[ThresholdPublic] = []
    for at in counted:
        precision, recall = estimates(run, rows, at.threshold)
        per_threshold.append(
            ThresholdPublic(
                threshold=at.threshold,
                pairs=at.pairs,
                clusters=at.clusters,
                clustered_documents=at.clustered_documents,
                precision=EstimatePublic(**precision.as_json()),
                recall=EstimatePublic(**recall.as_json()),
            )
        )
    c = run.candidate_recall
    # the estimates at the applied threshold from the reviews now (``applications`` keeps
    # what each application said then)
    now = None if run.threshold is None or run.low is None else estimates(run, rows, run.threshold)
    return DetectorRunPublic(
        id=run.id,
        golden_set_id=run.golden_set_id,
        source=run.source,
        state=_state(run, golden),
        parameters=run.parameters,
        low=run.low,
        documents=run.documents,
        pairs=run.pairs,
        seconds=run.seconds,
        created_at=run.created_at,
        created_by=run.created_by_id,
        threshold=run.threshold,
        clusters=run.clusters,
        clustered_documents=run.clustered_documents,
        precision=None if now is None else EstimatePublic(**now[0].as_json()),
        recall=None if now is None else EstimatePublic(**now[1].as_json()),
        applied_at=run.applied_at,
        applied_by=run.applied_by_id,
        applications=[ApplicationPublic(**a) for a in run.applications or []],
        bands=[
            BandPublic(
                low=r.band.low,
                high=r.band.high,
                label=r.band.label(),
                pairs=r.pairs,
                sampled=r.sampled,
                reviewed=r.reviewed,
                same=r.same,
                share=Interval(**r.share.as_json()),
                candidate_recall=r.candidate_recall,
                documents=None if held is None else held[r.band.index][0],
                groups=None if held is None else held[r.band.index][1],
            )
            for r in rows
        ],
        candidate_recall=None
        if not c
        else CandidateRecall(
            value=c.get("value"),
            ci=c["ci"],
            how=c["how"],
            pairs=c["pairs"],
            copy_pairs=c.get("copy_pairs"),
        ),
        thresholds=per_threshold,
        sampled=sum(r.sampled for r in rows),
        reviewed=sum(r.reviewed for r in rows),
        sentence=sentence(run)
        if now is None
        else sentence(run, precision=now[0].as_json(), recall=now[1].as_json()),
    )


# --- apply ----------------------------------------------------------------------------------


def check_apply(*, run: DetectorRun, threshold: float) -> None:
    """What an apply refuses before it starts (inline or as a job)."""
    if run.source != DetectorSource.DETECTOR.value or run.low is None:
        raise Conflict(
            "imported cluster ids have no pairs to pick a threshold from: they are applied "
            "as imported",
            code="not_a_detection",
        )
    if not run.low - 1e-9 <= threshold <= 1.0:
        raise Invalid(
            f"the threshold must be from {run.low:.2f} (the lowest similarity this run kept) to 1",
            code="invalid_threshold",
        )


def apply_or_queue(
    *,
    session: Session,
    run: DetectorRun,
    threshold: float,
    user: User | None,
    now: datetime,
    job_documents: int,
) -> DetectorRun | JobPublic:
    """An apply, inline over a corpus of fewer than ``job_documents`` documents (the run
    applied), else queued as a background job (its read model): the one place that says
    which."""
    check_apply(run=run, threshold=threshold)
    golden = session.get(GoldenSet, run.golden_set_id)
    if golden is None:
        raise NotFound(f"no golden set {run.golden_set_id}", code="golden_set_not_found")
    if golden.documents >= job_documents:
        job = create_job(
            session=session,
            kind="apply",
            golden_set_id=golden.id,
            params={"detector_run_id": run.id, "threshold": threshold},
            user=user,
            total=0,
            now=now,
        )
        return public_job(job)
    return apply_threshold(session=session, run=run, threshold=threshold, user=user, now=now)


def apply_threshold(
    *,
    session: Session,
    run: DetectorRun,
    threshold: float,
    user: User | None,
    now: datetime,
    progress: Progress | None = None,
) -> DetectorRun:
    """Make the run's clusters at ``threshold`` the corpus's cluster ids, with the estimated
    precision and recall there, and measure the golden set's runs with them again: the
    clusters written as a clustering nobody reads yet, made live in one short transaction,
    then each run measured again in a transaction of its own. As a job, its ``progress``:
    a cancel stops it until the clusters are made live (nothing changed), not after."""
    check_apply(run=run, threshold=threshold)
    progress = progress or Progress()
    progress.start("finding the clusters")
    # the run's pairs never change: its clusters at ``threshold`` are found before the write
    at = [(a, b) for a, b, s in _similarities(session, run) if s >= threshold - 1e-9]
    end_reading(session)
    clusters = clusters_of_pairs(at)
    cluster_of = {doc: cid for cid, members in clusters.items() for doc in members}
    assert run.id is not None
    progress.start("writing the clusters", len(cluster_of))
    clustering = write_clustering(
        session=session,
        golden_set_id=run.golden_set_id,
        detector_run_id=run.id,
        threshold=round(threshold, 6),
        ids=cluster_frame(cluster_of),
        now=now,
        written=progress.advance,
    )
    assert clustering.id is not None
    written_id = clustering.id  # the row may be gone when the switch is refused
    try:
        with writing(session):
            golden = _lock_golden_set(session, run.golden_set_id)
            # what other applies wrote before this one took the lock (their applications)
            run = _read_again(session, run)
            rows = band_rows(session=session, run=run)
            precision, recall = estimates(run, rows, threshold)
            run.threshold = round(threshold, 6)
            run.clusters = len(clusters)
            run.clustered_documents = len(cluster_of)
            run.precision = precision.as_json()
            run.recall = recall.as_json()
            run.applied_at = now
            run.applied_by_id = user.id if user else None
            run.applications = [
                *(run.applications or []),
                {
                    "threshold": run.threshold,
                    "at": now.isoformat(),
                    "by": run.applied_by_id,
                    "clusters": run.clusters,
                    "clustered_documents": run.clustered_documents,
                    "precision": run.precision,
                    "recall": run.recall,
                    "clustering": clustering.id,
                },
            ]
            session.add(run)
            progress.confirm(session)
            make_live(session=session, golden=golden, clustering=clustering, now=now)
    except BaseException:
        drop_clustering(session=session, clustering_id=written_id)
        raise
    measure_again(session=session, golden_set_id=run.golden_set_id, progress=progress)
    session.refresh(run)
    return run


def _lock_golden_set(session: Session, golden_set_id: int) -> GoldenSet:
    """Inside a ``writing`` block, first: the golden set's row, locked for a write to its
    clusters (app/services/locks.py), and read again."""
    if not locks.golden_set_for_clusters(session.connection(), golden_set_id=golden_set_id):
        raise NotFound(f"no golden set {golden_set_id}", code="golden_set_not_found")
    golden = session.exec(
        select(GoldenSet)
        .where(GoldenSet.id == golden_set_id)
        .execution_options(populate_existing=True)
    ).one()
    return golden


def _read_again(session: Session, run: DetectorRun) -> DetectorRun:
    """The detector run as it is stored now, inside the write (404 when it was deleted)."""
    found = session.exec(
        select(DetectorRun)
        .where(DetectorRun.id == run.id)
        .execution_options(populate_existing=True)
    ).first()
    if found is None:
        raise NotFound(f"no detector run {run.id}", code="detector_run_not_found")
    return found


def import_cluster_ids(
    *,
    session: Session,
    golden: GoldenSet,
    cluster_of: dict[str, str],
    file_name: str,
    user: User | None,
    now: datetime,
) -> DetectorRun:
    """Cluster ids made elsewhere (a side file) as a detector run, applied at once: "imported,
    not calibrated". Ids of documents outside the corpus are refused, naming a few."""
    if golden.documents == 0:
        raise Conflict(
            f"golden set {golden.name!r} has no corpus to give cluster ids to",
            code="no_corpus",
        )
    file_name = printable_name(file_name)[-200:]  # as a run's source name is kept
    known = set(
        session.exec(select(Document.doc_id).where(Document.golden_set_id == golden.id)).all()
    )
    unknown = [d for d in cluster_of if d not in known]
    if unknown:
        shown = ", ".join(repr(d[:60]) for d in unknown[:3])
        raise Invalid(
            f"{file_name}: {len(unknown):,} document ids are not in the corpus ({shown}"
            f"{', ...' if len(unknown) > 3 else ''}): nothing was imported",
            code="unknown_documents",
        )
    ids = cluster_frame(cluster_of)
    assert golden.id is not None
    clustering = write_clustering(
        session=session,
        golden_set_id=golden.id,
        detector_run_id=None,
        threshold=None,
        ids=ids,
        now=now,
    )
    assert clustering.id is not None
    written_id = clustering.id  # the row may be gone when the switch is refused
    run = DetectorRun(
        golden_set_id=golden.id,
        source=DetectorSource.IMPORTED.value,
        parameters={"file": file_name},
        documents=golden.documents,
        pairs=0,
        created_by_id=user.id if user else None,
        clusters=clustering.clusters,
        clustered_documents=clustering.clustered_documents,
        applied_at=now,
        applied_by_id=user.id if user else None,
    )
    try:
        with writing(session):
            golden = _lock_golden_set(session, golden.id)
            session.add(run)
            session.flush()
            clustering.detector_run_id = run.id
            make_live(session=session, golden=golden, clustering=clustering, now=now)
    except BaseException:
        drop_clustering(session=session, clustering_id=written_id)
        raise
    assert golden.id is not None
    measure_again(session=session, golden_set_id=golden.id)
    session.refresh(run)
    return run


def measure_again(*, session: Session, golden_set_id: int, progress: Progress | None = None) -> int:
    """Outside any transaction, after a clustering was made live: each judged run of the
    golden set not measured with the live clustering is measured again with it
    (``retrace``), in a transaction of its own holding the golden set's lock (a clustering
    made live meanwhile is the one used; a run imported meanwhile was measured with it).
    Answers how many were."""
    run_ids = session.exec(
        select(Run.id).where(
            Run.golden_set_id == golden_set_id, Run.kind == JUDGED, col(Run.keep_depth) > 0
        )
    ).all()
    if progress is not None:  # past the switch: no longer cancelled
        progress.step, progress.done, progress.total = MEASURING, 0, len(run_ids)
    if not run_ids:
        return 0
    from app.services.imports.golden_sets import eval_golden_set

    golden = session.get(GoldenSet, golden_set_id)
    if golden is None:
        return 0
    judged = eval_golden_set(session=session, golden=golden).judgments.select("qid", "doc_id")
    again = 0
    for run_id in run_ids:
        if progress is not None:
            progress.done += 1
        with writing(session):
            if not locks.golden_set_for_clusters(session.connection(), golden_set_id=golden_set_id):
                return again
            golden = session.exec(
                select(GoldenSet)
                .where(GoldenSet.id == golden_set_id)
                .execution_options(populate_existing=True)
            ).one()
            stored = session.get(Run, run_id)
            totals = session.get(RunClusterTotals, run_id)
            if (
                stored is None
                or totals is None
                or golden.clustering_id is None
                or totals.clustering_id == golden.clustering_id
            ):
                continue
            again += retrace(
                session=session,
                golden=golden,
                run=stored,
                judged=judged,
                clustering_id=golden.clustering_id,
                detector_run_id=golden.detector_run_id,
            )
    return again


def retrace(
    *,
    session: Session,
    golden: GoldenSet,
    run: Run,
    judged: pl.DataFrame,
    clustering_id: int,
    detector_run_id: int | None,
) -> bool:
    """Inside a ``writing`` block: measure a judged run's clusters again from its stored
    rankings with the corpus's cluster ids now (exact up to its kept head), the golden set's
    ``judged`` documents (qid, doc_id) ranked by their clusters as at import (a relevant
    document the run did not return counts from its first copy the run did). False for a
    run that keeps no rankings of some query it answers (a log run; a judged run's queries
    outside the golden set, whose rankings are not kept): it stays, whole, on the clusters it
    was measured with, and names them."""
    from app.services.imports.clusters import corpus_source, store_traces, stored_top

    totals = session.get(RunClusterTotals, run.id)
    if run.kind != JUDGED or run.keep_depth <= 0 or totals is None:
        return False
    assert run.id is not None
    returned = {
        qid: n
        for qid, n in session.exec(
            select(RunClusterQuery.qid, RunClusterQuery.returned).where(
                RunClusterQuery.run_id == run.id
            )
        )
    }
    head = stored_top(session=session, run=run, depth=run.keep_depth)
    if set(returned) - set(head.get_column("qid").unique().to_list()) - _answered_nothing(returned):
        return False
    deeper = pl.DataFrame(
        session.exec(
            select(RunJudged.qid, RunJudged.doc_id, RunJudged.rank).where(
                RunJudged.run_id == run.id, col(RunJudged.rank) > run.keep_depth
            )
        ).all(),
        schema={"qid": pl.String, "doc_id": pl.String, "rank": pl.Int64},
        orient="row",
    )
    source = corpus_source(session=session, golden=golden, clustering_id=clustering_id)
    wanted = pl.concat([head.get_column("doc_id"), judged.get_column("doc_id")]).unique()
    found: ClusterCorpus = source.lookup(wanted.to_list())
    traces = trace_ranking(head, returned, found)
    ranked = pl.concat([head, deeper])
    ranks = judged_cluster_ranks(ranked, judged, found.documents)
    for table in (RunClusterQuery, RunJudgedCluster, RunClusterTotals):
        session.exec(delete(table).where(col(table.run_id) == run.id))
    session.flush()
    store_traces(
        session=session,
        run_id=run.id,
        traces=replace(traces, cluster_ranks=ranks),
        detector_run_id=detector_run_id,
        clustering_id=clustering_id,
        traced_depth=run.keep_depth,
    )
    return True


def _answered_nothing(returned: dict[str, int]) -> set[str]:
    """Queries the run answers with no result (they have no ranking to keep)."""
    return {qid for qid, n in returned.items() if n <= 0}
