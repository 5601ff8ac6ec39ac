"""The exporter tests' fixtures: the fake tracker on 127.0.0.1, settings pointing every tracker
at it, and a triage with labelled misses. They allow requests to the local network
(MISSTRIAGE_ALLOW_LOCAL_NETWORK), which is refused by default."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.models import GoldenSet, Role, Run, Triage, User
from app.services.accounts import users
from app.settings import Settings
from tests.support.fake_tracker import JIRA_EMAIL, SECRET, TOKEN, Tracker, serve
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
