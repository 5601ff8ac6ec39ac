"""Every route of the app needs authentication and the right role, except the public few.

The test walks the app's routes, so a new route without a role check fails here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.routing import Mount

from app.models import Role
from tests.support.routes import REVIEW_ACTIONS, REVIEW_FORM, Route, concrete, routes
from tests.support.service import Account

PUBLIC = {"login_page", "login", "healthz"}


def min_role(route: Route) -> Role | None:
    """The role required by a ``require(...)`` dependency anywhere in the route's tree."""
    stack = [route.route.dependant]
    while stack:
        dependant = stack.pop()
        call: Callable[..., Any] | None = dependant.call
        role = getattr(call, "min_role", None)
        if isinstance(role, Role):
            return role
        stack.extend(dependant.dependencies)
    return None


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_every_route_declares_a_role(client: TestClient) -> None:
    missing = [r.name for r in routes(client) if r.name not in PUBLIC and min_role(r) is None]
    assert missing == []
    mounts = [r for r in client.app.routes if isinstance(r, Mount)]  # type: ignore[attr-defined]
    assert [m.name for m in mounts] == ["static"]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_no_route_answers_without_credentials(client: TestClient) -> None:
    for route in routes(client):
        if route.name in PUBLIC:
            continue
        for method in sorted(route.methods - {"HEAD"}):
            response = client.request(
                method,
                concrete(route.path),
                follow_redirects=False,
                data=REVIEW_FORM if route.name in REVIEW_ACTIONS else None,
                headers={"Origin": "http://testserver"},
            )
            where = f"{method} {route.path}"
            if route.path.startswith("/api/") or route.name == "openapi":
                assert response.status_code == 401, where
                assert response.json()["error"]["code"] == "not_authenticated", where
            elif route.name in REVIEW_ACTIONS:
                # Review actions answer in their own words: nothing saved, log in again.
                assert response.status_code == 401, where
                assert response.headers["x-error-code"] == "session_expired", where
            else:
                assert response.status_code == 303, where
                # a page comes back after the login; a form's answer cannot: the home page
                path = concrete(route.path)
                back = f"/login?next={path}" if method == "GET" and path != "/" else "/login"
                assert response.headers["location"] == back, where


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_no_route_answers_to_a_lower_role(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    checked = 0
    for route in routes(client):
        needed = min_role(route)
        if needed is None or needed is Role.REVIEWER:
            continue
        lower = [r for r in Role if not r.allows(needed)]
        for role in lower:
            for method in sorted(route.methods - {"HEAD"}):
                response = client.request(
                    method,
                    concrete(route.path),
                    headers=accounts[role].headers,
                    follow_redirects=False,
                )
                assert response.status_code == 403, f"{role} {method} {route.path}"
                checked += 1
    assert checked > 10


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_bad_tokens_are_refused(client: TestClient, accounts: dict[Role, Account]) -> None:
    for header in ["Bearer nope", "Basic abc", "Bearer ", "Token x"]:
        response = client.get("/api/v1/me", headers={"Authorization": header})
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
    assert client.get("/api/v1/me", headers=accounts[Role.LEAD].headers).json()["role"] == "lead"


def test_public_routes_answer(client: TestClient) -> None:
    assert client.get("/healthz").json()["database"] == "up"
    assert client.get("/login").status_code == 200
    assert client.get("/static/vendor/htmx-2.0.11.min.js").status_code == 200
