"""Detections and applies over a large corpus as background jobs, against real servers on SQLite and
PostgreSQL: the request answers 202 and the job, whose progress the API says while the
service's own process runs it; a cancel stops it with nothing kept; a server killed with
kill -9 mid-detection leaves a job that the next server fails with its reason (never
"running" forever), no detector run and no pairs, and the next detection succeeds."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from app.models import DetectorRun, DocPair, Role
from app.services.accounts import users
from app.services.imports import golden_sets
from tests.support.dupe_corpus import make_corpus
from tests.support.live import LiveServer
from tests.support.service import TEST_SECRET

#: Documents of the corpus: a detection that takes some seconds (read, signed, verified).
DOCUMENTS = 30_000
ENV = {"MISSTRIAGE_JOB_DOCUMENTS": "1000", "MISSTRIAGE_JOB_STALE_SECONDS": "5"}
DEADLINE_S = 180


def _setup(engine: Engine, tmp: Path) -> tuple[int, dict[str, str], dict[str, str]]:
    """A golden set with a corpus of DOCUMENTS chunks, some copied; a lead's and a
    reviewer's headers."""
    corpus = make_corpus(DOCUMENTS, copy_share=0.05, seed=3, words=60)
    docs = corpus.docs[:DOCUMENTS]
    (tmp / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (tmp / "qrels.tsv").write_text(f"q1\t0\t{docs[0]['_id']}\t1\n")
    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(
            session=session, name="big", qrels=tmp / "qrels.tsv", corpus=tmp / "corpus.jsonl"
        )
        headers = []
        for email, role in (("lead@example.com", Role.LEAD), ("rev@example.com", Role.REVIEWER)):
            user = users.create_user(
                session=session, email=email, password="long enough", role=role
            )
            token = users.create_token(session=session, user=user, name="t").secret
            headers.append({"Authorization": f"Bearer {token}"})
    assert golden.id is not None
    assert golden.documents >= 1000
    return golden.id, headers[0], headers[1]


def _wait(what: str, check: Callable[[], Any], seconds: float = DEADLINE_S) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds} s: {what}")


def _job(http: httpx.Client, job_id: int) -> dict[str, Any]:
    answer = http.get(f"/api/v1/jobs/{job_id}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _detect(http: httpx.Client, golden_id: int) -> dict[str, Any]:
    answer = http.post(f"/api/v1/golden-sets/{golden_id}/detector-runs", json={"threshold": 0.8})
    assert answer.status_code == 202, answer.text
    job = answer.json()
    assert answer.headers["location"] == f"/api/v1/jobs/{job['id']}"
    assert (job["kind"], job["state"], job["total"]) == ("detection", "queued", DOCUMENTS)
    return dict(job)


def _stored(engine: Engine, golden_id: int) -> tuple[int, int]:
    with Session(engine) as session:
        runs = session.exec(
            select(func.count()).where(DetectorRun.golden_set_id == golden_id)
        ).one()
        pairs = session.exec(
            select(func.count())
            .select_from(DocPair)
            .join(DetectorRun)
            .where(DetectorRun.golden_set_id == golden_id)
        ).one()
    return runs, pairs


def _kill_hard(server: LiveServer) -> None:
    """kill -9 of the server and every process it started."""
    process = psutil.Process(server.process.pid)
    for member in [*process.children(recursive=True), process]:
        member.kill()
    server.process.wait(10)


def test_a_detection_killed_mid_way_fails_and_leaves_nothing(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    golden_id, lead, reviewer = _setup(engine, tmp_path)
    first = LiveServer(database_url, tmp_path, secret=TEST_SECRET, env=ENV, log_name="1.log")
    try:
        with httpx.Client(base_url=first.url, headers=lead, timeout=30) as http:
            job = _detect(http, golden_id)
            # running, its progress written by the process's heartbeat
            running = _wait(
                "the job running with its progress",
                lambda: (j := _job(http, job["id"]))["state"] == "running" and j["step"] and j,
            )
            assert running["started_at"] is not None
            assert running["total"] >= running["done"] >= 0
    finally:
        _kill_hard(first)
    second = LiveServer(database_url, tmp_path, secret=TEST_SECRET, env=ENV, log_name="2.log")
    try:
        with httpx.Client(base_url=second.url, headers=lead, timeout=30) as http:
            failed = _wait(
                "the killed job failed",
                lambda: (j := _job(http, job["id"]))["state"] != "running" and j,
                seconds=60,
            )
            assert failed["state"] == "failed", failed
            assert "stopped (killed or restarted)" in failed["error"]
            assert failed["finished_at"] is not None
            assert failed["result"] is None
            assert _stored(engine, golden_id) == (0, 0)
            # a reviewer sees the job, may not cancel it; an ended job cannot be cancelled
            with httpx.Client(base_url=second.url, headers=reviewer, timeout=30) as other:
                assert other.get(f"/api/v1/jobs/{job['id']}").status_code == 200
                assert other.post(f"/api/v1/jobs/{job['id']}/cancel").status_code == 403
            ended = http.post(f"/api/v1/jobs/{job['id']}/cancel")
            assert (ended.status_code, ended.json()["error"]["code"]) == (409, "job_ended")
            assert http.get("/api/v1/jobs/999999").status_code == 404

            # the next one succeeds
            again = _detect(http, golden_id)
            done = _wait(
                "the second detection done",
                lambda: (j := _job(http, again["id"]))["state"] in ("done", "failed") and j,
            )
            assert done["state"] == "done", done
            run_id = done["result"]["detector_run_id"]
            run = http.get(f"/api/v1/detector-runs/{run_id}")
            assert run.status_code == 200
            assert run.json()["pairs"] > 0
            assert _stored(engine, golden_id) == (1, run.json()["pairs"])
            # applied, as a job too: the clusters live once it is done
            applying = http.post(f"/api/v1/detector-runs/{run_id}/apply", json={"threshold": 0.8})
            assert applying.status_code == 202, applying.text
            assert applying.json()["kind"] == "apply"
            applied = _wait(
                "the apply done",
                lambda: (
                    (j := _job(http, applying.json()["id"]))["state"] in ("done", "failed") and j
                ),
            )
            assert applied["state"] == "done", applied
            assert applied["step"] == "measuring the runs again"
            shown = http.get(f"/api/v1/detector-runs/{run_id}").json()
            assert (shown["state"], shown["threshold"]) == ("applied", 0.8)
            assert shown["clusters"] > 0
    finally:
        second.stop()


def test_a_cancelled_detection_stops_and_keeps_nothing(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    golden_id, lead, _ = _setup(engine, tmp_path)
    server = LiveServer(database_url, tmp_path, secret=TEST_SECRET, env=ENV)
    try:
        with httpx.Client(base_url=server.url, headers=lead, timeout=30) as http:
            job = _detect(http, golden_id)
            _wait("the job running", lambda: _job(http, job["id"])["state"] == "running")
            asked = http.post(f"/api/v1/jobs/{job['id']}/cancel")
            assert asked.status_code == 200, asked.text
            assert asked.json()["cancel_requested"] is True
            ended = _wait(
                "the cancelled job ended",
                lambda: (j := _job(http, job["id"]))["state"] != "running" and j,
            )
            assert ended["state"] == "cancelled", ended
            assert _stored(engine, golden_id) == (0, 0)
            # a queued job is cancelled at once
            queued = _detect(http, golden_id)
            at_once = http.post(f"/api/v1/jobs/{queued['id']}/cancel")
            if at_once.status_code == 200 and at_once.json()["state"] == "cancelled":
                assert at_once.json()["finished_at"] is not None
            final = _wait(
                "the second job ended",
                lambda: (j := _job(http, queued["id"]))["state"] not in ("queued", "running") and j,
            )
            assert final["state"] == "cancelled", final
    finally:
        server.stop()
