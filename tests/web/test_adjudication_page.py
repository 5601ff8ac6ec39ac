"""The adjudication page: a disputed miss with the review card's evidence and every label side
by side; keys decide the final cause and bring the next one; refusals say nothing was saved."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.clock import FrozenClock
from app.models import Role, Triage, User
from app.models.triage_public import Overlap
from app.services import queue
from tests.support.service import HTMX, Account, get, login
from tests.support.triage import make_people, make_triage

LEASE = timedelta(minutes=10)
CAUSES = ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _disputed(engine: Engine, tmp_path: Path, disputes: int) -> tuple[Triage, dict[str, User]]:
    """A triage with overlap 2 whose first ``disputes`` misses two reviewers disagreed on."""
    _, _, triage = make_triage(
        engine,
        tmp_path,
        queries=1,
        per_query=disputes,
        corpus=True,
        overlap=Overlap(reviewers=2),
    )
    people = make_people(engine, ("ann", Role.REVIEWER), ("bob", Role.REVIEWER))
    clock = FrozenClock()
    with Session(engine, expire_on_commit=False) as s:
        for _ in range(disputes):
            for name, category in (("ann", "not-indexed"), ("bob", "chunk-boundary")):
                miss = queue.claim(
                    session=s,
                    triage_id=triage.id,
                    user=people[name],
                    now=clock.now(),
                    lease=LEASE,
                )
                assert miss is not None
                queue.label(
                    session=s,
                    miss_id=miss.id,
                    user=people[name],
                    category=category,
                    note=f"{name} thinks so",
                    version=miss.version,
                    now=clock.now(),
                )
    return triage, people


def test_the_page_claims_as_it_loads(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path, mode: str
) -> None:
    triage, _ = _disputed(engine, tmp_path, 1)
    login(client, accounts[Role.LEAD].email)
    dashboard = get(client, f"/triages/{triage.id}", mode)
    link = dashboard.select_one("#adjudicate")
    assert link is not None
    assert link.get_text() == "Adjudicate 1 disputed"
    soup = get(client, f"/triages/{triage.id}/adjudication", mode)
    loading = soup.select_one("#review.loading")
    assert loading is not None
    assert loading["hx-post"] == f"/triages/{triage.id}/adjudication/take"
    assert soup.select_one("#progress b").get_text() == "1"


def test_keys_decide_and_refusals_say_nothing_was_saved(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    triage, _ = _disputed(engine, tmp_path, 2)
    login(client, accounts[Role.LEAD].email)
    taken = client.post(f"/triages/{triage.id}/adjudication/take", headers=HTMX)
    assert taken.status_code == 200
    card = BeautifulSoup(taken.text, "html.parser")
    assert card.find("html") is None
    assert card.select_one("#query-text") is not None  # the review card's evidence
    rows = [[td.get_text() for td in tr.select("td")] for tr in card.select("#labels tbody tr")]
    assert rows == [
        ["ann@example.com", "Not indexed", "ann thinks so"],
        ["bob@example.com", "Chunk boundary", "bob thinks so"],
    ]
    # the causes by their names, the identifiers kept
    assert [td["data-cause"] for td in card.select("#labels td.cause")] == [
        "not-indexed",
        "chunk-boundary",
    ]
    keys = [(b["data-key"], b.get("value")) for b in card.select("#review button[data-key]")]
    assert keys[:4] == [
        ("1", "not-indexed"),
        ("2", "vocabulary-mismatch"),
        ("3", "chunk-boundary"),
        ("o", None),
    ]
    miss_id = card.select_one(".card")["data-miss"]
    decide = f"/triages/{triage.id}/adjudication/decide"
    stale = client.post(
        decide, headers=HTMX, data={"miss_id": miss_id, "version": "1", "category": "not-indexed"}
    )
    assert (stale.status_code, stale.headers["x-error-code"]) == (409, "stale_version")
    again = BeautifulSoup(stale.text, "html.parser")
    assert "was NOT saved" in again.select_one("#message").get_text()
    assert again.select_one(".card")["data-miss"] == miss_id  # still the same miss
    done = client.post(
        decide, headers=HTMX, data={"miss_id": miss_id, "version": "2", "category": "not-indexed"}
    )
    assert done.status_code == 200
    nxt = BeautifulSoup(done.text, "html.parser")
    assert nxt.select_one("#message").get_text().startswith("Decided: q0 / ")
    assert nxt.select_one(".card")["data-miss"] != miss_id
    last = nxt.select_one(".card")["data-miss"]
    finished = client.post(
        decide, headers=HTMX, data={"miss_id": last, "version": "2", "category": "chunk-boundary"}
    )
    assert BeautifulSoup(finished.text, "html.parser").select_one("#empty") is not None
    summary = client.get(f"/api/v1/triages/{triage.id}", headers=accounts[Role.LEAD].headers)
    assert summary.json()["final"] == {"single": 0, "agreed": 0, "adjudicated": 2}


def test_reviewers_without_the_flag_are_refused(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    triage, _ = _disputed(engine, tmp_path, 1)
    login(client, accounts[Role.REVIEWER].email)
    refused = client.get(f"/triages/{triage.id}/adjudication")
    assert refused.status_code == 403
    assert client.get(f"/triages/{triage.id}").status_code == 200
    dashboard = BeautifulSoup(client.get(f"/triages/{triage.id}").text, "html.parser")
    assert dashboard.select_one("#adjudicate") is None
