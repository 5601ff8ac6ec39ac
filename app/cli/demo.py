"""``misstriage demo``: the product in the browser on a fresh machine, with data that shows
its ideas (a recall ceiling, misses of several causes, closure, a run comparison)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

DEMO_NAME = "Quillstack help centre (demo)"
DESCRIPTION = (
    "A help centre written for this demo: 59 articles in 240 chunks, wiki pastes and PDF "
    "exports of some (near-duplicates, found by the detector: detector run 1), three PDF-only "
    "documents the index manifest leaves out, 67 queries with graded judgments. Runs: BM25, "
    "BM25 with query expansion, and an RRF of chunk and whole-article BM25 "
    "(scripts/make_demo_data.py)."
)
LEAD = ("lead@demo.example.com", "demo-lead-pass")
REVIEWER = ("reviewer@demo.example.com", "demo-review-pass")
RUNS = ("bm25", "bm25-expanded", "rrf")
#: The three runs are one configuration's history: three commits of the help centre's search.
SERIES = "helpcentre-search"
COMMITS = {
    "bm25": {"commit": "3f9a2c1", "branch": "main", "message": "BM25 over the chunks"},
    "bm25-expanded": {"commit": "8be41d0", "branch": "main", "message": "query expansion"},
    "rrf": {"commit": "c07d5e9", "branch": "main", "message": "RRF with whole-article BM25"},
}
DEPTH, K = 50, 10
#: The demo's detection: pairs kept down to J 0.3 (0.8 - 0.5: the demo's chunks are short,
#: and an edited paste of 40 words shares few 5-shingles with its article), two per band to
#: review; applied at J 0.35 before anyone reviewed, so the lead calibrates it in the story.
DETECT = {"threshold": 0.8, "near": 0.5, "per_band": 2}
APPLIED = 0.35


def _without_cluster_ids(corpus: Path, folder: Path) -> Path:
    """The demo corpus without its cluster ids (they are the truth the tests hold the
    detector to): the copies are found by the detector, not given."""
    import json

    out = folder / "corpus.jsonl"
    with corpus.open(encoding="utf-8") as source, out.open("w", encoding="utf-8") as sink:
        for line in source:
            if line.strip():
                doc = json.loads(line)
                doc.pop("cluster_id", None)
                sink.write(json.dumps(doc, ensure_ascii=False) + "\n")
    return out


def _data_dir() -> Path:
    from app.migrate import resource_dir

    return resource_dir("examples") / "helpcentre"


def seed(database_url: str, data: Path) -> tuple[int, int]:
    """Create the accounts, import the demo golden set and runs, create the bm25 triage.
    Returns the golden set's and the triage's ids. Safe to call again: what exists is
    reused."""
    import tempfile

    from sqlmodel import Session, select

    from app.clock import utcnow
    from app.db import make_engine
    from app.migrate import upgrade
    from app.models import GoldenSet, Role, Triage, User
    from app.services.accounts import users
    from app.services.dedup import detector_runs
    from app.services.imports import golden_sets, runs
    from app.services.triage import triages
    from app.settings import Settings

    settings = Settings(DATABASE_URL=database_url)
    upgrade(settings)
    engine = make_engine(settings)
    try:
        with Session(engine, expire_on_commit=False) as session:
            for (email, password), role in ((LEAD, Role.LEAD), (REVIEWER, Role.REVIEWER)):
                if session.exec(select(User).where(User.email == email)).first() is None:
                    users.create_user(session=session, email=email, password=password, role=role)
            lead = session.exec(select(User).where(User.email == LEAD[0])).one()
            golden = session.exec(select(GoldenSet).where(GoldenSet.name == DEMO_NAME)).first()
            if golden is None:
                with tempfile.TemporaryDirectory() as folder:
                    golden = golden_sets.import_golden_set(
                        session=session,
                        name=DEMO_NAME,
                        qrels=data / "qrels.tsv",
                        queries=data / "queries.jsonl",
                        corpus=_without_cluster_ids(data / "corpus.jsonl", Path(folder)),
                        manifest=data / "manifest.txt",
                        description=DESCRIPTION,
                        user=lead,
                    )
                for name in RUNS:
                    runs.import_run(
                        session=session,
                        golden=golden,
                        name=name,
                        path=data / "runs" / f"{name}.trec",
                        source_name=f"{name}.trec",
                        series=SERIES,
                        meta=COMMITS[name],
                    )
                found = detector_runs.detect_duplicates(
                    session=session,
                    golden=golden,
                    user=lead,
                    threshold=DETECT["threshold"],
                    near=DETECT["near"],
                    per_band=int(DETECT["per_band"]),
                )
                detector_runs.apply_threshold(
                    session=session,
                    run=found,
                    threshold=APPLIED,
                    user=lead,
                    now=utcnow(),
                )
            listed = runs.list_runs(session=session, golden=golden)
            first = listed[0]
            triage = session.exec(
                select(Triage).where(
                    Triage.run_id == first.id, Triage.depth == DEPTH, Triage.k == K
                )
            ).first()
            if triage is None:
                triage = triages.create_triage(
                    session=session, run=first, golden=golden, depth=DEPTH, k=K, user=None
                )
            _series_history(session, golden, listed, lead)
            assert golden.id is not None
            assert triage.id is not None
            return golden.id, triage.id
    finally:
        engine.dispose()


def _series_history(session: Any, golden: Any, listed: list[Any], lead: Any) -> None:
    """The series' history after commit 1's triage (left for the visitor to label): commit
    2's triage, labelled a week ago by accepting each miss's hint, and commit 3's, which
    carries those labels where commit 3 misses the same pairs. Made once."""
    from datetime import timedelta

    from sqlmodel import col, select

    from app.clock import utcnow
    from app.models import Miss, MissState, Triage
    from app.services import queue
    from app.services.triage import triages

    second, third = listed[1], listed[2]
    made = session.exec(select(Triage).where(Triage.run_id == second.id)).first()
    if made is not None:
        return
    history = triages.create_triage(
        session=session, run=second, golden=golden, depth=DEPTH, k=K, user=lead
    )
    week_ago = utcnow() - timedelta(days=7)
    for miss in session.exec(
        select(Miss)
        .where(Miss.triage_id == history.id, Miss.state == MissState.OPEN.value)
        .order_by(col(Miss.position))
    ).all():
        queue.label(
            session=session,
            miss_id=miss.id,
            user=lead,
            category=miss.hint or "other",
            note="" if miss.hint else "no hint",
            version=miss.version,
            now=week_ago,
        )
    triages.create_triage(session=session, run=third, golden=golden, depth=DEPTH, k=K, user=lead)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--reset", is_flag=True, help="Start again from an empty demo database.")
@click.option(
    "--var",
    "var_dir",
    default="var",
    show_default=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder of the demo database.",
)
def demo(host: str, port: int, reset: bool, var_dir: Path) -> None:
    """Set up the demo (accounts, a golden set, a series of three runs, their triages) and
    serve it."""
    import uvicorn

    var_dir.mkdir(parents=True, exist_ok=True)
    database = (var_dir / "demo.db").resolve()
    if reset:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{database}{suffix}").unlink(missing_ok=True)
    url = f"sqlite:///{database}"
    golden_id, triage_id = seed(url, _data_dir())
    os.environ["DATABASE_URL"] = url
    from app.settings import follow_listening, listening_url

    follow_listening(host, port)  # exported issues and downloads link to this port
    base = listening_url(host, port)
    click.echo(
        f"""
misstriage demo: {database}
  lead      {LEAD[0]}  password {LEAD[1]}
  reviewer  {REVIEWER[0]}  password {REVIEWER[1]}

Click {base}/golden-sets/{golden_id} and log in as the lead (runs, depth curve, run
comparison, the triage dashboard); in a private window, {base}/triages/{triage_id}/review as
the reviewer: keys 1/2/3 label a miss, a accepts the hint.
The three runs are three commits of one configuration: the series page
{base}/golden-sets/{golden_id}/series/{SERIES} shows their history; commit 2's triage
was labelled a week ago and commit 3's carries those labels. `make demo-gate` prints the CI
gate of commit 3 against commit 2.
Stop with Ctrl+C; `misstriage demo --reset` starts again from scratch.
"""
    )
    uvicorn.run("app.main:create_app", factory=True, host=host, port=port, log_level="warning")
