"""Clusterings on both databases: cluster ids written into rows nobody reads until they are
made live, a write that failed leaves nothing the readers see, and what an abandoned write
left is deleted by the next one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from app.db import writing
from app.models import Clustering, DocumentCluster, GoldenSet
from app.services.dedup import detector_runs
from app.services.errors import Conflict
from app.services.imports import clusterings, golden_sets
from app.services.imports.clusterings import cluster_frame
from tests.support.clusters import live_cluster_ids

NOW = datetime(2026, 12, 7, 12, tzinfo=UTC)


def _golden(session: Session, tmp: Path, documents: int = 50) -> GoldenSet:
    (tmp / "qrels.tsv").write_text("q1\t0\td0\t1\n")
    (tmp / "corpus.jsonl").write_text(
        "".join(f'{{"_id": "d{i}", "text": "text {i}"}}\n' for i in range(documents))
    )
    return golden_sets.import_golden_set(
        session=session, name="g", qrels=tmp / "qrels.tsv", corpus=tmp / "corpus.jsonl"
    )


def _rows(session: Session, clustering_id: int) -> int:
    return session.exec(
        select(func.count())
        .select_from(DocumentCluster)
        .where(col(DocumentCluster.clustering_id) == clustering_id)
    ).one()


def test_written_clusters_are_read_only_once_live(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # slices of 7 rows on SQLite: the 50 ids are written in 8 transactions
    monkeypatch.setattr(clusterings, "SQLITE_SLICE_ROWS", 7)
    with Session(engine, expire_on_commit=False) as session:
        golden = _golden(session, tmp_path)
        assert golden.id is not None
        first = detector_runs.import_cluster_ids(
            session=session,
            golden=golden,
            cluster_of={f"d{i}": f"c{i // 2}" for i in range(50)},
            file_name="ids.csv",
            user=None,
            now=NOW,
        )
        live = live_cluster_ids(session, golden.id)
        assert len(live) == 50
        assert live["d0"] == live["d1"] == "c0"
        # a second set written, not made live: the readers see the first
        written = clusterings.write_clustering(
            session=session,
            golden_set_id=golden.id,
            detector_run_id=None,
            threshold=None,
            ids=cluster_frame({"d0": "x", "d2": "x"}),
            now=NOW,
        )
        assert written.id is not None
        assert _rows(session, written.id) == 2
        assert live_cluster_ids(session, golden.id) == live
        golden = session.get(GoldenSet, golden.id, populate_existing=True)
        assert golden is not None
        assert golden.detector_run_id == first.id
        # its rows gone before the switch (an abandoned write's, deleted): refused, no change
        with writing(session):
            session.exec(
                DocumentCluster.__table__.delete().where(  # type: ignore[attr-defined]
                    DocumentCluster.__table__.c.clustering_id == written.id  # type: ignore[attr-defined]
                )
            )
        with pytest.raises(Conflict) as refused, writing(session):
            clusterings.make_live(session=session, golden=golden, clustering=written, now=NOW)
        assert refused.value.code == "clusters_changed"
        assert live_cluster_ids(session, golden.id) == live
        # the clustering itself gone (deleted as abandoned): refused the same way
        clusterings.drop_clustering(session=session, clustering_id=written.id)
        with pytest.raises(Conflict) as gone, writing(session):
            clusterings.make_live(session=session, golden=golden, clustering=written, now=NOW)
        assert gone.value.code == "clusters_changed"
        assert live_cluster_ids(session, golden.id) == live


def test_an_abandoned_write_is_deleted_by_the_next(engine: Engine, tmp_path: Path) -> None:
    with Session(engine, expire_on_commit=False) as session:
        golden = _golden(session, tmp_path)
        assert golden.id is not None
        ids = cluster_frame({"d1": "a", "d2": "a"})
        abandoned = clusterings.write_clustering(
            session=session,
            golden_set_id=golden.id,
            detector_run_id=None,
            threshold=None,
            ids=ids,
            now=NOW - clusterings.ABANDONED_AFTER - timedelta(minutes=1),
        )
        recent = clusterings.write_clustering(
            session=session,
            golden_set_id=golden.id,
            detector_run_id=None,
            threshold=None,
            ids=ids,
            now=NOW - timedelta(minutes=5),
        )
        detector_runs.import_cluster_ids(
            session=session,
            golden=golden,
            cluster_of={"d3": "b", "d4": "b"},
            file_name="ids.csv",
            user=None,
            now=NOW,
        )
        left = {
            c.id: c.live_at is not None
            for c in session.exec(
                select(Clustering).where(Clustering.golden_set_id == golden.id)
            ).all()
        }
        assert abandoned.id not in left
        assert left[recent.id] is False  # may still be being written
        assert sum(left.values()) == 1
        assert abandoned.id is not None
        assert _rows(session, abandoned.id) == 0
        assert live_cluster_ids(session, golden.id) == {"d3": "b", "d4": "b"}


def test_earlier_clusterings_no_run_rests_on_are_deleted(engine: Engine, tmp_path: Path) -> None:
    with Session(engine, expire_on_commit=False) as session:
        golden = _golden(session, tmp_path)
        assert golden.id is not None
        for i in range(3):
            detector_runs.import_cluster_ids(
                session=session,
                golden=golden,
                cluster_of={f"d{i}": "a", f"d{i + 10}": "a"},
                file_name="ids.csv",
                user=None,
                now=NOW,
            )
        kept = session.exec(
            select(Clustering.id)
            .where(Clustering.golden_set_id == golden.id)
            .order_by(col(Clustering.id))
        ).all()
        # the first went at the third write (the second's was live, the third's is)
        assert len(kept) == 2
        assert live_cluster_ids(session, golden.id) == {"d2": "a", "d12": "a"}


# SQLite writes the ids in slices, a transaction each; PostgreSQL in one (no moment between)
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_golden_set_deleted_while_its_ids_are_written_answers_409(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(clusterings, "SQLITE_SLICE_ROWS", 7)
    with Session(engine, expire_on_commit=False) as session:
        golden = _golden(session, tmp_path)
        assert golden.id is not None
        golden_id = golden.id

        def delete_the_golden_set(rows: int) -> None:
            # after the first transaction: the golden set goes, its clustering with it
            with Session(engine) as other, writing(other):
                other.exec(
                    GoldenSet.__table__.delete().where(GoldenSet.__table__.c.id == golden_id)
                )  # type: ignore[attr-defined]

        with pytest.raises(Conflict) as refused:
            clusterings.write_clustering(
                session=session,
                golden_set_id=golden_id,
                detector_run_id=None,
                threshold=None,
                ids=cluster_frame({f"d{i}": f"c{i // 2}" for i in range(50)}),
                now=NOW,
                written=delete_the_golden_set,
            )
        assert refused.value.code == "clusters_changed"
        assert session.exec(select(func.count()).select_from(DocumentCluster)).one() == 0
