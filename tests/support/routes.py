"""The app's routes as the route-walking tests see them, and the review actions' forms."""

from __future__ import annotations

import re

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

REVIEW_ACTIONS = {
    "review_label",
    "review_skip",
    "review_undo",
    "review_renew",
    "review_claim",
    "review_take_back",
}


REVIEW_FORM = {"miss_id": "1", "version": "1", "category": "not-indexed", "reason": "r"}


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "1", path)


class Route:
    def __init__(self, path: str, route: APIRoute) -> None:
        self.path, self.name, self.methods = path, route.name, set(route.methods)
        self.route = route


def routes(client: TestClient) -> list[Route]:
    """Every API and page route with its full path. FastAPI >= 0.16x keeps included routers
    as lazy ``_IncludedRouter`` entries; older versions flatten them into ``APIRoute``s."""
    found: list[Route] = []
    for entry in client.app.routes:  # type: ignore[attr-defined]
        if isinstance(entry, APIRoute):
            found.append(Route(entry.path, entry))
        elif hasattr(entry, "effective_route_contexts"):
            for context in entry.effective_route_contexts():
                if isinstance(context.original_route, APIRoute):
                    found.append(Route(context.path, context.original_route))
    assert len(found) > 20
    return found
