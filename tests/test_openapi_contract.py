"""The contract is the code: every /api/v1 operation declares what it takes and what it answers.

A body the handler reads is in the OpenAPI document as a schema with its fields; each success
status answers a JSON schema whose fields are declared (a model, a list of models, a scalar),
never a free-form object (a handler returning ``dict[str, Any]``). Two exceptions, which must say
so in ``responses=``: a status without a body (204) and a file (CSV, JSON lines) streamed in
another media type. schemathesis (tests/api/test_fuzz.py) then checks the answers against these
schemas.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest
from fastapi import APIRouter
from fastapi.routing import APIRoute

import app.api.routes
from app.main import create_app
from app.settings import Settings

JSON = "application/json"
PREFIX = "/api/v1"
#: Fields whose value is any JSON by design, as "Model.field", each with why.
ANY_JSON: dict[str, str] = {
    # A dry run shows the exact request each tracker would get: its own API's body
    # (GitHub, GitLab, Jira, Linear or the webhook's event), not a shape of ours.
    "ExportRequest.body": "the tracker's own request body",
    # What a detector was asked (the MinHash library's parameters, which change with it), or
    # where imported cluster ids came from.
    "DetectorRunPublic.parameters": "a detector's own parameters",
}


def _document() -> dict[str, Any]:
    settings = Settings(
        DATABASE_URL="sqlite://",  # type: ignore[call-arg]
        environment="test",
        secret_key="openapi-contract-test-needs-no-real-secret-key",
        webhook_poll_seconds=0,
    )
    return create_app(settings).openapi()


def _routes() -> list[APIRoute]:
    """The routes of every resource module under app/api/routes (their paths lack /api/v1)."""
    found: list[APIRoute] = []
    for module in pkgutil.iter_modules(app.api.routes.__path__, "app.api.routes."):
        router = getattr(importlib.import_module(module.name), "router", None)
        if isinstance(router, APIRouter):
            found += [r for r in router.routes if isinstance(r, APIRoute) and r.include_in_schema]
    return found


DOCUMENT = _document()
COMPONENTS: dict[str, Any] = DOCUMENT.get("components", {}).get("schemas", {})
OPERATIONS = [
    pytest.param(route, method.lower(), id=f"{method} {PREFIX}{route.path_format}")
    for route in _routes()
    for method in sorted(route.methods)
]


def _operation(route: APIRoute, method: str) -> dict[str, Any]:
    operation: dict[str, Any] = DOCUMENT["paths"][PREFIX + route.path_format][method]
    return operation


def _undeclared(schema: dict[str, Any], where: str, seen: set[str]) -> list[str]:
    """The places in ``schema`` whose shape is not declared: an empty schema, or an object
    without properties whose values are not typed either. Models are followed once each."""
    if where in ANY_JSON:
        return []
    if "$ref" in schema or (len(schema.get("allOf", [])) == 1 and "$ref" in schema["allOf"][0]):
        ref = schema.get("$ref") or schema["allOf"][0]["$ref"]
        name = str(ref).rsplit("/", 1)[-1]
        if name in seen:
            return []
        seen.add(name)
        if name not in COMPONENTS:
            return [f"{where}: no component {name}"]
        # A model's fields are named from the model; anything else keeps the field's path.
        component = COMPONENTS[name]
        return _undeclared(component, name if "properties" in component else where, seen)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return [
                gap
                for part in schema[key]
                if part.get("type") != "null"
                for gap in _undeclared(part, where, seen)
            ]
    if "enum" in schema or "const" in schema:
        return []
    kind = schema.get("type")
    if kind in ("string", "integer", "number", "boolean", "null"):
        return []
    if kind == "array":
        items = schema.get("prefixItems") or [schema.get("items", {})]
        return [gap for item in items for gap in _undeclared(item, f"{where}[]", seen)]
    if kind == "object" and "properties" in schema:
        return [
            gap
            for field, prop in schema["properties"].items()
            for gap in _undeclared(prop, f"{where}.{field}", seen)
        ]
    values = schema.get("additionalProperties")
    if kind == "object" and isinstance(values, dict) and values:
        return _undeclared(values, f"{where}{{}}", seen)
    return [f"{where}: no declared fields ({schema.get('title') or 'an untyped value'})"]


def test_every_documented_operation_is_a_route_checked_here() -> None:
    documented = {
        f"{method.upper()} {path}"
        for path, methods in DOCUMENT["paths"].items()
        if path.startswith(PREFIX + "/")
        for method in methods
    }
    assert len(documented) >= 30
    assert {p.id for p in OPERATIONS} == documented


@pytest.mark.parametrize(("route", "method"), OPERATIONS)
def test_a_body_the_handler_reads_has_a_schema(route: APIRoute, method: str) -> None:
    operation = _operation(route, method)
    if route.body_field is None:
        assert "requestBody" not in operation
        return
    content = operation.get("requestBody", {}).get("content", {})
    assert content, "the handler reads a body the document does not describe"
    for media, body in content.items():
        schema = body.get("schema", {})
        assert _undeclared(schema, media, set()) == []


@pytest.mark.parametrize(("route", "method"), OPERATIONS)
def test_each_success_answers_a_declared_schema(route: APIRoute, method: str) -> None:
    responses = _operation(route, method)["responses"]
    successes = {code: r for code, r in responses.items() if code.startswith("2")}
    assert successes, "no success status is documented"
    gaps: list[str] = []
    for code, response in successes.items():
        content = response.get("content") or {}
        if code == "204":
            assert content == {}, "a 204 has no body"
            continue
        assert content, f"{code}: no media type (a status without a body is a 204)"
        if set(content) - {JSON}:
            # A file streamed in its own media type, documented in ``responses=``.
            continue
        schema = content[JSON].get("schema", {})
        gaps += [f"{code} {gap}" for gap in _undeclared(schema, "answer", set())]
    assert gaps == [], "declare a response_model (a read model) for these answers"
