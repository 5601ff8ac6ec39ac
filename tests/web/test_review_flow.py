"""The review flow: opening the page claims nothing (a POST does, as the page loads), skipped
misses can be taken back and are shown with their reasons, the reviewers table counts current
labels and gives a rate only over a meaningful span."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.clock import FrozenClock
from app.models import Miss, Role, Triage
from tests.support.service import ORIGIN, Account, get, login
from tests.support.triage import make_triage

HTMX = {"HX-Request": "true", **ORIGIN}
DASH = "\N{EN DASH}"


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def leases(engine: Engine, triage: Triage) -> list[int | None]:
    with Session(engine) as session:
        rows = session.exec(select(Miss.lease_holder_id).where(Miss.triage_id == triage.id))
        return list(rows.all())


def soup_of(response: object) -> BeautifulSoup:
    return BeautifulSoup(response.text, "html.parser")  # type: ignore[attr-defined]


def test_opening_the_review_page_claims_nothing(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path, mode: str
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=2, per_query=2)
    login(client, accounts[Role.REVIEWER].email)
    soup = get(client, f"/triages/{triage.id}/review", mode)
    # a GET from another site (a link, a prefetch) is the same GET
    client.get(f"/triages/{triage.id}/review", headers={"Sec-Fetch-Site": "cross-site"})
    section = soup.select_one("#review")
    assert section["hx-post"].endswith(f"/triages/{triage.id}/review/claim")
    assert section["hx-trigger"] == "load"
    assert soup.select(".card[data-miss]") == []
    assert soup.select_one("#claiming form")["method"] == "post"  # without JavaScript
    assert leases(engine, triage) == [None] * 4
    # a cross-site POST is refused and claims nothing either
    forged = client.post(
        f"/triages/{triage.id}/review/claim",
        headers={"HX-Request": "true", "Origin": "https://evil.example"},
    )
    assert forged.status_code == 403
    assert leases(engine, triage) == [None] * 4
    # the page's own POST claims one miss, and the page then shows it
    claimed = client.post(f"/triages/{triage.id}/review/claim", headers=HTMX)
    card = soup_of(claimed).select_one(".card[data-miss]")
    assert soup_of(claimed).find("html") is None
    assert sorted(leases(engine, triage), key=str) != [None] * 4
    again = get(client, f"/triages/{triage.id}/review", mode)
    assert again.select_one(".card")["data-miss"] == card["data-miss"]
    assert again.select_one("#review").get("hx-post") is None


def test_claim_without_javascript_goes_back_to_the_page(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=2)
    login(client, accounts[Role.REVIEWER].email)
    response = client.post(
        f"/triages/{triage.id}/review/claim", headers=ORIGIN, follow_redirects=False
    )
    assert response.status_code == 303
    assert response.headers["location"].endswith(f"/triages/{triage.id}/review")
    page = soup_of(client.get(response.headers["location"]))
    held = [m for m in leases(engine, triage) if m is not None]
    assert len(held) == 1
    assert page.select_one(".card")["data-miss"]


def skip_current(client: TestClient, triage: Triage, card: BeautifulSoup, reason: str) -> object:
    miss_id = card.select_one(".card")["data-miss"]
    return client.post(
        f"/triages/{triage.id}/review/skip",
        headers=HTMX,
        data={"miss_id": miss_id, "reason": reason},
    )


def test_a_reviewer_alone_takes_back_what_they_skipped(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path, mode: str
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=2)
    login(client, accounts[Role.REVIEWER].email)
    card = soup_of(client.post(f"/triages/{triage.id}/review/claim", headers=HTMX))
    first = card.select_one(".card")["data-miss"]
    card = soup_of(skip_current(client, triage, card, "judgment looks wrong"))
    second = card.select_one(".card")["data-miss"]
    assert second != first
    empty = soup_of(skip_current(client, triage, card, "cannot <b>read</b> the PDF"))
    assert empty.select_one("#empty") is not None
    offer = empty.select_one("#take-back button")
    assert offer.get_text(" ", strip=True) == "t take back the 2 you skipped"
    # the page shows the same offer when opened again (its claim answers the empty card)
    again = soup_of(client.post(f"/triages/{triage.id}/review/claim", headers=HTMX))
    assert again.select_one("#take-back") is not None

    # the dashboard and the backlog show the skipped misses with their reasons (as text)
    login(client, accounts[Role.LEAD].email)
    dashboard = get(client, f"/triages/{triage.id}", mode)
    rows = {
        tr["data-miss"]: (tr.select("td")[1].get_text(), tr.select_one(".reason").get_text())
        for tr in dashboard.select("#skipped tbody tr")
    }
    assert rows == {
        first: ("reviewer@example.com", "judgment looks wrong"),
        second: ("reviewer@example.com", "cannot <b>read</b> the PDF"),
    }
    backlog = get(client, f"/triages/{triage.id}/backlog?state=skipped", mode)
    shown = {
        tr["data-miss"]: [p.get_text() for p in tr.select(".skip")]
        for tr in backlog.select("#backlog tbody tr")
    }
    assert shown == {
        first: ["reviewer@example.com: judgment looks wrong"],
        second: ["reviewer@example.com: cannot <b>read</b> the PDF"],
    }
    download = client.get(f"/api/v1/triages/{triage.id}/backlog", params={"format": "csv"})
    cells = {
        r["miss_id"]: r["skipped"]
        for r in csv.DictReader(io.StringIO(download.content.decode("utf-8-sig")))
    }
    assert cells[first] == "reviewer@example.com: judgment looks wrong"

    # taking them back puts them on the reviewer's queue again, in queue order
    login(client, accounts[Role.REVIEWER].email)
    taken = soup_of(client.post(f"/triages/{triage.id}/review/take-back", headers=HTMX))
    assert taken.select_one("#message").get_text() == (
        "Took back 2 skipped misses: they are on your queue again."
    )
    assert taken.select_one(".card")["data-miss"] == first
    for expected in (first, second):
        assert taken.select_one(".card")["data-miss"] == expected
        taken = soup_of(
            client.post(
                f"/triages/{triage.id}/review/label",
                headers=HTMX,
                data={"miss_id": expected, "version": "1", "category": "not-indexed"},
            )
        )
    assert taken.select_one("#empty") is not None
    assert taken.select_one("#take-back") is None
    login(client, accounts[Role.LEAD].email)
    assert get(client, f"/triages/{triage.id}", mode).select("#skipped tbody tr[data-miss]") == []


def test_take_back_through_the_api(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1)
    reviewer = accounts[Role.REVIEWER].headers
    base = f"/api/v1/triages/{triage.id}"
    miss = client.post(f"{base}/claim", headers=reviewer).json()
    skipped = client.post(
        f"/api/v1/misses/{miss['id']}/skip", headers=reviewer, json={"reason": "unsure"}
    )
    assert skipped.status_code == 200
    assert client.post(f"{base}/claim", headers=reviewer).status_code == 204
    assert client.post(f"{base}/take-back", headers=reviewer).json() == {"taken_back": 1}
    assert client.post(f"{base}/take-back", headers=reviewer).json() == {"taken_back": 0}
    again = client.post(f"{base}/claim", headers=reviewer)
    assert (again.status_code, again.json()["id"]) == (200, miss["id"])
    # skipping again after taking back is a skip in force again
    client.post(f"/api/v1/misses/{miss['id']}/skip", headers=reviewer, json={"reason": "still"})
    assert client.post(f"{base}/claim", headers=reviewer).status_code == 204


def label(client: TestClient, headers: dict[str, str], triage: Triage) -> dict[str, object]:
    miss = client.post(f"/api/v1/triages/{triage.id}/claim", headers=headers).json()
    answer = client.post(
        f"/api/v1/misses/{miss['id']}/label",
        headers=headers,
        json={"category": "not-indexed", "version": miss["version"]},
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def reviewers_table(client: TestClient, triage: Triage, mode: str) -> dict[str, tuple[str, ...]]:
    soup = get(client, f"/triages/{triage.id}", mode)
    table = {}
    for tr in soup.select("#throughput tbody tr[data-reviewer]"):
        rate = tr.select_one(".rate")
        why = rate.select_one("span")
        table[tr["data-reviewer"]] = (
            tr.select_one(".labels").get_text(),
            rate.get_text(),
            why["title"] if why else "",
        )
    return table


def test_reviewers_table_counts_current_labels_and_rates_a_real_span(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path, mode: str
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=4, per_query=2)
    clock = FrozenClock()
    client.app.state.clock = clock  # type: ignore[attr-defined]
    reviewer, lead = accounts[Role.REVIEWER].headers, accounts[Role.LEAD].headers
    labelled = []
    for _ in range(3):
        labelled.append(label(client, reviewer, triage))
        clock.advance(seconds=30)
    # an undone label and a label a lead relabelled are no longer the reviewer's
    assert client.post(f"/api/v1/triages/{triage.id}/undo", headers=reviewer).status_code == 200
    relabel = client.post(
        f"/api/v1/misses/{labelled[0]['id']}/label",
        headers=lead,
        json={"category": "chunk-boundary", "version": labelled[0]["version"]},
    )
    assert relabel.status_code == 200
    login(client, accounts[Role.LEAD].email)
    table = reviewers_table(client, triage, mode)
    assert table["reviewer@example.com"][:2] == ("1", DASH)
    assert table["lead@example.com"][:2] == ("1", DASH)
    assert table["reviewer@example.com"][2] == (
        "A rate needs at least 5 labels over at least 2 minutes; so far 1 over 0 s."
    )
    # five current labels within a minute: still no rate
    for _ in range(4):
        clock.advance(seconds=10)
        label(client, reviewer, triage)
    table = reviewers_table(client, triage, mode)
    assert table["reviewer@example.com"][:2] == ("5", DASH)
    assert "so far 5 over" in table["reviewer@example.com"][2]
    # the reviewer's current labels: t=30 s, then 100, 110, 120, 130 s (t=0 was relabelled by
    # the lead, t=60 undone); a sixth at t=180 s: 5 intervals over 150 s = 120 labels an hour
    clock.advance(seconds=50)
    label(client, reviewer, triage)
    table = reviewers_table(client, triage, mode)
    assert table["reviewer@example.com"] == ("6", "120", "")
