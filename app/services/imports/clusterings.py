"""A golden set's cluster ids, a clustering at a time (app/models/dedup.py).

A clustering is written in bulk into rows nobody reads yet (``write_clustering``: one COPY on
PostgreSQL; on SQLite, whose one writer would keep everyone else waiting, slices of
``SQLITE_SLICE_ROWS`` rows, each its own short transaction), then made the golden set's in
one short transaction holding the golden set's lock (``make_live``), which checks every row
is there. Readers ask for the clustering they mean (the golden set's now, or the one a run's
figures were measured with): a write never changes what they read, and an import of cluster
ids stays all or nothing. A clustering never made live (its write failed, or the process was
killed) is deleted by the next write to the golden set's clusters once it is
``ABANDONED_AFTER`` old; so is an earlier live one that no run's figures rest on.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta

import polars as pl
import psycopg
from sqlalchemy import delete, func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from app.db import writing
from app.models import Clustering, Document, DocumentCluster, GoldenSet, RunClusterTotals
from app.services.errors import Conflict
from app.services.imports.bulk import bulk_insert

#: SQLite: rows written per transaction (some tens of milliseconds each).
SQLITE_SLICE_ROWS = 20_000
#: A clustering not made live this long after it was begun is a failed write's.
ABANDONED_AFTER = timedelta(hours=1)
#: Ids per IN list.
IN_CHUNK = 5000

CLUSTER_IDS = {"doc_id": pl.String, "cluster_id": pl.String}


def cluster_frame(cluster_of: Mapping[str, str]) -> pl.DataFrame:
    """``{doc_id: cluster_id}`` as rows (doc_id, cluster_id); an empty cluster id is none."""
    return pl.DataFrame(
        {"doc_id": list(cluster_of), "cluster_id": list(cluster_of.values())},
        schema=CLUSTER_IDS,
    ).filter(pl.col("cluster_id").is_not_null() & (pl.col("cluster_id") != ""))


def add_clustering(
    *,
    session: Session,
    golden_set_id: int,
    detector_run_id: int | None,
    threshold: float | None,
    ids: pl.DataFrame,
    now: datetime,
) -> Clustering:
    """Inside the caller's transaction: a clustering of ``ids`` (doc_id, cluster_id), not
    live (for a golden set nobody reads yet: its import)."""
    clustering = Clustering(
        golden_set_id=golden_set_id,
        detector_run_id=detector_run_id,
        threshold=threshold,
        clustered_documents=ids.height,
        clusters=ids.get_column("cluster_id").n_unique() if ids.height else 0,
        created_at=now,
    )
    session.add(clustering)
    session.flush()
    assert clustering.id is not None
    bulk_insert(
        session,
        DocumentCluster,
        ids.select(pl.lit(clustering.id, dtype=pl.Int64).alias("clustering_id"), pl.all()),
    )
    return clustering


def write_clustering(
    *,
    session: Session,
    golden_set_id: int,
    detector_run_id: int | None,
    threshold: float | None,
    ids: pl.DataFrame,
    now: datetime,
    written: Callable[[int], None] | None = None,
) -> Clustering:
    """Outside any transaction: a new clustering of ``ids`` written, not live, in
    transactions that never keep the database's writers waiting long. Clusterings of the
    golden set abandoned by earlier writes are deleted first. ``written`` is told the rows
    written after each transaction (it may raise to stop: what was written is deleted)."""
    sqlite = session.get_bind().dialect.name == "sqlite"
    first = ids.head(SQLITE_SLICE_ROWS) if sqlite else ids
    with writing(session):
        session.exec(
            delete(Clustering).where(
                col(Clustering.golden_set_id) == golden_set_id,
                col(Clustering.live_at).is_(None),
                col(Clustering.created_at) < now - ABANDONED_AFTER,
            )
        )
        # earlier live ones no run's figures rest on (the live one stays)
        session.exec(
            delete(Clustering).where(
                col(Clustering.golden_set_id) == golden_set_id,
                col(Clustering.live_at).is_not(None),
                col(Clustering.id).not_in(
                    select(GoldenSet.clustering_id).where(
                        GoldenSet.id == golden_set_id, col(GoldenSet.clustering_id).is_not(None)
                    )
                ),
                col(Clustering.id).not_in(
                    select(RunClusterTotals.clustering_id).where(
                        col(RunClusterTotals.clustering_id).is_not(None)
                    )
                ),
            )
        )
        clustering = add_clustering(
            session=session,
            golden_set_id=golden_set_id,
            detector_run_id=detector_run_id,
            threshold=threshold,
            ids=first,
            now=now,
        )
        clustering.clustered_documents = ids.height
        clustering.clusters = ids.get_column("cluster_id").n_unique() if ids.height else 0
        session.add(clustering)
    assert clustering.id is not None
    written_id = clustering.id  # the row may be gone after a rollback (deleted meanwhile)
    try:
        if written is not None:
            written(first.height)
        for offset in range(first.height, ids.height, SQLITE_SLICE_ROWS):
            part = ids.slice(offset, SQLITE_SLICE_ROWS)
            with writing(session):
                bulk_insert(
                    session,
                    DocumentCluster,
                    part.select(
                        pl.lit(written_id, dtype=pl.Int64).alias("clustering_id"), pl.all()
                    ),
                )
            if written is not None:
                written(part.height)
    except (IntegrityError, sqlite3.IntegrityError, psycopg.IntegrityError):
        # the golden set (its clustering with it) deleted between two slices; bulk_insert
        # writes through the driver's cursor, so the driver's error too
        drop_clustering(session=session, clustering_id=written_id)
        raise Conflict(
            "the golden set was deleted while its cluster ids were written: nothing was kept",
            code="clusters_changed",
        ) from None
    except BaseException:
        drop_clustering(session=session, clustering_id=written_id)
        raise
    return clustering


def drop_clustering(*, session: Session, clustering_id: int) -> None:
    """Outside any transaction: a clustering that was not made live, deleted (its rows with
    it)."""
    with writing(session):
        session.exec(
            delete(Clustering).where(
                col(Clustering.id) == clustering_id, col(Clustering.live_at).is_(None)
            )
        )


def make_live(
    *, session: Session, golden: GoldenSet, clustering: Clustering, now: datetime
) -> None:
    """Inside a ``writing`` block holding the golden set's lock for a write to its clusters
    (app/services/locks.py): ``clustering`` becomes the golden set's, every row of it
    checked to be there (409 ``clusters_changed`` when not: a failed write's, deleted as
    abandoned meanwhile)."""
    assert clustering.id is not None
    rows = session.exec(
        select(func.count())
        .select_from(DocumentCluster)
        .where(col(DocumentCluster.clustering_id) == clustering.id)
    ).one()
    stored = session.get(Clustering, clustering.id, populate_existing=True)
    if stored is None or rows != clustering.clustered_documents:
        raise Conflict(
            "the cluster ids being written were deleted before they were made live (a write "
            "that looked abandoned): nothing changed; apply or import them again",
            code="clusters_changed",
        )
    stored.live_at = now
    stored.detector_run_id = clustering.detector_run_id
    session.add(stored)
    golden.clustering_id = clustering.id
    golden.detector_run_id = clustering.detector_run_id
    session.add(golden)


def clustering_ids(*, session: Session, clustering_id: int | None) -> pl.DataFrame:
    """Every document's cluster id in a clustering (doc_id, cluster_id)."""
    if clustering_id is None:
        return pl.DataFrame(schema=CLUSTER_IDS)
    return pl.DataFrame(
        session.exec(
            select(DocumentCluster.doc_id, DocumentCluster.cluster_id).where(
                DocumentCluster.clustering_id == clustering_id
            )
        ).all(),
        schema=CLUSTER_IDS,
        orient="row",
    )


def clusters_of(
    *, session: Session, clustering_id: int | None, doc_ids: Iterable[str]
) -> dict[str, str]:
    """The cluster id of each of ``doc_ids`` that has one in the clustering."""
    if clustering_id is None:
        return {}
    wanted = sorted(set(doc_ids))
    found: dict[str, str] = {}
    for start in range(0, len(wanted), IN_CHUNK):
        found.update(
            session.exec(
                select(DocumentCluster.doc_id, DocumentCluster.cluster_id).where(
                    DocumentCluster.clustering_id == clustering_id,
                    col(DocumentCluster.doc_id).in_(wanted[start : start + IN_CHUNK]),
                )
            ).all()
        )
    return found


def members_of(
    *, session: Session, clustering_id: int | None, cluster_ids: Iterable[str], limit: int = 0
) -> dict[str, list[str]]:
    """The documents of each cluster of ``cluster_ids`` in the clustering, by doc id
    (``limit``: at most that many a cluster; 0: all)."""
    if clustering_id is None:
        return {}
    wanted = sorted(set(cluster_ids))
    members: dict[str, list[str]] = {}
    for start in range(0, len(wanted), IN_CHUNK):
        for doc_id, cluster_id in session.exec(
            select(DocumentCluster.doc_id, DocumentCluster.cluster_id)
            .where(
                DocumentCluster.clustering_id == clustering_id,
                col(DocumentCluster.cluster_id).in_(wanted[start : start + IN_CHUNK]),
            )
            .order_by(col(DocumentCluster.cluster_id), col(DocumentCluster.doc_id))
        ):
            mates = members.setdefault(cluster_id, [])
            if not limit or len(mates) < limit:
                mates.append(doc_id)
    return members


def has_clusters(*, session: Session, clustering_id: int | None) -> bool:
    if clustering_id is None:
        return False
    return (
        session.exec(
            select(DocumentCluster.doc_id)
            .where(DocumentCluster.clustering_id == clustering_id)
            .limit(1)
        ).first()
        is not None
    )


def corpus_ids(*, session: Session, golden_set_id: int) -> set[str]:
    """Every document id of the golden set's corpus."""
    return set(
        session.exec(select(Document.doc_id).where(Document.golden_set_id == golden_set_id)).all()
    )
