"""``misstriage detector``: a golden set's detector runs from the shell, on both databases:
detect over the stored corpus, the calibration table, apply a threshold (the run's cluster
figures then name it), import a side file; bad input is one line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

from sqlmodel import Session, select

from app.db import make_engine
from app.models import DocPair, GoldenSet
from app.settings import Settings
from tests.support.cli import service_cli
from tests.support.clusters import live_cluster_ids
from tests.support.detector_data import copies_files


def test_detect_show_apply_import(database_url: str, tmp_path: Path) -> None:
    corpus, qrels, queries, _run, truth = copies_files(tmp_path)
    made = service_cli(
        database_url, "import-golden-set", "--name", "copies", "--qrels", qrels,
        "--queries", queries, "--corpus", corpus,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    found = service_cli(
        database_url, "detector", "detect", "--golden-set", "copies", "--per-band", "3",
        "--format", "json",
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    detection = json.loads(found.stdout)
    assert detection["state"] == "reviewing"
    assert detection["candidate_recall"]["how"] == "exact"
    table = service_cli(database_url, "detector", "show", str(detection["id"]))
    assert table.returncode == 0, table.stderr
    assert f"{detection['pairs']:,} pairs at J >= 0.60" in table.stdout
    assert "not calibrated yet" in table.stdout
    # a reviewer's judgments, as the queue would store them (reviewing is a browser's or the
    # API's: tests/api/test_detector_runs.py)
    engine = make_engine(Settings(DATABASE_URL=database_url))
    try:
        with Session(engine) as session:
            for pair in session.exec(select(DocPair).where(DocPair.sampled)).all():
                pair.labelled, pair.same = True, truth[pair.doc_a] == truth[pair.doc_b]
                session.add(pair)
            session.commit()
    finally:
        engine.dispose()
    applied = service_cli(
        database_url, "detector", "apply", str(detection["id"]), "--threshold", "0.8"
    )
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.startswith(
        f"clusters from detector run {detection['id']} (J >= 0.80): precision 1.00"
    )
    engine = make_engine(Settings(DATABASE_URL=database_url))
    try:
        with Session(engine) as session:
            (golden,) = session.exec(select(GoldenSet)).all()
            assert golden.id is not None
            clustered = live_cluster_ids(session, golden.id)
            assert clustered
            assert all(truth[d] for d in clustered)
    finally:
        engine.dispose()
    ids = tmp_path / "ids.jsonl"
    ids.write_text(
        "".join(json.dumps({"doc_id": d, "cluster_id": g}) + "\n" for d, g in truth.items())
    )
    imported = service_cli(database_url, "detector", "import-ids", "--golden-set", "copies", ids)
    assert imported.returncode == 0, imported.stderr
    assert "(imported with ids.jsonl): not calibrated" in imported.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"doc_id": "x"}\n')
    refused = service_cli(database_url, "detector", "import-ids", "--golden-set", "copies", bad)
    assert refused.returncode == 2
    assert "bad.jsonl, line 1" in refused.stderr
    assert "Traceback" not in refused.stderr
