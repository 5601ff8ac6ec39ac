"""Every route of the triage and queue routers declares its success answer in /openapi.json
(a read model with named fields), so clients and schemathesis can check what it returns. Only
a streamed download and an answer without a body (204) have no JSON schema."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from fastapi.responses import StreamingResponse
from fastapi.routing import APIRoute

from app.api.routes import misses, triages
from app.main import create_app
from app.settings import Settings

ROUTERS = (triages.router, misses.router)
ROUTES = [r for router in ROUTERS for r in router.routes if isinstance(r, APIRoute)]


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    settings = Settings(
        DATABASE_URL="sqlite://",  # type: ignore[call-arg]
        environment="test",
        secret_key="schema-tests-need-no-real-secret-key",
        webhook_poll_seconds=0,
    )
    return create_app(settings).openapi()


def _streams(route: APIRoute) -> bool:
    answer = inspect.signature(route.endpoint).return_annotation
    return answer in (StreamingResponse, "StreamingResponse")


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    name = ref.removeprefix("#/components/schemas/")
    resolved: dict[str, Any] = document["components"]["schemas"][name]
    return resolved


@pytest.mark.parametrize(
    "route", ROUTES, ids=[f"{sorted(r.methods)[0]} {r.path_format}" for r in ROUTES]
)
def test_route_declares_its_success_schema(document: dict[str, Any], route: APIRoute) -> None:
    (method,) = route.methods
    operation = document["paths"][f"/api/v1{route.path_format}"][method.lower()]
    success = {code: r for code, r in operation["responses"].items() if code.startswith("2")}
    assert success, f"{method} {route.path_format} declares no success answer"
    if _streams(route) or set(success) == {"204"}:
        return
    with_body = {code: r for code, r in success.items() if code != "204"}
    for code, answer in with_body.items():
        schema = answer["content"]["application/json"]["schema"]
        where = f"{method} {route.path_format} {code}: {schema}"
        # one read model, or a choice of read models (label?next=1 answers another shape)
        for one in schema.get("anyOf", [schema]):
            model = _resolve(document, one)
            assert model.get("type") == "object", f"{where} is not a read model"
            assert model.get("properties"), f"{where} has no named fields"


def test_the_exempt_routes_are_the_download_and_nothing_else() -> None:
    """A route may skip the schema only by streaming; a new one must declare its model."""
    assert [r.path_format for r in ROUTES if _streams(r)] == ["/triages/{triage_id}/backlog"]
    assert all(r.response_model is not None for r in ROUTES if not _streams(r))


def test_a_miss_answer_has_the_fields_clients_read(document: dict[str, Any]) -> None:
    """API.md's miss: the names clients depend on, and nothing else."""
    miss = document["components"]["schemas"]["MissPublic"]
    assert list(miss["properties"]) == [
        "id",
        "qid",
        "doc_id",
        "grade",
        "rank",
        "state",
        "category",
        "note",
        "version",
        "hint",
        "covered_by",
        "lease_holder",
        "lease_expires_at",
        "reviewers",
        # a carried miss: the triage its label comes from (API.md, carried labels)
        "carried_from",
    ]
