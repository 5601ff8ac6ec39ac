"""The queue through the JSON API: status codes and error codes of API.md."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app.clock import FrozenClock
from app.models import Role
from tests.support.service import Account
from tests.support.triage import make_triage


def test_queue_codes(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    golden, _, triage = make_triage(engine, tmp_path, queries=1, per_query=2)
    clock = FrozenClock()
    client.app.state.clock = clock  # type: ignore[attr-defined]
    reviewer, lead = accounts[Role.REVIEWER].headers, accounts[Role.LEAD].headers
    base = f"/api/v1/triages/{triage.id}"

    first = client.post(f"{base}/claim", headers=reviewer)
    assert first.status_code == 200
    miss = first.json()
    assert miss["lease_holder"] is not None
    assert miss["lease_expires_at"]
    url = f"/api/v1/misses/{miss['id']}"
    # The lead takes the other miss; nobody else is left for a second reviewer... the admin.
    assert client.post(f"{base}/claim", headers=lead).status_code == 200
    assert client.post(f"{base}/claim", headers=accounts[Role.ADMIN].headers).status_code == 204

    other = client.post(
        f"{url}/label", headers=reviewer, json={"category": "other", "note": "", "version": 1}
    )
    assert (other.status_code, other.json()["error"]["code"]) == (422, "note_required")
    wrong = client.post(
        f"{url}/label",
        headers=accounts[Role.ADMIN].headers,
        json={"category": "not-indexed", "version": 2},
    )
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (409, "stale_version")
    assert wrong.json()["error"]["details"]["current"]["version"] == 1
    ok = client.post(
        f"{url}/label", headers=reviewer, json={"category": "not-indexed", "version": 1}
    )
    assert ok.status_code == 200
    assert (ok.json()["version"], ok.json()["state"], ok.json()["category"]) == (
        2,
        "labelled",
        "not-indexed",
    )
    relabel = client.post(
        f"{url}/label", headers=reviewer, json={"category": "chunk-boundary", "version": 2}
    )
    assert (relabel.status_code, relabel.json()["error"]["code"]) == (403, "lead_required")
    assert (
        client.post(
            f"{url}/label", headers=lead, json={"category": "chunk-boundary", "version": 2}
        ).status_code
        == 200
    )
    undone = client.post(f"{base}/undo", headers=reviewer)
    assert (undone.status_code, undone.json()["error"]["code"]) == (404, "nothing_to_undo")

    events = client.get(f"{url}/events", headers=reviewer).json()["items"]
    assert [e["action"] for e in events] == ["conflict", "label", "refused", "relabel"]
    assert events[0]["after"]["category"] == "not-indexed"  # the attempt is kept

    renewed = client.post(f"{url}/renew", headers=reviewer)
    assert (renewed.status_code, renewed.json()["error"]["code"]) == (403, "lease_not_held")
    summary = client.get(base, headers=reviewer).json()
    assert (summary["counts"]["chunk-boundary"], summary["unlabelled"]) == (1, 1)

    # The lead's lease expires; a reviewer then gets that miss.
    clock.advance(minutes=11)
    taken = client.post(f"{base}/claim", headers=reviewer)
    assert taken.status_code == 200
    skip = client.post(
        f"/api/v1/misses/{taken.json()['id']}/skip",
        headers=reviewer,
        json={"reason": "needs the original PDF"},
    )
    assert skip.status_code == 200
    assert skip.json()["lease_holder"] is None
    assert client.post(f"{base}/claim", headers=reviewer).status_code == 204

    causes = client.put(
        f"/api/v1/golden-sets/{golden.id}/causes",
        headers=lead,
        json={"causes": ["not-indexed", "synonyms", "chunking"]},
    )
    assert (causes.status_code, causes.json()["error"]["code"]) == (409, "labelling_started")


def test_causes_can_change_before_labelling(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    golden, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1)
    lead = accounts[Role.LEAD].headers
    url = f"/api/v1/golden-sets/{golden.id}/causes"
    for bad in ([], ["other"], ["a", "a"], [str(i) for i in range(10)]):
        response = client.put(url, headers=lead, json={"causes": bad})
        assert (response.status_code, response.json()["error"]["code"]) == (422, "bad_causes")
    changed = client.put(url, headers=lead, json={"causes": ["stale-index", "synonyms"]})
    assert changed.json()["causes"] == ["stale-index", "synonyms"]
    miss = client.post(f"/api/v1/triages/{triage.id}/claim", headers=lead).json()
    label = client.post(
        f"/api/v1/misses/{miss['id']}/label",
        headers=lead,
        json={"category": "not-indexed", "version": 1},
    )
    assert (label.status_code, label.json()["error"]["code"]) == (422, "unknown_category")
    assert (
        client.post(
            f"/api/v1/misses/{miss['id']}/label",
            headers=lead,
            json={"category": "synonyms", "version": 1},
        ).status_code
        == 200
    )
    summary = client.get(f"/api/v1/triages/{triage.id}", headers=lead).json()
    assert summary["closure"] == "0 + 1 = 1 of 1 miss accounted for: the categories close"
    assert summary["closes"] is True
