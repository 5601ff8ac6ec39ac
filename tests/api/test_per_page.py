"""``per_page`` is honoured on every list: each API list and each paged page answers that
many rows (1..1000), pages together give the whole list, and a value out of range is a 422
for the API and a page that says so, never a silent change."""

from __future__ import annotations

from typing import Any

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app.models import Role
from tests.support.payloads import Seeded, seed
from tests.support.service import Account, login


@pytest.fixture
def seeded(client: TestClient, engine: Engine, accounts: dict[Role, Account]) -> Seeded:
    data = seed(client, engine, accounts[Role.LEAD])
    lead = accounts[Role.LEAD].headers
    # Two more golden sets, so that the list of golden sets has pages too.
    for name in ("second", "third"):
        made = client.post(
            "/api/v1/golden-sets",
            headers=accounts[Role.LEAD].headers,
            data={"name": name},
            files={"qrels": ("q.qrels", "q1 0 d1 1\n")},
        )
        assert made.status_code == 201, made.text
    # A second triage of the first run, so that the run's list of triages has pages.
    made = client.post(
        f"/api/v1/runs/{data.runs[0]}/triages",
        headers=accounts[Role.LEAD].headers,
        json={"depth": 2, "k": 1},
    )
    assert made.status_code in (200, 201), made.text
    # A lead relabels a labelled miss twice, so that its audit trail has pages.
    miss = data.misses[1]
    for category in ("other", "not-indexed"):
        version = client.get(f"/api/v1/triages/{data.triages[0]}/misses", headers=lead).json()
        current = next(m for m in version["items"] if m["id"] == miss)["version"]
        relabelled = client.post(
            f"/api/v1/misses/{miss}/label",
            headers=lead,
            json={"category": category, "note": "relabelled", "version": current},
        )
        assert relabelled.status_code == 200, relabelled.text
    return data


def lists(s: Seeded) -> list[str]:
    run, triage, miss = s.runs[0], s.triages[0], s.misses[1]
    return [
        "/api/v1/golden-sets",
        f"/api/v1/golden-sets/{s.golden}/runs",
        f"/api/v1/runs/{run}/queries",
        f"/api/v1/runs/{run}/triages",
        f"/api/v1/triages/{triage}/misses",
        f"/api/v1/misses/{miss}/events",
        "/api/v1/tokens",
        "/api/v1/users",
    ]


def key(item: dict[str, Any]) -> str:
    return repr(sorted(item.items()))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_every_api_list_honours_per_page(
    client: TestClient, seeded: Seeded, accounts: dict[Role, Account]
) -> None:
    admin = accounts[Role.ADMIN].headers
    lead = accounts[Role.LEAD].headers
    for url in lists(seeded):
        headers = admin if url.endswith("/users") else lead
        everything = client.get(url, params={"per_page": 1000}, headers=headers)
        assert everything.status_code == 200, (url, everything.text)
        total, items = everything.json()["total"], everything.json()["items"]
        assert total == len(items) >= 2, url
        for per_page in (1, 2):
            seen: list[dict[str, Any]] = []
            for page in range(1, total // per_page + 2):
                answer = client.get(
                    url, params={"page": page, "per_page": per_page}, headers=headers
                ).json()
                assert answer["total"] == total
                assert len(answer["items"]) == min(per_page, max(0, total - (page - 1) * per_page))
                seen += answer["items"]
            assert [key(i) for i in seen] == [key(i) for i in items], (url, per_page)
        for bad in (0, 1001, -1):
            refused = client.get(url, params={"per_page": bad}, headers=headers)
            assert refused.status_code == 422, (url, bad)
            assert refused.json()["error"]["code"] == "validation_error"


def rows(client: TestClient, url: str) -> int:
    response = client.get(url)
    assert response.status_code == 200, (url, response.text[:300])
    soup = BeautifulSoup(response.text, "html.parser")
    return len([tr for tr in soup.select("table tbody tr") if not tr.select(".empty")])


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_paged_pages_honour_per_page(
    client: TestClient, seeded: Seeded, accounts: dict[Role, Account]
) -> None:
    login(client, accounts[Role.LEAD].email)
    run, triage = seeded.runs[0], seeded.triages[0]
    for base in (f"/runs/{run}", f"/triages/{triage}/backlog"):
        everything = rows(client, f"{base}?per_page=1000")
        assert everything >= 2, base
        assert rows(client, f"{base}?per_page=1") == 1
        assert rows(client, f"{base}?per_page=2") == 2
        page = client.get(f"{base}?per_page=1")
        soup = BeautifulSoup(page.text, "html.parser")
        # The next link and the filter form keep per_page.
        following = [a["href"] for a in soup.select("#paging a")]
        assert following, base
        assert all("per_page=1&" in str(h) or str(h).endswith("per_page=1") for h in following)
        hidden = soup.select_one('form input[name="per_page"]')
        assert hidden is not None
        assert hidden["value"] == "1"
        assert client.get(f"{base}?per_page=0").status_code in (400, 422)
        assert client.get(f"{base}?per_page=1001").status_code in (400, 422)
