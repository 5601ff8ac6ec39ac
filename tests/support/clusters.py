"""The cluster ids a golden set's corpus carries now (its live clustering), for tests."""

from __future__ import annotations

from sqlmodel import Session

from app.models import GoldenSet
from app.services.imports.clusterings import clustering_ids


def live_cluster_ids(session: Session, golden_set_id: int) -> dict[str, str]:
    """``{doc_id: cluster_id}`` of every document with a cluster id in the golden set's live
    clustering (empty: none)."""
    golden = session.get(GoldenSet, golden_set_id, populate_existing=True)
    assert golden is not None
    frame = clustering_ids(session=session, clustering_id=golden.clustering_id)
    return dict(frame.iter_rows())
