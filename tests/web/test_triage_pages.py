"""The triage dashboard, the backlog and a miss's page, as full pages and fragments."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.clock import FrozenClock
from app.models import Role
from app.models.triage_public import Overlap
from app.services import queue
from tests.support.service import ORIGIN, Account, get, label_some, login
from tests.support.triage import make_people, make_triage


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_dashboard(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path, mode: str
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=2, per_query=2, corpus=True)
    label_some(client, accounts, triage.id)
    login(client, accounts[Role.LEAD].email)
    soup = get(client, f"/triages/{triage.id}", mode)
    assert soup.select_one("#labelled").get_text() == "2 of 4 labelled"
    assert soup.select_one("#closure").get_text() == (
        "0 + 1 + 0 = 1 of 4 misses in named causes: does not close: 1 other, 2 unlabelled"
    )
    bars = {
        tr["data-cause"]: tr.select_one("td.num").get_text() for tr in soup.select("#counts tr")
    }
    assert bars == {
        "not-indexed": "0",
        "vocabulary-mismatch": "1",
        "chunk-boundary": "0",
        "other": "1",
        "unlabelled": "2",
    }
    # one colour per cause, by its place in the golden set's causes; other its own; unlabelled
    # the neutral; the label always shown beside the colour
    colours = {
        tr["data-cause"]: (tr.select_one("svg.bar")["data-cause-color"], tr.th.get_text(strip=True))
        for tr in soup.select("#counts tr")
    }
    assert colours == {
        "not-indexed": ("1", "Not indexed"),
        "vocabulary-mismatch": ("2", "Vocabulary mismatch"),
        "chunk-boundary": ("3", "Chunk boundary"),
        "other": ("other", "Other"),
        "unlabelled": ("unlabelled", "Unlabelled"),
    }
    assert len(soup.select("#residue tbody tr")) == 3
    throughput = [
        [td.get_text() for td in tr.select("td")][:2] for tr in soup.select("#throughput tbody tr")
    ]
    assert throughput == [["reviewer@example.com", "2"]]
    lease = [td.get_text() for td in soup.select("#leases tbody tr td")][:2]
    assert lease[1] == "lead@example.com"
    assert soup.select("#leases form")  # a lead can release it


def test_dashboard_lists_the_overlap_reviewers_leases(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path, mode: str
) -> None:
    """Double review leases a miss to each of its reviewers (their review rows, not the
    miss): the lead sees both, and not the one that expired."""
    _, _, triage = make_triage(
        engine, tmp_path, queries=1, per_query=2, overlap=Overlap(reviewers=2)
    )
    people = make_people(
        engine, ("ann", Role.REVIEWER), ("bob", Role.REVIEWER), ("cy", Role.REVIEWER)
    )
    clock = FrozenClock()
    with Session(engine, expire_on_commit=False) as session:
        held = {}
        for name, lease in (("cy", timedelta(seconds=-1)), ("ann", timedelta(minutes=10))):
            miss = queue.claim(
                session=session,
                triage_id=triage.id,
                user=people[name],
                now=clock.now(),
                lease=lease,
            )
            assert miss is not None
            held[name] = miss.id
        bob = queue.claim(
            session=session,
            triage_id=triage.id,
            user=people["bob"],
            now=clock.now(),
            lease=timedelta(minutes=5),
        )
        assert bob is not None
        assert bob.id == held["ann"]  # cy's lease expired: room for two live ones
    login(client, accounts[Role.LEAD].email)
    soup = get(client, f"/triages/{triage.id}", mode)
    rows = [
        [td.get_text() for td in tr.select("td")][1:2] for tr in soup.select("#leases tbody tr")
    ]
    assert rows == [["bob@example.com"], ["ann@example.com"]]  # the soonest to expire first
    forms = [form["action"] for form in soup.select("#leases form")]
    assert forms == [f"/triages/{triage.id}/leases/{held['ann']}/release"] * 2


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_lead_releases_a_lease(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=3)
    held = label_some(client, accounts, triage.id)[-1]
    login(client, accounts[Role.LEAD].email)
    released = client.post(
        f"/triages/{triage.id}/leases/{held}/release", headers=ORIGIN, follow_redirects=False
    )
    assert released.status_code == 303
    soup = BeautifulSoup(client.get(f"/triages/{triage.id}").text, "html.parser")
    assert soup.select_one("#leases td.empty") is not None
    events = client.get(
        f"/api/v1/misses/{held}/events", headers=accounts[Role.LEAD].headers
    ).json()["items"]
    assert [e["action"] for e in events] == ["release"]


def test_backlog_filters_and_miss_page(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path, mode: str
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=3, per_query=2, corpus=True)
    labelled = label_some(client, accounts, triage.id)
    login(client, accounts[Role.LEAD].email)
    every = get(client, f"/triages/{triage.id}/backlog", mode)
    assert len(every.select("#backlog tbody tr")) == 6
    other = get(client, f"/triages/{triage.id}/backlog?cause=other", mode)
    rows = other.select("#backlog tbody tr")
    assert [r["data-miss"] for r in rows] == [str(labelled[1])]
    assert rows[0].select("td")[4]["data-cause"] == "other"
    assert [td.get_text() for td in rows[0].select("td")][4:7] == [
        "Other",
        "judged wrongly",
        "reviewer@example.com",
    ]
    by_reviewer = get(client, f"/triages/{triage.id}/backlog?reviewer=reviewer@example.com", mode)
    assert len(by_reviewer.select("#backlog tbody tr")) == 2
    open_ = get(client, f"/triages/{triage.id}/backlog?state=open&qid=q2", mode)
    assert len(open_.select("#backlog tbody tr")) == 2

    page = get(client, f"/misses/{labelled[1]}", mode)
    assert page.select_one("#state")["data-term"] == "other"
    assert page.select_one("#state").get_text() == "Other"
    assert [tr.select("td")[2]["data-action"] for tr in page.select("#events tbody tr")] == [
        "label"
    ]
    assert [tr.select("td")[2].get_text() for tr in page.select("#events tbody tr")] == ["Labelled"]
    assert page.select_one("#relabel") is not None


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_lead_relabels_with_audit(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=3)
    miss_id = label_some(client, accounts, triage.id)[1]
    login(client, accounts[Role.LEAD].email)
    response = client.post(
        f"/misses/{miss_id}/relabel",
        headers=ORIGIN,
        follow_redirects=False,
        data={"category": "chunk-boundary", "note": "", "version": "2"},
    )
    assert response.status_code == 303
    stale = client.post(
        f"/misses/{miss_id}/relabel",
        headers=ORIGIN,
        data={"category": "not-indexed", "note": "", "version": "2"},
    )
    assert stale.status_code == 409
    assert stale.headers["x-error-code"] == "stale_version"
    soup = BeautifulSoup(client.get(f"/misses/{miss_id}").text, "html.parser")
    actions = [tr.select("td")[2]["data-action"] for tr in soup.select("#events tbody tr")]
    assert actions == ["label", "relabel", "conflict"]
    assert soup.select_one("#state")["data-term"] == "chunk-boundary"
    assert soup.select_one("#state").get_text() == "Chunk boundary"
    login(client, accounts[Role.REVIEWER].email)
    reviewer_view = BeautifulSoup(client.get(f"/misses/{miss_id}").text, "html.parser")
    assert reviewer_view.select_one("#relabel") is None
