"""The JSON API fuzzed from its own OpenAPI document (schemathesis): no request, valid or not,
gets a 5xx, and every answer has a documented status and matches its documented schema.

The app runs in-process on the test's database, seeded with a golden set, two runs, a triage
and labels, and is called as an admin with a bearer token. Every operation is fuzzed with the
seeded ids in its path (so deep code runs), with generated ids, and with invalid data. Deletes
go last, so they do not take the seeded data away from the others. Generation is derandomized
and bounded: the same requests every run, in well under a minute.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.main import create_app
from app.models import Role
from app.services import jobs as job_service
from app.settings import Settings
from tests.support.samples import CORPUS, QRELS, QUERIES, RUN
from tests.support.service import Account

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
#: Two copies of one text (and a third, truncated): the detection has pairs to review.
_TEXT = " ".join(f"word{i} filler{i % 7}" for i in range(60))
COPIES = "".join(
    json.dumps({"_id": doc_id, "title": "Copy", "text": text}) + "\n"
    for doc_id, text in (("c1", _TEXT), ("c2", _TEXT), ("c3", _TEXT[: len(_TEXT) * 9 // 10]))
)
#: examples per operation and way of generating (seeded ids, generated ids, invalid data)
EXAMPLES = 10
OFFLINE = "http://127.0.0.1:9"  # the discard port: nothing leaves the machine


@dataclass
class Seeded:
    app: FastAPI
    ids: dict[str, int]
    auth: dict[str, str]


@pytest.fixture
def seeded(settings: Settings, engine: Engine, accounts: dict[Role, Account]) -> Iterator[Seeded]:
    """The app (no webhook deliveries, trackers unreachable and without credentials) and the
    ids of a golden set, a run, a triage, a labelled miss, a spare token and a user."""
    quiet = settings.model_copy(
        update={
            "webhook_poll_seconds": 0,
            "webhook_secret": None,
            "github_token": None,
            "gitlab_token": None,
            "jira_token": None,
            "linear_token": None,
            "github_api_url": OFFLINE,
            "gitlab_api_url": OFFLINE,
            "linear_api_url": OFFLINE,
            "jira_api_url": None,
        }
    )
    app = create_app(quiet, engine)
    admin, lead = accounts[Role.ADMIN], accounts[Role.LEAD]
    with TestClient(app) as client:
        golden = client.post(
            "/api/v1/golden-sets",
            headers=lead.headers,
            data={"name": "fuzz"},
            files={
                "qrels": ("q.qrels", QRELS),
                "queries": ("q.jsonl", QUERIES),
                "corpus": ("c.jsonl", CORPUS + COPIES),
            },
        ).json()["id"]
        runs = [
            client.post(
                f"/api/v1/golden-sets/{golden}/runs",
                headers=lead.headers,
                data={"name": name, "series": "main"},
                files={"run": (f"{name}.trec", RUN)},
            ).json()["id"]
            for name in ("bm25", "dense")
        ]
        triage = client.post(
            f"/api/v1/runs/{runs[0]}/triages", headers=lead.headers, json={"depth": 2, "k": 1}
        ).json()["id"]
        miss = client.post(f"/api/v1/triages/{triage}/claim", headers=lead.headers).json()
        labelled = client.post(
            f"/api/v1/misses/{miss['id']}/label",
            headers=lead.headers,
            json={"category": "not-indexed", "note": "", "version": miss["version"]},
        )
        assert labelled.status_code == 200, labelled.text
        # a detection with a pair on its review queue, one pair judged
        detector = client.post(
            f"/api/v1/golden-sets/{golden}/detector-runs", headers=lead.headers, json={}
        ).json()["id"]
        pair = client.post(f"/api/v1/detector-runs/{detector}/claim", headers=lead.headers).json()
        judged = client.post(
            f"/api/v1/pairs/{pair['id']}/label",
            headers=lead.headers,
            json={"same": True, "version": pair["version"]},
        )
        assert judged.status_code == 200, judged.text
        # a job, cancelled while queued (a detection over a large corpus would make one)
        with Session(engine, expire_on_commit=False) as session:
            job = job_service.create_job(
                session=session,
                kind="detection",
                golden_set_id=golden,
                params={},
                user=None,
                total=0,
                now=datetime.now(UTC),
            )
            assert job.id is not None
            job_service.request_cancel(session=session, job_id=job.id, now=datetime.now(UTC))
        spare = client.post("/api/v1/tokens", headers=admin.headers, json={"name": "spare"})
        lead_id = client.get("/api/v1/me", headers=lead.headers).json()["id"]
    yield Seeded(
        app=app,
        ids={
            "golden_set_id": golden,
            "run_id": runs[1],
            "triage_id": triage,
            "miss_id": miss["id"],
            "detector_run_id": detector,
            "pair_id": pair["id"],
            "job_id": job.id,
            "token_id": spare.json()["id"],
            "user_id": lead_id,
            "name": "main",  # the series both runs belong to
        },
        auth=admin.headers,
    )
    from schemathesis.python import asgi

    asgi.shutdown_lifespans()


def fuzz(strategy: Any, call: Callable[[Any], None]) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def run(case: Any) -> None:
        call(case)

    run()


def order(operation: Any) -> tuple[int, str, str]:
    """Reads first, then writes, then deletes, the golden set (and its runs with it) last."""
    method = operation.method.upper()
    rank = {"GET": 0, "DELETE": 2}.get(method, 1)
    if method == "DELETE" and operation.path.startswith("/api/v1/golden-sets"):
        rank = 3
    return rank, operation.path, method


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_the_api_answers_every_request_as_documented(seeded: Seeded) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", seeded.app, headers=seeded.auth)
    operations = sorted((r.ok() for r in schema.get_all_operations()), key=order)
    assert len(operations) > 25

    failures: list[str] = []

    answered: dict[str, set[int]] = {}

    def call(case: Any) -> None:
        response = case.call_and_validate(headers=seeded.auth, checks=CHECKS)
        key = f"{case.operation.method.upper()} {case.operation.path}"
        answered.setdefault(key, set()).add(response.status_code)

    for operation in operations:
        names = set(re.findall(r"\{(\w+)\}", operation.path))
        fixed = {name: seeded.ids[name] for name in names}
        ways = [("seeded ids", GenerationMode.POSITIVE, fixed)]
        # Generated ids could revoke the very token the fuzzer authenticates with.
        if "token_id" not in names:
            ways.append(("generated ids", GenerationMode.POSITIVE, {}))
        # Invalid data: any parameter or the body made invalid (ids too: a word, not a number).
        if names or operation.query or operation.body:
            ways.append(("invalid data", GenerationMode.NEGATIVE, {}))
        for way, mode, path_parameters in ways:
            strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)
            try:
                fuzz(strategy, call)
            except (Exception, BaseExceptionGroup) as exc:  # one failure hides no other
                failures.append(f"{operation.method.upper()} {operation.path} ({way}): {exc}")
    assert failures == [], "\n\n".join(failures)
    # The seeded ids and the token got the fuzzer past the 401s and 404s, to the real work.
    succeeded = [key for key, statuses in answered.items() if any(s < 300 for s in statuses)]
    assert len(succeeded) >= 20, sorted(answered.items())
    with TestClient(seeded.app) as client:
        assert client.get("/api/v1/me", headers=seeded.auth).status_code == 200
