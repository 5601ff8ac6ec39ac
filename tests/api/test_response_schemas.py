"""Every JSON route declares what it answers: /openapi.json names a response model for its
success status (so the fields clients depend on are checked, by schemathesis among others),
never a bare object."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from app.api.routes import accounts as account_routes
from app.api.routes import golden_sets, runs
from app.models import Role
from tests.support.service import Account

PREFIX = "/api/v1"


def _operations(module: ModuleType) -> list[tuple[str, str, APIRoute]]:
    return [
        (method, route.path_format, route)
        for route in module.router.routes
        if isinstance(route, APIRoute)
        for method in sorted(route.methods)
    ]


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].removeprefix("#/components/schemas/")
        schema = document["components"]["schemas"][name]
    return schema


@pytest.mark.parametrize("module", [golden_sets, runs, account_routes], ids=lambda m: m.__name__)
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


def test_answers_keep_their_fields_and_timestamps(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    """The read models answer the fields API.md names, times as ``isoformat()`` (+00:00)."""
    admin = accounts[Role.ADMIN].headers
    created = client.post("/api/v1/tokens", json={"name": "ci"}, headers=admin)
    assert created.status_code == 201
    token = created.json()
    assert set(token) == {
        "id",
        "name",
        "prefix",
        "created_at",
        "last_used_at",
        "revoked_at",
        "token",
    }
    assert token["created_at"].endswith("+00:00")
    assert token["token"].startswith(token["prefix"])
    listed = client.get("/api/v1/tokens", headers=admin).json()
    assert listed["total"] == 2
    assert "token" not in listed["items"][1]
    assert listed["items"][1]["created_at"] == token["created_at"]
    me = client.get("/api/v1/me", headers=admin).json()
    assert me == {
        "id": me["id"],
        "email": "admin@example.com",
        "role": "admin",
        "is_active": True,
        "adjudicator": False,
    }
    users = client.get("/api/v1/users", headers=admin).json()
    assert [u["role"] for u in users["items"]] == [r.value for r in Role]
