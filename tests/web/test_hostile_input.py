"""Every route, pages included (they are not in /openapi.json, so the fuzzer never sees them),
answers a 4xx to what broke the JSON API before: a NUL character in any text, and ids and page
numbers beyond the database's integers. Both used to be 500s from the database driver."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app.models import Role
from tests.support.routes import concrete, routes
from tests.support.service import ORIGIN, Account
from tests.support.triage import make_triage

NUL = "a\x00b"
FORM = {
    name: NUL
    for name in (
        "name",
        "description",
        "note",
        "reason",
        "category",
        "causes",
        "webhook_url",
        "target",
        "tracker",
        "email",
        "password",
        "next",
    )
}
QUERY = "?q=a%00b&qid=a%00b&cause=a%00b&category=a%00b&state=a%00b&reviewer=a%00b&sort=a%00b"
HUGE = str(2**64)
NUMBERS = f"?page={HUGE}&per_page={HUGE}&a={HUGE}&b={HUGE}&k={HUGE}&depth={HUGE}&depths={HUGE}"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_nul_characters_and_huge_ids_answer_4xx_on_every_route(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    make_triage(engine, tmp_path, queries=1, per_query=1)
    admin = accounts[Role.ADMIN].headers
    answered: dict[str, list[int]] = {}
    for route in routes(client):
        cases = [
            (concrete(route.path) + QUERY, None),
            (concrete(route.path), FORM),
            (concrete(route.path) + NUMBERS, None),
        ]
        if "{" in route.path:
            cases.append((re.sub(r"\{[^}]+\}", HUGE, route.path), None))
        for method in sorted(route.methods - {"HEAD"}):
            for url, form in cases:
                if method == "DELETE" and url.endswith(NUMBERS):
                    continue  # valid ids: it would delete the data the other routes need
                response = client.request(
                    method, url, data=form, headers={**ORIGIN, **admin}, follow_redirects=False
                )
                answered.setdefault(f"{method} {url}", []).append(response.status_code)
                assert response.status_code < 500, (method, url, form, response.text[:300])
    with_nul = [k for k, v in answered.items() if "%00" in k and 422 in v]
    assert len(with_nul) > 10
    assert client.get("/api/v1/me", headers=admin).status_code == 200
