"""Every JSON route declares what it answers: /openapi.json names a response model for its
success status (so the fields clients depend on are checked, by schemathesis among others),
never a bare object."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from app.api.routes import accounts, golden_sets, runs

PREFIX = "/api/v1"
#: Operations whose answer is the triage's read model, typed with the triage routes.
TRIAGE_MODEL = {("POST", "/runs/{run_id}/triages"), ("GET", "/runs/{run_id}/triages")}


def _operations(module: ModuleType) -> list[tuple[str, str, APIRoute]]:
    return [
        (method, route.path, route)
        for route in module.router.routes
        if isinstance(route, APIRoute)
        for method in sorted(route.methods)
        if (method, route.path) not in TRIAGE_MODEL
    ]


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].removeprefix("#/components/schemas/")
        schema = document["components"]["schemas"][name]
    return schema


@pytest.mark.parametrize("module", [golden_sets, runs, accounts], ids=lambda m: m.__name__)
def test_every_route_declares_its_answer(client: TestClient, module: ModuleType) -> None:
    document = client.app.openapi()  # type: ignore[attr-defined]
    operations = _operations(module)
    assert operations
    for method, path, route in operations:
        responses = document["paths"][PREFIX + path][method.lower()]["responses"]
        success = [code for code in responses if code.startswith("2")]
        assert success == [str(route.status_code or 200)], (method, path, success)
        if route.status_code == 204:  # no content, nothing to describe
            assert "content" not in responses["204"], (method, path)
            continue
        schema = responses[success[0]]["content"]["application/json"]["schema"]
        assert "$ref" in schema, (method, path, schema)  # a named model, not a bare object
        model = _resolve(document, schema)
        assert model["type"] == "object", (method, path)
        assert model["properties"], (method, path)


def test_list_answers_are_pages(client: TestClient) -> None:
    document = client.app.openapi()  # type: ignore[attr-defined]
    listing = document["paths"][PREFIX + "/golden-sets"]["get"]["responses"]["200"]
    page = _resolve(document, listing["content"]["application/json"]["schema"])
    assert set(page["properties"]) == {"items", "total"}
    item = _resolve(document, page["properties"]["items"]["items"])
    created_at = item["properties"]["created_at"]
    assert (created_at["type"], created_at["format"]) == ("string", "date-time")
    assert "password_hash" not in str(document["components"]["schemas"])
    rows = document["paths"][PREFIX + "/runs/{run_id}/queries"]["get"]["responses"]["200"]
    row = _resolve(
        document,
        _resolve(document, rows["content"]["application/json"]["schema"])["properties"]["items"][
            "items"
        ],
    )
    # the measure columns carry k and depth in their names: numbers (or null) under any name
    assert row["additionalProperties"] == {"anyOf": [{"type": "number"}, {"type": "null"}]}
    assert {"qid", "misses", "diagnosis"} <= set(row["properties"])
