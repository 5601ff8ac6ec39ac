"""Checks that belong to the miss, on both databases: a label, a decision and a relabel are
checked against the miss's own triage and golden set (never the triage a page's URL names);
the causes are frozen by the first label of any kind, under a lock a racing label respects;
nobody reads a blind label of a miss they are reviewing, an adjudicator included."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import httpx
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.models import LabelEvent, Miss, Role
from app.models.triage_public import Overlap
from app.services.accounts import users
from app.services.imports import golden_sets
from tests.support.live import LiveServer
from tests.support.service import HTMX, TEST_SECRET, Account, login
from tests.support.triage import make_people, make_triage

NEW_CAUSES = ["stale-index", "synonyms"]


def _events(engine: Engine, miss_id: int) -> list[str]:
    with Session(engine) as s:
        return list(
            s.exec(
                select(LabelEvent.action)
                .where(LabelEvent.miss_id == miss_id)
                .order_by(col(LabelEvent.id))
            ).all()
        )


def _miss(engine: Engine, miss_id: int) -> Miss:
    with Session(engine) as s:
        found = s.get(Miss, miss_id)
        assert found is not None
        return found


def test_a_label_posted_in_another_triage_is_refused(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    """The review page of triage B answers 404 for a miss of triage A, whatever cause the
    form names (here one of B's golden set that A's does not have), and writes nothing."""
    _, _, first = make_triage(engine, tmp_path, queries=1, per_query=2, name="a")
    golden_b, _, second = make_triage(engine, tmp_path, queries=1, per_query=2, name="b")
    with Session(engine, expire_on_commit=False) as s:
        golden_sets.set_causes(session=s, golden=golden_b, causes=NEW_CAUSES)
    login(client, accounts[Role.LEAD].email)
    card = client.post(f"/triages/{first.id}/review/claim", headers=HTMX)
    miss_id = int(BeautifulSoup(card.text, "html.parser").select_one(".card")["data-miss"])
    for url in (f"/triages/{second.id}/review/label", f"/triages/{second.id}/adjudication/decide"):
        answer = client.post(
            url,
            headers=HTMX,
            data={"miss_id": miss_id, "version": 1, "category": NEW_CAUSES[0]},
        )
        assert (answer.status_code, answer.headers["x-error-code"]) == (404, "miss_not_found")
    # a skip, and a lead's release of the lease, through the other triage's pages alike
    skipped = client.post(
        f"/triages/{second.id}/review/skip", headers=HTMX, data={"miss_id": miss_id, "reason": "r"}
    )
    assert (skipped.status_code, skipped.headers["x-error-code"]) == (404, "miss_not_found")
    released = client.post(
        f"/triages/{second.id}/leases/{miss_id}/release", headers=HTMX, follow_redirects=False
    )
    assert (released.status_code, released.headers["x-error-code"]) == (404, "miss_not_found")
    held = _miss(engine, miss_id)
    assert (held.state, held.category, held.version) == ("open", None, 1)
    assert held.lease_holder_id is not None  # still the lead's
    assert _events(engine, miss_id) == []
    # in its own triage the same form is checked against its own golden set's causes
    wrong = client.post(
        f"/triages/{first.id}/review/label",
        headers=HTMX,
        data={"miss_id": miss_id, "version": 1, "category": NEW_CAUSES[0]},
    )
    assert (wrong.status_code, wrong.headers["x-error-code"]) == (422, "unknown_category")
    assert _events(engine, miss_id) == []


def test_the_first_blind_label_freezes_the_causes(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    golden, _, triage = make_triage(
        engine, tmp_path, queries=1, per_query=1, overlap=Overlap(reviewers=2)
    )
    reviewer, lead = accounts[Role.REVIEWER].headers, accounts[Role.LEAD].headers
    miss = client.post(f"/api/v1/triages/{triage.id}/claim", headers=reviewer).json()
    said = client.post(
        f"/api/v1/misses/{miss['id']}/label",
        headers=reviewer,
        json={"category": "not-indexed", "version": miss["version"]},
    )
    assert said.status_code == 200
    assert said.json()["category"] is None  # blind: no final label yet
    changed = client.put(
        f"/api/v1/golden-sets/{golden.id}/causes", headers=lead, json={"causes": NEW_CAUSES}
    )
    assert (changed.status_code, changed.json()["error"]["code"]) == (409, "labelling_started")


def _hold_a_change_of_causes(engine: Engine, database_url: str, golden_id: int) -> object:
    """A change of the golden set's causes, written and not yet committed (its connection,
    to commit later): what a ``PUT .../causes`` in flight holds."""
    if database_url.startswith("sqlite"):
        raw = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
        raw.execute("BEGIN IMMEDIATE")
        raw.execute(
            "UPDATE golden_set SET causes = ? WHERE id = ?", (f'["{NEW_CAUSES[0]}"]', golden_id)
        )
        return raw
    conn = engine.connect()
    conn.execute(
        text("UPDATE golden_set SET causes = CAST(:c AS json) WHERE id = :g"),
        {"c": f'["{NEW_CAUSES[0]}"]', "g": golden_id},
    )
    return conn


def _waiting_on_a_lock(engine: Engine, database_url: str) -> bool:
    if database_url.startswith("sqlite"):
        time.sleep(1.0)  # SQLite: the label's BEGIN IMMEDIATE waits in the busy handler
        return True
    with engine.connect() as probe:
        return bool(
            probe.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND query LIKE '%causes_frozen%'"
                )
            ).scalar()
        )


def test_a_first_label_racing_a_change_of_causes_waits_and_is_checked_after_it(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    golden, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1)
    people = make_people(engine, ("ann", Role.REVIEWER))
    assert golden.id is not None
    server = LiveServer(database_url, tmp_path, secret=TEST_SECRET)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            login_headers = {"Origin": server.url}
            http.post(
                "/login",
                data={"email": people["ann"].email, "password": "long enough", "next": "/"},
                headers=login_headers,
            )
            card = http.post(
                f"/triages/{triage.id}/review/claim",
                headers={"HX-Request": "true", **login_headers},
            )
            miss_id = int(BeautifulSoup(card.text, "html.parser").select_one(".card")["data-miss"])
            held = _hold_a_change_of_causes(engine, database_url, golden.id)
            answers: list[httpx.Response] = []
            label = threading.Thread(
                target=lambda: answers.append(
                    http.post(
                        f"/triages/{triage.id}/review/label",
                        headers={"HX-Request": "true", **login_headers},
                        data={"miss_id": miss_id, "version": 1, "category": "not-indexed"},
                    )
                )
            )
            label.start()
            deadline = time.monotonic() + 20
            while not _waiting_on_a_lock(engine, database_url):
                assert time.monotonic() < deadline, "the label never waited for the change"
                time.sleep(0.05)
            held.commit()  # type: ignore[attr-defined]
            held.close()  # type: ignore[attr-defined]
            label.join(30)
    finally:
        server.stop()
    (answer,) = answers
    # checked against the causes as the change left them: "not-indexed" is gone
    assert (answer.status_code, answer.headers["x-error-code"]) == (422, "unknown_category")
    stored = _miss(engine, miss_id)
    assert (stored.state, stored.category) == ("open", None)
    with Session(engine) as s:
        assert s.get(type(golden), golden.id).causes == [NEW_CAUSES[0]]  # type: ignore[union-attr]


def test_an_adjudicator_reviewing_a_miss_reads_no_blind_label(
    engine: Engine, tmp_path: Path, client: TestClient
) -> None:
    _, _, triage = make_triage(
        engine, tmp_path, queries=1, per_query=1, overlap=Overlap(reviewers=2), corpus=True
    )
    people = make_people(engine, ("ann", Role.REVIEWER), ("adj", Role.REVIEWER), ("lea", Role.LEAD))
    tokens = {}
    with Session(engine, expire_on_commit=False) as s:
        for name, user in people.items():
            secret = users.create_token(session=s, user=user, name="t").secret
            tokens[name] = {"Authorization": f"Bearer {secret}"}
    base = f"/api/v1/triages/{triage.id}"
    miss = client.post(f"{base}/claim", headers=tokens["ann"]).json()
    said = client.post(
        f"/api/v1/misses/{miss['id']}/label",
        headers=tokens["ann"],
        json={"category": "vocabulary-mismatch", "note": "ann-secret-note", "version": 1},
    )
    assert said.status_code == 200
    theirs = client.post(f"{base}/claim", headers=tokens["adj"]).json()
    assert theirs["id"] == miss["id"]  # the adjudicator is its second reviewer
    for name in ("adj", "lea"):
        trail = client.get(f"/api/v1/misses/{miss['id']}/events", headers=tokens[name]).json()
        assert trail == {"items": [], "total": 0}, name
    pages = TestClient(client.app, base_url="http://testserver")
    login(pages, people["adj"].email, password="long enough")
    page = pages.get(f"/misses/{miss['id']}")
    assert page.status_code == 200
    assert "ann-secret-note" not in page.text
    soup = BeautifulSoup(page.text, "html.parser")
    assert soup.select("#events td[data-action]") == []
    assert soup.select_one("#blind") is not None  # the page says why the trail is short
    assert soup.select_one("#state").get_text(strip=True) == "Unlabelled"  # type: ignore[union-attr]
    card = pages.get(f"/triages/{triage.id}/review")
    assert card.status_code == 200
    assert "ann-secret-note" not in card.text
