"""The ``clusterings`` migration on both databases: the cluster ids a corpus carried in
``document.cluster_id`` become its golden set's live clustering, the runs measured with that
detector run name it, and a downgrade puts the ids back."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, inspect, text

from app.db import make_engine
from app.migrate import downgrade, upgrade
from app.settings import Settings

BEFORE = "3f8d2a7c9b14"


def _insert(engine: Engine, table: str, **given: Any) -> int:
    """A row of ``table`` with ``given`` values and a plain value in every other required
    column; its id."""
    values = dict(given)
    for column in inspect(engine).get_columns(table):
        name = column["name"]
        if name in values or name == "id" or column["nullable"] or column.get("default"):
            continue
        kind = str(column["type"]).upper()
        if any(word in kind for word in ("INT", "FLOAT", "NUMERIC", "REAL", "DOUBLE")):
            values[name] = 0
        elif "BOOL" in kind:
            values[name] = False
        elif "TIME" in kind or "DATE" in kind:
            values[name] = datetime(2026, 12, 1, tzinfo=UTC)
        elif "JSON" in kind:
            values[name] = json.dumps({})
        else:
            values[name] = f"{table}-{name}"
    names = ", ".join(values)
    marks = ", ".join(f":{n}" for n in values)
    with engine.begin() as conn:
        return int(
            conn.execute(
                text(f"INSERT INTO {table} ({names}) VALUES ({marks}) RETURNING id"), values
            ).scalar_one()
        )


def test_cluster_ids_become_the_live_clustering(fresh_settings: Settings) -> None:
    upgrade(fresh_settings, BEFORE)
    engine = make_engine(fresh_settings)
    try:
        golden = _insert(engine, "golden_set", name="g", documents=4)
        for doc, cluster in (("a", "c1"), ("b", "c1"), ("c", None), ("d", "c2")):
            _insert(engine, "document", golden_set_id=golden, doc_id=doc, cluster_id=cluster)
        detector = _insert(
            engine, "detector_run", golden_set_id=golden, source="detector", threshold=0.8
        )
        older = _insert(engine, "detector_run", golden_set_id=golden, source="imported")
        with engine.begin() as conn:
            conn.execute(
                text("UPDATE golden_set SET detector_run_id = :d WHERE id = :g"),
                {"d": detector, "g": golden},
            )
        runs = [_insert(engine, "run", golden_set_id=golden, name=f"r{i}") for i in range(2)]
        for run, measured in zip(runs, (detector, older), strict=True):
            with engine.begin() as conn:
                conn.execute(
                    text(
                        "INSERT INTO run_cluster_totals (run_id, totals, cluster_ranks, "
                        "detector_run_id) VALUES (:r, '{}', false, :d)"
                    ),
                    {"r": run, "d": measured},
                )
        engine.dispose()

        upgrade(fresh_settings)
        with engine.connect() as conn:
            (clustering, threshold, documents, clusters, live_at) = conn.execute(
                text(
                    "SELECT id, threshold, clustered_documents, clusters, live_at FROM clustering"
                    " WHERE golden_set_id = :g AND detector_run_id = :d"
                ),
                {"g": golden, "d": detector},
            ).one()
            assert (threshold, documents, clusters) == (0.8, 3, 2)
            assert live_at is not None
            assert (
                conn.execute(
                    text("SELECT clustering_id FROM golden_set WHERE id = :g"), {"g": golden}
                ).scalar_one()
                == clustering
            )
            rows = conn.execute(
                text("SELECT doc_id, cluster_id FROM document_cluster WHERE clustering_id = :c"),
                {"c": clustering},
            ).all()
            assert sorted(rows) == [("a", "c1"), ("b", "c1"), ("d", "c2")]
            named = dict(
                conn.execute(text("SELECT run_id, clustering_id FROM run_cluster_totals")).all()
            )
            # figures of the detector run applied then name its clustering; of another, none
            assert named == {runs[0]: clustering, runs[1]: None}
            assert "cluster_id" not in {c["name"] for c in inspect(conn).get_columns("document")}
        engine.dispose()

        downgrade(fresh_settings, BEFORE)
        with engine.connect() as conn:
            back = conn.execute(
                text("SELECT doc_id, cluster_id FROM document WHERE golden_set_id = :g"),
                {"g": golden},
            ).all()
        assert sorted(back) == [("a", "c1"), ("b", "c1"), ("c", None), ("d", "c2")]
    finally:
        engine.dispose()
