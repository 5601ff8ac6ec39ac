"""``POST /misses/{id}/label?next=1``: the label and the caller's next claim in one call,
on both databases (the ``client`` fixture runs each test on SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.clock import FrozenClock
from app.models import LabelAction, LabelEvent, Role
from app.models.triage_public import Overlap
from app.services.accounts import users
from tests.support.service import PASSWORD, Account
from tests.support.triage import make_triage


def _uid(engine: Engine, account: Account) -> int:
    with Session(engine) as session:
        return users.get_user_by_email(session=session, email=account.email).id  # type: ignore[return-value]


def _second_reviewer(engine: Engine) -> dict[str, str]:
    with Session(engine, expire_on_commit=False) as session:
        user = users.create_user(
            session=session, email="second@example.com", password=PASSWORD, role=Role.REVIEWER
        )
        token = users.create_token(session=session, user=user, name="t").secret
    return {"Authorization": f"Bearer {token}"}


def _label(
    client: TestClient, headers: dict[str, str], miss: dict[str, Any], category: str = "not-indexed"
) -> Any:
    return client.post(
        f"/api/v1/misses/{miss['id']}/label?next=1",
        headers=headers,
        json={"category": category, "version": miss["version"]},
    )


def test_label_next_walks_the_queue_in_order(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=2, per_query=2)
    client.app.state.clock = FrozenClock()  # type: ignore[attr-defined]
    reviewer = accounts[Role.REVIEWER]
    base = f"/api/v1/triages/{triage.id}"
    order = [
        m["id"] for m in client.get(f"{base}/misses", headers=reviewer.headers).json()["items"]
    ]

    # without next: the answer is the miss, as before
    first = client.post(f"{base}/claim", headers=reviewer.headers).json()
    assert first["id"] == order[0]
    plain = client.post(
        f"/api/v1/misses/{first['id']}/label",
        headers=reviewer.headers,
        json={"category": "not-indexed", "version": 1},
    )
    assert plain.status_code == 200
    assert (plain.json()["id"], plain.json()["state"]) == (first["id"], "labelled")
    assert "labelled" not in plain.json()

    current = client.post(f"{base}/claim", headers=reviewer.headers).json()
    seen = [first["id"]]
    while True:
        answer = _label(client, reviewer.headers, current)
        assert answer.status_code == 200
        body = answer.json()
        assert set(body) == {"labelled", "next"}
        labelled = body["labelled"]
        assert (labelled["id"], labelled["state"], labelled["category"]) == (
            current["id"],
            "labelled",
            "not-indexed",
        )
        assert labelled["version"] == current["version"] + 1
        assert labelled["lease_holder"] is None
        seen.append(current["id"])
        if body["next"] is None:
            break
        current = body["next"]
        # leased to the caller, in queue order
        assert current["lease_holder"] == _uid(engine, reviewer)
        assert current["lease_expires_at"]
        assert current["state"] == "open"
    assert seen == order
    # nothing left: where claim answers 204, next is null; and claim agrees
    assert client.post(f"{base}/claim", headers=reviewer.headers).status_code == 204
    summary = client.get(base, headers=reviewer.headers).json()
    assert (summary["unlabelled"], summary["closes"]) == (0, True)


def test_label_next_skips_what_others_hold(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=3)
    client.app.state.clock = FrozenClock()  # type: ignore[attr-defined]
    reviewer, lead = accounts[Role.REVIEWER], accounts[Role.LEAD]
    base = f"/api/v1/triages/{triage.id}"
    mine = client.post(f"{base}/claim", headers=reviewer.headers).json()
    theirs = client.post(f"{base}/claim", headers=lead.headers).json()
    body = _label(client, reviewer.headers, mine).json()
    assert body["next"]["id"] not in (mine["id"], theirs["id"])
    assert body["next"]["lease_holder"] == _uid(engine, reviewer)
    # the lead's lease is untouched
    held = client.post(f"{base}/claim", headers=lead.headers).json()
    assert (held["id"], held["lease_holder"]) == (theirs["id"], _uid(engine, lead))
    last = _label(client, reviewer.headers, body["next"]).json()
    assert last["next"] is None


def _events(engine: Engine, triage_id: int) -> list[str]:
    with Session(engine) as session:
        return list(
            session.exec(
                select(LabelEvent.action)
                .where(LabelEvent.triage_id == triage_id)
                .order_by(col(LabelEvent.id))
            ).all()
        )


def test_refused_labels_claim_nothing_and_answer_as_before(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=2)
    client.app.state.clock = FrozenClock()  # type: ignore[attr-defined]
    reviewer = accounts[Role.REVIEWER]
    bob = _second_reviewer(engine)
    base = f"/api/v1/triages/{triage.id}"
    mine = client.post(f"{base}/claim", headers=reviewer.headers).json()

    stale = _label(client, reviewer.headers, mine | {"version": 7})
    assert (stale.status_code, stale.json()["error"]["code"]) == (409, "stale_version")
    assert stale.json()["error"]["details"]["current"]["version"] == 1
    not_held = _label(client, bob, mine)
    assert (not_held.status_code, not_held.json()["error"]["code"]) == (403, "lease_not_held")
    note = _label(client, reviewer.headers, mine, category="other")
    assert (note.status_code, note.json()["error"]["code"]) == (422, "note_required")
    # the refusals are in the audit trail, and none of them leased anything to Bob
    assert _events(engine, triage.id) == [LabelAction.CONFLICT.value, LabelAction.REFUSED.value]  # type: ignore[arg-type]
    claimed = client.post(f"{base}/claim", headers=bob).json()
    assert claimed["id"] != mine["id"]
    assert claimed["version"] == 1
    # Bob still holds only that one: his next label's next is null (the other is the reviewer's)
    done = _label(client, bob, claimed).json()
    assert (done["labelled"]["id"], done["next"]) == (claimed["id"], None)
    # a relabel through next=1 is refused to a reviewer as without it
    relabel = _label(client, bob, done["labelled"], category="chunk-boundary")
    assert (relabel.status_code, relabel.json()["error"]["code"]) == (403, "lead_required")


def test_label_next_with_double_review(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(
        engine, tmp_path, queries=1, per_query=2, overlap=Overlap(reviewers=2, fraction=1.0)
    )
    client.app.state.clock = FrozenClock()  # type: ignore[attr-defined]
    ann = accounts[Role.REVIEWER].headers
    bob = _second_reviewer(engine)
    base = f"/api/v1/triages/{triage.id}"

    first = client.post(f"{base}/claim", headers=ann).json()
    assert client.post(f"{base}/claim", headers=bob).json()["id"] == first["id"]
    said = _label(client, ann, first).json()
    # Ann's own (blind) label; her next is the other miss, not the one she labelled
    assert (said["labelled"]["id"], said["labelled"]["state"]) == (first["id"], "open")
    assert said["next"]["id"] != first["id"]
    assert said["next"]["reviewers"] == 2
    twice = _label(client, ann, first)
    assert (twice.status_code, twice.json()["error"]["code"]) == (409, "stale_version")
    agreed = _label(client, bob, first).json()
    assert (agreed["labelled"]["state"], agreed["labelled"]["category"]) == (
        "labelled",
        "not-indexed",
    )
    # Bob's next is the miss Ann holds: overlap offers it to a second reviewer
    assert agreed["next"]["id"] == said["next"]["id"]
    last = _label(client, ann, said["next"]).json()
    assert last["next"] is None
    final = _label(client, bob, agreed["next"]).json()
    assert (final["labelled"]["state"], final["next"]) == ("labelled", None)
    assert client.get(base, headers=ann).json()["closes"] is True
