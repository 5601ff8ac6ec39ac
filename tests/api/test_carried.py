"""Labels that carry forward (issue 28, part 3): a triage of a run in a series takes the final
labels in a named cause of the series' latest earlier triage as ``carried`` misses: off the
queue, counted apart in the closure, sent back to the queue by a lead (all, by cause or one).
Both databases.

The data (tests/support/lead_runs.py) at depth 2: commit-1 (FIRST) misses (q1, b), (q2, c)
and (q3, d); commit-2 (RERANKED) misses only (q3, d); commit-3 (RERANKED again) the same.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.models import Role
from tests.support.carried import (
    LABELS,
    NOTE,
    carried_series,
    label_every_miss,
    make_triage,
    misses_by_pair,
    triage_detail,
)
from tests.support.lead_runs import FIRST, RERANKED
from tests.support.series import post_golden_set, post_run
from tests.support.service import Account


@pytest.fixture
def series(client: TestClient, accounts: dict[Role, Account]) -> dict[str, int]:
    return carried_series(client, accounts[Role.LEAD])


def test_a_triage_in_the_series_carries_the_earlier_final_labels(
    client: TestClient, accounts: dict[Role, Account], series: dict[str, int]
) -> None:
    lead, reviewer = accounts[Role.LEAD], accounts[Role.REVIEWER]
    second = make_triage(client, lead, series["commit-2"])
    assert second["carried_from"] == series["t1"]
    misses = misses_by_pair(client, reviewer, second["id"])
    assert list(misses) == [("q3", "d")]
    carried = misses[("q3", "d")]
    assert carried["state"] == "carried"
    assert carried["category"] == "not-indexed"
    assert carried["note"] == NOTE
    assert carried["carried_from"] == series["t1"]
    detail = triage_detail(client, reviewer, second["id"])
    assert detail["carried"] == 1
    assert detail["carried_counts"] == {
        "not-indexed": 1,
        "vocabulary-mismatch": 0,
        "chunk-boundary": 0,
    }
    assert detail["counts"]["not-indexed"] == 1
    assert detail["states"]["carried"] == 1
    assert detail["states"]["final"] == 0
    assert detail["unlabelled"] == 0
    assert detail["residue"] == 0
    assert detail["closes"] is True
    assert detail["closure"] == (
        f"0 labelled here + 1 carried from triage {series['t1']} = 1 of 1 miss accounted for: "
        "the categories close"
    )
    # not queued: nothing to claim
    claim = client.post(f"/api/v1/triages/{second['id']}/claim", headers=reviewer.headers)
    assert claim.status_code == 204


def test_a_carried_label_carries_on_and_its_origin_is_the_latest_earliertriage(
    client: TestClient, accounts: dict[Role, Account], series: dict[str, int]
) -> None:
    lead = accounts[Role.LEAD]
    second = make_triage(client, lead, series["commit-2"])
    third = make_triage(client, lead, series["commit-3"])
    assert third["carried_from"] == second["id"]
    carried = misses_by_pair(client, lead, third["id"])[("q3", "d")]
    assert (carried["state"], carried["category"]) == ("carried", "not-indexed")
    assert carried["carried_from"] == second["id"]


def test_a_run_outside_the_series_carries_nothing(
    client: TestClient, accounts: dict[Role, Account], series: dict[str, int]
) -> None:
    lead = accounts[Role.LEAD]
    alone = make_triage(client, lead, series["alone"])
    assert alone["carried_from"] is None
    miss = misses_by_pair(client, lead, alone["id"])[("q3", "d")]
    assert (miss["state"], miss["category"], miss["carried_from"]) == ("open", None, None)
    detail = triage_detail(client, lead, alone["id"])
    assert detail["carried"] == 0
    assert detail["closes"] is False
    assert "carried" not in detail["closure"]


def test_other_is_not_carried(client: TestClient, accounts: dict[Role, Account]) -> None:
    lead = accounts[Role.LEAD]
    golden = post_golden_set(client, lead, "other")
    one = post_run(client, lead, golden, "one", FIRST, series="s")
    two = post_run(client, lead, golden, "two", RERANKED, series="s")
    first = make_triage(client, lead, one)
    label_every_miss(
        client, lead, first["id"], {**LABELS, ("q3", "d"): ("other", "stale judgment")}
    )
    second = make_triage(client, lead, two)
    # the earlier triage is its origin, but "other" names no cause: the pair is queued
    assert second["carried_from"] == first["id"]
    miss = misses_by_pair(client, lead, second["id"])[("q3", "d")]
    assert (miss["state"], miss["category"]) == ("open", None)


def test_a_carried_miss_is_not_labelled_until_a_lead_sends_it_back(
    client: TestClient, accounts: dict[Role, Account], series: dict[str, int]
) -> None:
    lead = accounts[Role.LEAD]
    second = make_triage(client, lead, series["commit-2"])
    miss = misses_by_pair(client, lead, second["id"])[("q3", "d")]
    refused = client.post(
        f"/api/v1/misses/{miss['id']}/label",
        headers=lead.headers,
        json={"category": "vocabulary-mismatch", "note": "", "version": miss["version"]},
    )
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "carried"
    trail = client.get(f"/api/v1/misses/{miss['id']}/events", headers=lead.headers).json()
    assert [e["action"] for e in trail["items"]] == ["refused"]
    assert misses_by_pair(client, lead, second["id"])[("q3", "d")]["state"] == "carried"


def test_a_lead_sends_carried_misses_back_by_cause_and_the_trail_keeps_the_label(
    client: TestClient, accounts: dict[Role, Account], series: dict[str, int]
) -> None:
    lead, reviewer = accounts[Role.LEAD], accounts[Role.REVIEWER]
    second = make_triage(client, lead, series["commit-2"])
    url = f"/api/v1/triages/{second['id']}/carried"
    # another cause: nothing moves
    none = client.post(
        url, headers=lead.headers, json={"requeue": True, "category": "chunk-boundary"}
    )
    assert none.status_code == 200, none.text
    assert none.json()["requeued"] == 0
    moved = client.post(
        url, headers=lead.headers, json={"requeue": True, "category": "not-indexed"}
    )
    assert moved.status_code == 200, moved.text
    body = moved.json()
    assert body["requeued"] == 1
    assert body["triage"]["carried"] == 0
    assert body["triage"]["unlabelled"] == 1
    assert body["triage"]["closes"] is False
    miss = misses_by_pair(client, lead, second["id"])[("q3", "d")]
    assert (miss["state"], miss["category"], miss["note"], miss["carried_from"]) == (
        "open",
        None,
        "",
        None,
    )
    trail = client.get(f"/api/v1/misses/{miss['id']}/events", headers=lead.headers).json()
    [event] = trail["items"]
    assert event["action"] == "requeue"
    assert event["before"]["state"] == "carried"
    assert event["before"]["category"] == "not-indexed"
    assert event["before"]["carried_from"] == series["t1"]
    assert event["after"]["state"] == "open"
    # on the queue now: a reviewer claims it and labels it here
    claimed = client.post(f"/api/v1/triages/{second['id']}/claim", headers=reviewer.headers)
    assert claimed.status_code == 200, claimed.text
    assert claimed.json()["id"] == miss["id"]
    labelled = client.post(
        f"/api/v1/misses/{miss['id']}/label",
        headers=reviewer.headers,
        json={"category": "vocabulary-mismatch", "note": "", "version": claimed.json()["version"]},
    )
    assert labelled.status_code == 200, labelled.text
    detail = triage_detail(client, reviewer, second["id"])
    assert detail["closure"] == "0 + 1 + 0 = 1 of 1 miss accounted for: the categories close"
    # nothing left to send back
    again = client.post(url, headers=lead.headers, json={"requeue": True})
    assert again.json()["requeued"] == 0


def test_sending_back_one_miss_and_all(
    client: TestClient, accounts: dict[Role, Account], series: dict[str, int]
) -> None:
    lead = accounts[Role.LEAD]
    second = make_triage(client, lead, series["commit-2"])
    url = f"/api/v1/triages/{second['id']}/carried"
    miss = misses_by_pair(client, lead, second["id"])[("q3", "d")]
    one = client.post(url, headers=lead.headers, json={"requeue": True, "miss_id": miss["id"]})
    assert one.status_code == 200
    assert one.json()["requeued"] == 1
    # not carried any more
    twice = client.post(url, headers=lead.headers, json={"requeue": True, "miss_id": miss["id"]})
    assert twice.status_code == 409
    assert twice.json()["error"]["code"] == "not_carried"
    third = make_triage(client, lead, series["commit-3"])
    # commit-3 carries from commit-2's triage, where the pair is open now: nothing
    assert misses_by_pair(client, lead, third["id"])[("q3", "d")]["state"] == "open"
    stranger = client.post(url, headers=lead.headers, json={"requeue": True, "miss_id": 10**9})
    assert stranger.status_code == 404
    assert stranger.json()["error"]["code"] == "miss_not_found"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"requeue": False}, 422, "requeue_required"),
        ({"requeue": True, "category": "nonsense"}, 422, "unknown_category"),
        ({"requeue": True, "category": "x" * 101}, 422, None),
        ({}, 422, None),
    ],
)
def test_bad_requeue_requests_are_refused_with_a_code(
    client: TestClient,
    accounts: dict[Role, Account],
    series: dict[str, int],
    body: dict[str, Any],
    status: int,
    code: str | None,
) -> None:
    lead = accounts[Role.LEAD]
    second = make_triage(client, lead, series["commit-2"])
    answer = client.post(f"/api/v1/triages/{second['id']}/carried", headers=lead.headers, json=body)
    assert answer.status_code == status, answer.text
    if code:
        assert answer.json()["error"]["code"] == code
    assert len(answer.text) < 2000  # never echoes a huge value
    assert misses_by_pair(client, lead, second["id"])[("q3", "d")]["state"] == "carried"


def test_only_a_lead_sends_carried_misses_back(
    client: TestClient, accounts: dict[Role, Account], series: dict[str, int]
) -> None:
    lead, reviewer = accounts[Role.LEAD], accounts[Role.REVIEWER]
    second = make_triage(client, lead, series["commit-2"])
    url = f"/api/v1/triages/{second['id']}/carried"
    assert client.post(url, headers=reviewer.headers, json={"requeue": True}).status_code == 403
    assert client.post(url, json={"requeue": True}).status_code == 401
    missing = client.post(
        "/api/v1/triages/999999/carried", headers=lead.headers, json={"requeue": True}
    )
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "triage_not_found"


def test_the_backlog_lists_carried_misses_in_their_cause_with_their_origin(
    client: TestClient, accounts: dict[Role, Account], series: dict[str, int]
) -> None:
    lead = accounts[Role.LEAD]
    second = make_triage(client, lead, series["commit-2"])
    answer = client.get(
        f"/api/v1/triages/{second['id']}/backlog?format=csv&category=not-indexed",
        headers=lead.headers,
    )
    assert answer.status_code == 200, answer.text
    [row] = list(csv.DictReader(io.StringIO(answer.text)))
    assert (row["qid"], row["doc_id"], row["cause"], row["stage"]) == (
        "q3",
        "d",
        "not-indexed",
        "carried",
    )
    assert row["carried_from"] == str(series["t1"])


def test_agreement_counts_only_labels_given_in_thetriage(
    client: TestClient, accounts: dict[Role, Account], series: dict[str, int]
) -> None:
    lead = accounts[Role.LEAD]
    second = make_triage(
        client, lead, series["commit-2"], overlap={"reviewers": 2, "fraction": 1.0}
    )
    miss = misses_by_pair(client, lead, second["id"])[("q3", "d")]
    # carried: not sampled for double review, no unit of agreement
    assert miss["reviewers"] == 1
    assert miss["state"] == "carried"
    agreement = client.get(f"/api/v1/triages/{second['id']}/agreement", headers=lead.headers)
    assert agreement.status_code == 200, agreement.text
    assert agreement.json()["units"] == 0
