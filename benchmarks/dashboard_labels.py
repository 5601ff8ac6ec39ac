"""The labelling the dashboard benchmark writes with bulk SQL, the way the work queue would have
left it: rows (dicts for executemany) and the counts they add up to.

* ``label_rows``: one reviewer per miss (overlap 1), see dashboard_http.py's docstring.
* ``overlap_rows``: two distinct reviewers per miss (overlap 2). Each labelled miss has two
  ``review`` rows and two 'review' events; ~85% agree (the miss is labelled, resolution
  'agreed', an 'agree' event by the second reviewer, version 2); the others disagree (one
  of them sometimes says "can't tell") and get a 'dispute' event (state 'disputed', version
  2), and most of those were adjudicated by the lead afterwards (labelled, resolution
  'adjudicated', an 'adjudicate' event, version 3). Some open misses hold one reviewer's
  label and wait for the second; the live leases are unlabelled ``review`` rows, as the
  overlap queue leases.

Imported by dashboard_http.py (run as ``python benchmarks/dashboard_http.py``).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from app.models import CANT_TELL, OTHER, MissState, Resolution

LABELLED_SHARE = 0.8
RELABEL_SHARE = 0.1  # of the labelled misses (overlap 1)
#: Overlap 2: the labelled misses whose two labels differ, the disagreements where one
#: reviewer said "can't tell", the disagreements the lead adjudicated since, and the misses
#: (after the labelled ones) holding one label of two.
DISAGREE_SHARE = 0.15
CANT_TELL_SHARE = 0.2
ADJUDICATED_SHARE = 0.8
HALF_LABELLED_SHARE = 0.05
#: The other events (skip, release, conflict) share what --events leaves after the label path.
OTHER_EVENTS = (("skip", 0.5), ("release", 0.3), ("conflict", 0.2))
#: Causes of a label and their weights ('other' always with a note).
CATEGORY_WEIGHTS = (
    ("not-indexed", 0.35),
    ("vocabulary-mismatch", 0.30),
    ("chunk-boundary", 0.25),
    (OTHER, 0.10),
)
LABEL_WINDOW = timedelta(hours=8)
LEASE = timedelta(minutes=10)
SEED = 20261130
NOTE_JOIN = " | "  # app.services.queue.overlap's join of the reviewers' notes


@dataclass
class Data:
    """What the setup wrote, to check the pages against."""

    triage_id: int = 0
    lead_token: str = ""
    #: an open miss, for the events the benchmark adds while it measures
    open_miss: int = 0
    lead_id: int = 0
    overlap: int = 1
    misses: int = 0
    #: misses with a final label (labelled); ``other``: those whose final label is 'other'
    labelled: int = 0
    other: int = 0
    leases: int = 0
    #: overlap 2: final labels by resolution, misses waiting for adjudication, and misses
    #: with both labels in of which none is "can't tell" (what agreement compares)
    agreed: int = 0
    adjudicated: int = 0
    disputed: int = 0
    compared: int = 0
    reviews: int = 0
    events: Counter[str] = field(default_factory=Counter)
    phases: dict[str, float] = field(default_factory=dict)  # seconds


@dataclass
class Rows:
    """What to write: miss updates (``b_id`` the miss id), review inserts, event inserts
    (``triage_id`` 0: set by the caller), and the live leases (miss updates at overlap 1,
    review inserts at overlap 2)."""

    updates: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    leases: list[dict[str, Any]] = field(default_factory=list)


def snapshot(state: str, category: str | None, note: str, version: int) -> dict[str, Any]:
    """A miss as the queue service records it in an event's ``before``/``after``."""
    return {"state": state, "category": category, "note": note, "version": version}


OPENED = snapshot(MissState.OPEN.value, None, "", 1)


class _Writer:
    """Collects rows and counts; keeps every event inside the labelling window."""

    def __init__(self, n_misses: int) -> None:
        self.rng = random.Random(SEED)
        self.now = datetime.now(UTC)
        self.start = self.now - LABEL_WINDOW
        self.rows = Rows()
        self.facts = Data(misses=n_misses)
        self.categories = [c for c, _ in CATEGORY_WEIGHTS]
        self.weights = [w for _, w in CATEGORY_WEIGHTS]
        #: miss id -> final category (None while disputed), its note, when it left the queue
        self.done: dict[int, tuple[str | None, str, datetime]] = {}

    def clamp(self, at: datetime) -> datetime:
        return min(max(at, self.start), self.now)

    def event(
        self, miss_id: int, user: int, at: datetime, action: str, before: Any, after: Any, note: str
    ) -> None:
        self.rows.events.append(
            {
                "miss_id": miss_id,
                "triage_id": 0,
                "user_id": user,
                "at": self.clamp(at),
                "action": action,
                "before": before,
                "after": after,
                "note": note,
            }
        )
        self.facts.events[action] += 1

    def cause(self) -> tuple[str, str]:
        """A random cause and its note ('other' always with one)."""
        category = self.rng.choices(self.categories, self.weights)[0]
        note = (
            f"duplicate of a judged document ({self.rng.randrange(7)})" if category == OTHER else ""
        )
        return category, note

    def when(self, index: int, n_labelled: int) -> datetime:
        """Label times spread over the window in queue order."""
        return self.start + LABEL_WINDOW * ((index + self.rng.random()) / n_labelled) * 0.98

    def other_events(self, misses: list[int], reviewers: list[int], rest: int) -> None:
        """Skips and releases while a miss was open; stale label attempts (conflicts) on
        misses that had left the queue meanwhile."""
        rng = self.rng
        done = list(self.done)
        counts = [round(rest * share) for _, share in OTHER_EVENTS]
        counts[0] += rest - sum(counts)
        for (action, _), count in zip(OTHER_EVENTS, counts, strict=True):
            for _ in range(count):
                miss_id = misses[rng.randrange(len(misses))]
                user = reviewers[rng.randrange(len(reviewers))]
                if action == "conflict":
                    miss_id = done[rng.randrange(len(done))]
                    category, note, at = self.done[miss_id]
                    before = snapshot(MissState.LABELLED.value, category, note, 2)
                    attempt = snapshot(MissState.LABELLED.value, rng.choice(self.categories), "", 1)
                    if attempt["category"] == OTHER:
                        attempt["note"] = "stale attempt"
                    at += timedelta(seconds=rng.uniform(1, 60))
                    self.event(miss_id, user, at, action, before, attempt, "")
                    continue
                known = self.done.get(miss_id)
                latest = known[2] if known else self.now
                at = latest - (latest - self.start) * rng.random() * 0.2 - timedelta(seconds=1)
                if action == "skip":
                    self.event(miss_id, user, at, action, OPENED, OPENED, "not sure, skipping")
                else:
                    self.event(
                        miss_id, user, at, action, OPENED | {"lease_holder": user}, OPENED, ""
                    )

    def finish(self) -> tuple[Rows, Data]:
        self.facts.other = sum(1 for row in self.rows.updates if row.get("category") == OTHER)
        self.facts.labelled = sum(
            1 for row in self.rows.updates if row["state"] == MissState.LABELLED.value
        )
        self.rows.events.sort(key=lambda e: e["at"])  # ids in time order, as the app appends
        return self.rows, self.facts


def label_rows(
    misses: list[int], reviewers: list[int], lead_id: int, n_events: int, n_leases: int
) -> tuple[Rows, Data]:
    """Overlap 1: one label per labelled miss, 10% relabelled by the lead, the other events,
    the live leases (on the miss rows)."""
    w = _Writer(len(misses))
    rng = w.rng
    n_labelled = round(len(misses) * LABELLED_SHARE)
    n_relabel = round(n_labelled * RELABEL_SHARE)
    for index, miss_id in enumerate(misses[:n_labelled]):
        category, note = w.cause()
        at = w.when(index, n_labelled)
        reviewer = reviewers[rng.randrange(len(reviewers))]
        w.done[miss_id] = (category, note, at)
        after = snapshot(MissState.LABELLED.value, category, note, 2)
        w.rows.updates.append(
            {
                "b_id": miss_id,
                "state": MissState.LABELLED.value,
                "category": category,
                "note": note,
                "version": 2,
                "labelled_by_id": reviewer,
                "labelled_at": at,
                "resolution": None,
            }
        )
        w.event(miss_id, reviewer, at, "label", OPENED, after, note)

    for row in rng.sample(w.rows.updates, n_relabel):
        miss_id = row["b_id"]
        old_category, old_note, at = w.done[miss_id]
        category = rng.choice([c for c in w.categories if c != old_category])
        note = "relabelled by the lead" if category == OTHER else ""
        # After the conflicts on the first label (at most 60 s after it).
        relabelled_at = min(w.now, at + timedelta(minutes=2) + (w.now - at) * rng.random())
        before = snapshot(MissState.LABELLED.value, old_category, old_note, 2)
        after = snapshot(MissState.LABELLED.value, category, note, 3)
        row |= {
            "category": category,
            "note": note,
            "version": 3,
            "labelled_by_id": lead_id,
            "labelled_at": relabelled_at,
        }
        w.event(miss_id, lead_id, relabelled_at, "relabel", before, after, note)

    w.other_events(misses, reviewers, max(0, n_events - n_labelled - n_relabel))
    w.rows.leases = [
        {"b_id": miss_id, "lease_holder_id": reviewers[i % len(reviewers)]}
        for i, miss_id in enumerate(misses[n_labelled : n_labelled + n_leases])
    ]
    w.facts.leases = len(w.rows.leases)
    return w.finish()


def other_events_at_overlap_1(n_misses: int) -> int:
    """The skips, releases and conflicts that ``label_rows`` writes with the default --events
    (2 x misses): overlap 2 writes as many beside its longer label path."""
    n_labelled = round(n_misses * LABELLED_SHARE)
    return 2 * n_misses - n_labelled - round(n_labelled * RELABEL_SHARE)


def overlap_rows(
    misses: list[int], reviewers: list[int], lead_id: int, n_other_events: int, n_leases: int
) -> tuple[Rows, Data]:
    """Overlap 2 (see the module docstring); ``reviewers``: at least two."""
    w = _Writer(len(misses))
    rng = w.rng
    w.facts.overlap = 2
    n_labelled = round(len(misses) * LABELLED_SHARE)
    n_half = round(len(misses) * HALF_LABELLED_SHARE)

    def review(miss_id: int, reviewer: int, category: str, note: str, at: datetime) -> None:
        w.rows.reviews.append(
            {
                "miss_id": miss_id,
                "triage_id": 0,
                "reviewer_id": reviewer,
                "category": category,
                "note": note,
                "lease_expires_at": None,
                "created_at": w.clamp(at - timedelta(seconds=rng.uniform(20, 300))),
                "labelled_at": w.clamp(at),
            }
        )
        # blind: the reviewer's label is in the event, the miss itself unchanged
        after = OPENED | {"category": category, "note": note}
        w.event(miss_id, reviewer, at, "review", OPENED, after, note)

    for index, miss_id in enumerate(misses[:n_labelled]):
        first, second = rng.sample(reviewers, 2)
        category, note = w.cause()
        at = w.when(index, n_labelled)
        later = min(w.now, at + timedelta(seconds=rng.uniform(30, 1800)))
        if rng.random() < DISAGREE_SHARE:
            if rng.random() < CANT_TELL_SHARE:
                other, other_note = CANT_TELL, "the evidence does not decide"
            else:
                other = rng.choice([c for c in w.categories if c != category])
                other_note = "another cause" if other == OTHER else ""
        else:
            other, other_note = category, note
        review(miss_id, first, category, note, at)
        review(miss_id, second, other, other_note, later)
        if other == category:
            joined = NOTE_JOIN.join(dict.fromkeys(n for n in (note, other_note) if n))
            after = snapshot(MissState.LABELLED.value, category, joined, 2)
            w.event(miss_id, second, later, "agree", OPENED, after, "")
            update = _final(miss_id, category, joined, 2, second, later, Resolution.AGREED)
            w.facts.agreed += 1
            w.facts.compared += 1
            w.done[miss_id] = (category, joined, later)
            w.rows.updates.append(update)
            continue
        disputed = snapshot(MissState.DISPUTED.value, None, "", 2)
        w.event(miss_id, second, later, "dispute", OPENED, disputed, "")
        w.facts.compared += other != CANT_TELL
        if rng.random() >= ADJUDICATED_SHARE:
            w.facts.disputed += 1
            w.done[miss_id] = (None, "", later)
            w.rows.updates.append(
                {
                    "b_id": miss_id,
                    "state": MissState.DISPUTED.value,
                    "category": None,
                    "note": "",
                    "version": 2,
                    "labelled_by_id": None,
                    "labelled_at": None,
                    "resolution": None,
                }
            )
            continue
        final = rng.choice([category, other]) if other != CANT_TELL else category
        final_note = "adjudicated: see both notes" if final == OTHER else ""
        decided = min(w.now, later + timedelta(seconds=rng.uniform(60, 3600)))
        after = snapshot(MissState.LABELLED.value, final, final_note, 3)
        w.event(miss_id, lead_id, decided, "adjudicate", disputed, after, final_note)
        w.rows.updates.append(
            _final(miss_id, final, final_note, 3, lead_id, decided, Resolution.ADJUDICATED)
        )
        w.facts.adjudicated += 1
        w.done[miss_id] = (final, final_note, decided)

    # open misses with one label of two, waiting for their second reviewer
    for miss_id in misses[n_labelled : n_labelled + n_half]:
        category, note = w.cause()
        review(miss_id, reviewers[rng.randrange(len(reviewers))], category, note, w.now)
    w.facts.reviews = len(w.rows.reviews)

    w.other_events(misses, reviewers, n_other_events)
    leased = misses[n_labelled + n_half : n_labelled + n_half + n_leases]
    w.rows.leases = [
        {
            "miss_id": miss_id,
            "triage_id": 0,
            "reviewer_id": reviewers[i % len(reviewers)],
            "category": None,
            "note": "",
            "lease_expires_at": None,  # set just before the write: the server's clock is real
            "created_at": w.now,
            "labelled_at": None,
        }
        for i, miss_id in enumerate(leased)
    ]
    w.facts.leases = len(w.rows.leases)
    return w.finish()


def _final(
    miss_id: int,
    category: str,
    note: str,
    version: int,
    user: int,
    at: datetime,
    resolution: Resolution,
) -> dict[str, Any]:
    """The update giving an overlap miss its final label."""
    return {
        "b_id": miss_id,
        "state": MissState.LABELLED.value,
        "category": category,
        "note": note,
        "version": version,
        "labelled_by_id": user,
        "labelled_at": at,
        "resolution": resolution.value,
    }
