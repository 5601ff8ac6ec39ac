"""Double review through the JSON API and the review page: overlap on a new triage, blind
labels, the adjudication queue, and the final counts of the triage."""

from __future__ import annotations

from pathlib import Path

from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.clock import FrozenClock
from app.models import Role
from app.services.accounts import users
from tests.support.hints import import_hint_fixture
from tests.support.service import HTMX, PASSWORD, Account, login
from tests.support.triage import make_triage

TWO = {"reviewers": 2, "fraction": 1.0, "seed": 0}


def _second_reviewer(engine: Engine) -> tuple[int, dict[str, str]]:
    with Session(engine, expire_on_commit=False) as session:
        user = users.create_user(
            session=session, email="second@example.com", password=PASSWORD, role=Role.REVIEWER
        )
        token = users.create_token(session=session, user=user, name="t").secret
    assert user.id is not None
    return user.id, {"Authorization": f"Bearer {token}"}


def test_overlap_blind_labels_and_adjudication(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, run, _ = make_triage(engine, tmp_path, queries=1, per_query=1)
    client.app.state.clock = FrozenClock()  # type: ignore[attr-defined]
    lead, admin = accounts[Role.LEAD].headers, accounts[Role.ADMIN].headers
    ann = accounts[Role.REVIEWER].headers
    bob_id, bob = _second_reviewer(engine)

    for bad in ({"reviewers": 4}, {"reviewers": 2, "fraction": 1.5}, {"seed": -1}):
        refused = client.post(
            f"/api/v1/runs/{run.id}/triages", headers=lead, json={"depth": 20, "overlap": bad}
        )
        assert refused.status_code == 422, bad
    made = client.post(
        f"/api/v1/runs/{run.id}/triages", headers=lead, json={"depth": 20, "overlap": TWO}
    )
    assert made.status_code == 201
    assert made.json()["overlap"] == TWO
    base = f"/api/v1/triages/{made.json()['id']}"

    first = client.post(f"{base}/claim", headers=ann).json()
    second = client.post(f"{base}/claim", headers=bob).json()
    assert first["id"] == second["id"]
    assert (first["reviewers"], second["lease_holder"]) == (2, bob_id)
    url = f"/api/v1/misses/{first['id']}"
    said = client.post(
        f"{url}/label", headers=ann, json={"category": "cant-tell", "note": "no idea", "version": 1}
    )
    assert said.status_code == 200
    # Blind: Bob sees no label in the miss and none of Ann's events.
    (listed,) = client.get(f"{base}/misses", headers=bob).json()["items"]
    assert (listed["state"], listed["category"], listed["note"]) == ("open", None, "")
    assert client.get(f"{url}/events", headers=bob).json() == {"items": [], "total": 0}
    # nor does anyone else while the labels are coming in, a lead included: anyone who
    # reads a blind label could review the miss next
    assert client.get(f"{url}/events", headers=lead).json() == {"items": [], "total": 0}
    assert client.get(f"{url}/events", headers=ann).json()["total"] == 1  # her own
    twice = client.post(f"{url}/label", headers=ann, json={"category": "not-indexed", "version": 1})
    # a repeat answers as every repeat does, with her own label as it stands
    assert (twice.status_code, twice.json()["error"]["code"]) == (409, "stale_version")
    assert twice.json()["error"]["details"]["current"]["category"] == "cant-tell"

    out = client.post(f"{url}/label", headers=bob, json={"category": "not-indexed", "version": 1})
    assert (out.json()["state"], out.json()["version"]) == ("disputed", 2)
    summary = client.get(base, headers=ann).json()
    assert (summary["adjudication"], summary["unlabelled"], summary["closes"]) == (1, 1, False)

    # Adjudication: leads, or reviewers with the flag (an admin sets it).
    denied = client.post(f"{base}/adjudication/claim", headers=ann)
    assert (denied.status_code, denied.json()["error"]["code"]) == (403, "adjudicator_required")
    flagged = client.patch(
        f"/api/v1/users/{bob_id}", headers=admin, json={"adjudicator": True}
    ).json()
    assert flagged["adjudicator"] is True
    case = client.post(f"{base}/adjudication/claim", headers=bob)
    assert case.status_code == 200
    assert [(x["category"], x["note"]) for x in case.json()["labels"]] == [
        ("cant-tell", "no idea"),
        ("not-indexed", ""),
    ]
    assert client.post(f"{base}/adjudication/claim", headers=lead).status_code == 204
    refused_to_ann = client.post(
        f"{url}/adjudicate", headers=ann, json={"category": "not-indexed", "version": 2}
    )
    assert (refused_to_ann.status_code, refused_to_ann.json()["error"]["code"]) == (
        403,
        "adjudicator_required",
    )
    stale = client.post(
        f"{url}/adjudicate", headers=bob, json={"category": "not-indexed", "version": 1}
    )
    assert (stale.status_code, stale.json()["error"]["code"]) == (409, "stale_version")
    done = client.post(
        f"{url}/adjudicate",
        headers=bob,
        json={"category": "not-indexed", "note": "absent from the manifest", "version": 2},
    )
    assert done.status_code == 200
    assert (done.json()["state"], done.json()["category"], done.json()["version"]) == (
        "labelled",
        "not-indexed",
        3,
    )
    summary = client.get(base, headers=ann).json()
    assert summary["final"] == {"single": 0, "agreed": 0, "adjudicated": 1}
    assert summary["closes"] is True
    # "can't tell" is no label for the statistics: nothing to agree or disagree on
    assert summary["closure"] == (
        "1 + 0 + 0 = 1 of 1 miss accounted for: the categories close; 1 adjudicated; "
        "Fleiss' kappa n/a (no unit has labels from two reviewers)"
    )
    backlog = client.get(f"{base}/backlog?format=json", headers=ann).json()
    assert (backlog["final"], backlog["adjudication"]) == (summary["final"], 0)
    assert backlog["closure"] == summary["closure"]
    # Resolved: everyone may read the whole trail now.
    actions = [e["action"] for e in client.get(f"{url}/events", headers=ann).json()["items"]]
    assert actions == ["review", "conflict", "review", "dispute", "conflict", "adjudicate"]


def test_the_review_page_hides_earlier_labels_from_overlap_reviewers(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    """An earlier triage's label is a suggestion on the review card, except where several
    reviewers label the miss blind; there the card offers "can't tell" instead."""
    _, run, earlier = make_triage(engine, tmp_path, queries=1, per_query=1)
    lead = accounts[Role.LEAD].headers
    miss = client.post(f"/api/v1/triages/{earlier.id}/claim", headers=lead).json()
    labelled = client.post(
        f"/api/v1/misses/{miss['id']}/label",
        headers=lead,
        json={"category": "chunk-boundary", "version": 1},
    )
    assert labelled.status_code == 200
    single = client.post(f"/api/v1/runs/{run.id}/triages", headers=lead, json={"depth": 20})
    double = client.post(
        f"/api/v1/runs/{run.id}/triages", headers=lead, json={"depth": 30, "overlap": TWO}
    )
    login(client, accounts[Role.REVIEWER].email)
    cards = {}
    for name, made in (("single", single), ("double", double)):
        response = client.post(f"/triages/{made.json()['id']}/review/claim", headers=HTMX)
        assert response.status_code == 200
        cards[name] = BeautifulSoup(response.text, "html.parser")
    suggestion = cards["single"].find(id="suggestion")
    assert suggestion is not None
    assert suggestion.select_one('[data-term="chunk-boundary"]') is not None
    assert "Chunk boundary" in suggestion.get_text()
    assert cards["single"].find(id="cant-tell") is None
    assert cards["double"].find(id="suggestion") is None
    cant_tell = cards["double"].find(id="cant-tell")
    assert cant_tell is not None
    assert (cant_tell["value"], cant_tell["data-key"]) == ("cant-tell", "c")


def test_a_reviewer_takes_back_their_own_overlap_label_until_the_miss_is_resolved(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, run, _ = make_triage(engine, tmp_path, queries=1, per_query=1)
    lead, ann = accounts[Role.LEAD].headers, accounts[Role.REVIEWER].headers
    _, bob = _second_reviewer(engine)
    made = client.post(
        f"/api/v1/runs/{run.id}/triages", headers=lead, json={"depth": 20, "overlap": TWO}
    ).json()
    base = f"/api/v1/triages/{made['id']}"
    miss = client.post(f"{base}/claim", headers=ann).json()
    url = f"/api/v1/misses/{miss['id']}"
    said = client.post(f"{url}/label", headers=ann, json={"category": "other", "note": "x",
                                                          "version": 1})  # fmt: skip
    assert said.status_code == 200
    undone = client.post(f"{base}/undo", headers=ann)
    assert undone.status_code == 200, undone.text
    # the label is gone and the miss is leased to ann again, unchanged otherwise (blind)
    assert (undone.json()["state"], undone.json()["category"], undone.json()["version"]) == (
        "open",
        None,
        1,
    )
    assert undone.json()["lease_holder"] == miss["lease_holder"]
    actions = [e["action"] for e in client.get(f"{url}/events", headers=ann).json()["items"]]
    assert actions[-2:] == ["review", "undo"]
    # ann labels again, differently; bob agrees: the miss is resolved, nothing left to undo
    again = client.post(f"{url}/label", headers=ann, json={"category": "not-indexed",
                                                           "version": 1})  # fmt: skip
    assert again.status_code == 200
    assert client.post(f"{base}/claim", headers=bob).json()["id"] == miss["id"]
    agreed = client.post(f"{url}/label", headers=bob, json={"category": "not-indexed",
                                                            "version": 1})  # fmt: skip
    assert (agreed.json()["state"], agreed.json()["category"]) == ("labelled", "not-indexed")
    late = client.post(f"{base}/undo", headers=ann)
    assert (late.status_code, late.json()["error"]["code"]) == (404, "nothing_to_undo")


def test_the_dashboard_lists_each_reviewers_lease_on_an_overlap_miss(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, run, _ = make_triage(engine, tmp_path, queries=1, per_query=1)
    lead, ann = accounts[Role.LEAD].headers, accounts[Role.REVIEWER].headers
    _, bob = _second_reviewer(engine)
    made = client.post(
        f"/api/v1/runs/{run.id}/triages", headers=lead, json={"depth": 20, "overlap": TWO}
    ).json()
    for reviewer in (ann, bob):
        assert client.post(f"/api/v1/triages/{made['id']}/claim", headers=reviewer).status_code
    login(client, accounts[Role.LEAD].email)
    page = BeautifulSoup(client.get(f"/triages/{made['id']}").text, "html.parser")
    holders = sorted(row.find_all("td")[1].get_text() for row in page.select("#leases tbody tr"))
    assert holders == sorted([accounts[Role.REVIEWER].email, "second@example.com"])


def test_a_covered_miss_under_double_review_stays_on_the_queue(
    client: TestClient, accounts: dict[Role, Account], tmp_path: Path
) -> None:
    lead, ann = accounts[Role.LEAD].headers, accounts[Role.REVIEWER].headers
    ids = import_hint_fixture(client, lead, tmp_path)
    made = client.post(
        f"/api/v1/runs/{ids['run']}/triages", headers=lead, json={"depth": 3, "k": 1,
                                                                 "overlap": TWO},
    ).json()  # fmt: skip
    base = f"/api/v1/triages/{made['id']}"
    assert client.post(f"{base}/covered", headers=lead, json={"include": True}).json()["moved"] == 1
    # ann labels every miss, the covered one included: each waits for a second reviewer
    while (claimed := client.post(f"{base}/claim", headers=ann)).status_code == 200:
        miss = claimed.json()
        said = client.post(
            f"/api/v1/misses/{miss['id']}/label",
            headers=ann,
            json={"category": "other", "note": "n", "version": miss["version"]},
        )
        assert said.status_code == 200  # fmt: skip
    took_off = client.post(f"{base}/covered", headers=lead, json={"include": False}).json()
    assert took_off["moved"] == 0  # its double review is under way: ann's label is kept
    covered = [
        m for m in client.get(f"{base}/misses", headers=lead).json()["items"] if m["covered_by"]
    ]
    assert [m["state"] for m in covered] == ["open"]
