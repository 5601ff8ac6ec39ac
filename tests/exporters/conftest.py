"""The exporter tests' fixtures: the fake tracker on 127.0.0.1, settings pointing every tracker
at it, and a triage with labelled misses. They allow requests to the local network
(MISSTRIAGE_ALLOW_LOCAL_NETWORK), which is refused by default."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.models import OTHER, GoldenSet, Role, Run, Triage, User
from app.services import queue
from app.services.accounts import users
from app.services.imports import golden_sets, runs
from app.services.triage import triages
from app.settings import Settings
from tests.support.fake_tracker import JIRA_EMAIL, SECRET, TOKEN, Tracker, serve
from tests.support.markdown import CAUSES, HOSTILE, ID_PARTS
from tests.support.queue import Desk
from tests.support.service import make_settings
from tests.support.triage import make_triage


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url, allow_local_network=True)


@pytest.fixture
def fake() -> Iterator[tuple[str, Tracker]]:
    yield from serve()


@pytest.fixture
def tracker_settings(settings: Settings, fake: tuple[str, Tracker]) -> Settings:
    base = fake[0]
    return settings.model_copy(
        update={
            "github_api_url": base,
            "github_token": SecretStr(TOKEN),
            "gitlab_api_url": base,
            "gitlab_token": SecretStr(TOKEN),
            "jira_api_url": base,
            "jira_email": JIRA_EMAIL,
            "jira_token": SecretStr(TOKEN),
            "linear_api_url": f"{base}/graphql",
            "linear_token": SecretStr(TOKEN),
            "webhook_secret": SecretStr(SECRET),
            "public_url": "http://misstriage.test",
            # The product's request timeout: a loaded machine can take over a second to answer
            # on loopback. The timeout tests give their Sender a short one of their own.
            "export_timeout_seconds": 10.0,
            "export_max_wait_seconds": 1.0,
        }
    )


@pytest.fixture
def labelled(engine: Engine, tmp_path: Path) -> tuple[GoldenSet, Run, Triage, User]:
    golden, run, triage = make_triage(engine, tmp_path, queries=3, per_query=2, corpus=True)
    with Session(engine, expire_on_commit=False) as s:
        lead = users.create_user(
            session=s, email="lead2@example.com", password="long enough", role=Role.LEAD
        )
    desk = Desk(engine)
    assert triage.id is not None
    for category in ("not-indexed", "vocabulary-mismatch", "vocabulary-mismatch"):
        desk.claim_and_label(lead, triage.id, category)
    return golden, run, triage, lead


@pytest.fixture
def hostile_triage(engine: Engine, tmp_path: Path) -> tuple[GoldenSet, Run, Triage]:
    qids = [f"q{ID_PARTS[i % len(ID_PARTS)]}-{i}" for i in range(len(HOSTILE))]
    docs = [f"{ID_PARTS[(i + 3) % len(ID_PARTS)]}-{i}" for i in range(len(HOSTILE))]
    (tmp_path / "g.qrels").write_text(
        "".join(f"{q} 0 {d} 1\n" for q, d in zip(qids, docs, strict=True))
    )
    (tmp_path / "g.queries.jsonl").write_text(
        "".join(
            json.dumps({"_id": q, "text": t}) + "\n" for q, t in zip(qids, HOSTILE, strict=True)
        )
    )
    (tmp_path / "g.trec").write_text("".join(f"{q} Q0 noise 1 1 t\n" for q in qids))
    with Session(engine, expire_on_commit=False) as s:
        golden = golden_sets.import_golden_set(
            session=s,
            name="golden «ü» @team",
            qrels=tmp_path / "g.qrels",
            queries=tmp_path / "g.queries.jsonl",
        )
        golden = golden_sets.set_causes(session=s, golden=golden, causes=CAUSES)
        run = runs.import_run(
            session=s, golden=golden, name="bm25 #1", path=tmp_path / "g.trec", source_name="r"
        )
        triage = triages.create_triage(session=s, run=run, golden=golden, depth=10, k=1, user=None)
        lead = users.create_user(
            session=s, email="lead3@example.com", password="long enough", role=Role.LEAD
        )
        from datetime import timedelta

        from app.clock import FrozenClock

        now = FrozenClock().now()
        for index, note in enumerate(HOSTILE):
            miss = queue.claim(
                session=s, triage_id=triage.id, user=lead, now=now, lease=timedelta(minutes=5)
            )
            assert miss is not None
            assert miss.id is not None
            queue.label(
                session=s,
                miss_id=miss.id,
                user=lead,
                category=OTHER if index % 2 else CAUSES[1],
                note=note,
                version=miss.version,
                now=now,
            )
    return golden, run, triage
