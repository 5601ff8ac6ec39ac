"""After benchmarks/load_fault.py's run: the database against the clients' own logs.

Definitions (the script fails when lost, doubled, stuck or contradictions is not 0):

- **lost**: a label acknowledged to a reviewer (a 200, or a repeat that answered 409 with
  exactly that reviewer's label as the stored state) whose miss is not, in the database,
  labelled with that category by that reviewer at that version + 1, with exactly one "label"
  event by that reviewer at that version. (Reviewers are not leads: nothing may relabel.)
- **doubled**: a miss with more than one "label" event, or acknowledged more than once.
- **stuck**: a miss that the queue no longer hands out although it is unlabelled. After the
  run, every lease must be released or expire (``MISSTRIAGE_LEASE_SECONDS``); the checker
  waits for that, then a verifying reviewer claims over HTTP, in queue order, every open miss
  up to the last position any reviewer ever touched (claims go in queue order, so everything
  at or before that position that is still open was released, abandoned or leased when its
  holder vanished) and labels it. An open miss at or before that position left afterwards is
  stuck; so is any lease without an expiry.
- **contradictions**: a label refused to a reviewer (403, 409 with another state) that the
  database nevertheless holds as that reviewer's, or a labelled miss whose event disagrees
  with the row (another user, another category).
- "label" events must equal labelled misses. Labels stored without any acknowledgement
  (every attempt failed, the reviewer gave up) are counted, not failed: nobody was told.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any

import httpx
import psycopg
from load_fault_clients import Acknowledged, Reviewer, error_code

DRAIN_CATEGORY = "not-indexed"


def lease_state(connection: psycopg.Connection[Any], triage_id: int) -> dict[str, int]:
    """Open misses with a live lease, an expired one, and a lease without an expiry."""
    row = connection.execute(
        "SELECT count(*) FILTER (WHERE lease_expires_at > now()), "
        "count(*) FILTER (WHERE lease_expires_at <= now()), "
        "count(*) FILTER (WHERE lease_expires_at IS NULL) "
        "FROM miss WHERE triage_id = %s AND state = 'open' AND lease_holder_id IS NOT NULL",
        (triage_id,),
    ).fetchone()
    assert row is not None
    return {"live": row[0], "expired": row[1], "without_expiry": row[2]}


def wait_for_leases(
    connection: psycopg.Connection[Any], triage_id: int, limit_s: float
) -> dict[str, Any]:
    """The lease state right after the run, then wait (``limit_s`` at most) until no live
    lease is left: they must all expire by themselves."""
    after_run = lease_state(connection, triage_id)
    began = time.monotonic()
    while lease_state(connection, triage_id)["live"] and time.monotonic() - began < limit_s:
        time.sleep(1.0)
    return {
        "after_run": after_run,
        "waited_s": round(time.monotonic() - began, 1),
        "after_wait": lease_state(connection, triage_id),
    }


def drain(
    connection: psycopg.Connection[Any], base: str, token: str, user_id: int, triage_id: int
) -> tuple[list[Acknowledged], dict[str, Any]]:
    """Claim and label, in queue order, every open miss up to the last position a reviewer
    touched; the acknowledgements and what the drain saw."""
    positions = dict(
        connection.execute(
            "SELECT id, position FROM miss WHERE triage_id = %s", (triage_id,)
        ).fetchall()
    )
    row = connection.execute(
        "SELECT max(position) FROM miss WHERE triage_id = %s AND (state = 'labelled' "
        "OR lease_holder_id IS NOT NULL OR id IN "
        "(SELECT miss_id FROM label_event WHERE triage_id = %s))",
        (triage_id, triage_id),
    ).fetchone()
    frontier = -1 if row is None or row[0] is None else int(row[0])
    behind = connection.execute(
        "SELECT count(*) FROM miss WHERE triage_id = %s AND state = 'open' AND position <= %s",
        (triage_id, frontier),
    ).fetchone()
    expected = 0 if behind is None else int(behind[0])
    acks: list[Acknowledged] = []
    refused: Counter[str] = Counter()
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30.0) as client:
        for _ in range(expected + 1):
            claimed = client.post(f"/api/v1/triages/{triage_id}/claim")
            if claimed.status_code == 204:
                break  # nothing claimable is left
            if claimed.status_code != 200:
                refused[f"claim {claimed.status_code} {error_code(claimed)}"] += 1
                break
            miss = claimed.json()
            if positions[miss["id"]] > frontier:
                client.post(f"/api/v1/misses/{miss['id']}/release")
                break
            body = {"category": DRAIN_CATEGORY, "note": "", "version": miss["version"]}
            labelled = client.post(f"/api/v1/misses/{miss['id']}/label", json=body)
            if labelled.status_code != 200:
                refused[f"label {labelled.status_code} {error_code(labelled)}"] += 1
                break
            acks.append(
                Acknowledged(
                    -1, user_id, miss["id"], miss["version"], DRAIN_CATEGORY, 0.0, "200", 1
                )
            )
    stuck = connection.execute(
        "SELECT id FROM miss WHERE triage_id = %s AND state = 'open' AND position <= %s "
        "ORDER BY position",
        (triage_id, frontier),
    ).fetchall()
    return acks, {
        "frontier_position": frontier,
        "open_behind_frontier": expected,
        "labelled_by_drain": len(acks),
        "drain_refusals": dict(refused),
        "stuck_ids": [r[0] for r in stuck],
    }


def check_labels(
    connection: psycopg.Connection[Any],
    triage_id: int,
    reviewers: list[Reviewer],
    drained: list[Acknowledged],
) -> dict[str, Any]:
    """Lost, doubled, contradictions and the accounting of labels against events."""
    rows = {
        r[0]: r[1:]
        for r in connection.execute(
            "SELECT id, state, category, version, labelled_by_id FROM miss WHERE triage_id = %s",
            (triage_id,),
        ).fetchall()
    }
    events: dict[int, list[tuple[int, str, int]]] = defaultdict(list)
    for miss_id, user_id, category, version in connection.execute(
        "SELECT miss_id, user_id, after->>'category', (after->>'version')::int FROM label_event "
        "WHERE triage_id = %s AND action = 'label' ORDER BY id",
        (triage_id,),
    ).fetchall():
        events[miss_id].append((user_id, category, version))
    by_action = dict(
        connection.execute(
            "SELECT action, count(*) FROM label_event WHERE triage_id = %s GROUP BY action",
            (triage_id,),
        ).fetchall()
    )
    acks = [a for r in reviewers for a in r.acknowledged] + drained
    acked_per_miss = Counter(a.miss_id for a in acks)

    lost = []
    for ack in acks:
        state, category, version, labelled_by = rows.get(ack.miss_id, (None,) * 4)
        own_events = [
            e
            for e in events.get(ack.miss_id, [])
            if e == (ack.user_id, ack.category, ack.version + 1)
        ]
        stored = (state, category, version, labelled_by) == (
            "labelled",
            ack.category,
            ack.version + 1,
            ack.user_id,
        )
        if not stored or len(own_events) != 1:
            lost.append({"miss_id": ack.miss_id, "reviewer": ack.reviewer, "how": ack.how})

    doubled = sorted(
        {m for m, e in events.items() if len(e) > 1}
        | {m for m, n in acked_per_miss.items() if n > 1}
    )
    labelled = {m for m, row in rows.items() if row[0] == "labelled"}
    contradictions = [
        m
        for m in labelled
        if len(events.get(m, [])) == 1 and events[m][0][:2] != (rows[m][3], rows[m][1])
    ]
    user_of = {r.index: r.user_id for r in reviewers}
    for reviewer in reviewers:
        for item in reviewer.unresolved:
            if item["outcome"] == "no answer":
                continue  # unknown to the client: either way is consistent
            stored = (item["miss_id"] in labelled) and rows[item["miss_id"]][3] == user_of[
                reviewer.index
            ]
            if stored and rows[item["miss_id"]][2] == item["version"] + 1:
                contradictions.append(item["miss_id"])
    stored_without_ack = sorted(labelled - set(acked_per_miss))
    no_answer = {
        item["miss_id"]
        for r in reviewers
        for item in r.unresolved
        if item["outcome"] == "no answer"
    }
    return {
        "misses": len(rows),
        "labelled_misses": len(labelled),
        "label_events": sum(len(e) for e in events.values()),
        "events_by_action": by_action,
        "acknowledged": len(acks),
        "acknowledged_by_reviewers": len(acks) - len(drained),
        "acknowledged_by_409_own_label": sum(1 for a in acks if a.how != "200"),
        "lost": len(lost),
        "lost_samples": lost[:20],
        "doubled": len(doubled),
        "doubled_samples": doubled[:20],
        "contradictions": len(contradictions),
        "contradiction_samples": contradictions[:20],
        "stored_without_ack": len(stored_without_ack),
        "stored_without_ack_after_no_answer": len(set(stored_without_ack) & no_answer),
        "events_equal_labels": sum(len(e) for e in events.values()) == len(labelled),
    }
