"""A triage counted two ways, for the life-cycle tests: a recount from the audit trail alone
(the events replayed miss by miss, with the creation facts: which misses were covered, how many
reviewers each asks for), and what every face shows (the API's summary, the dashboard, the
backlog downloads, the reviewers table). The recount is written here from the events' meaning,
not from app/services/queue/lifecycle.py, so the two can disagree."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.models import LabelEvent, Miss, Review, Triage, User
from app.services import queue

OTHER = "other"
CANT_TELL = "cant-tell"
#: The stages as the product names them (API ``states``, the download's ``stage``).
STAGES = ("open", "reviewing", "disputed", "final", "other", "carried", "covered")
KEEPS_OPEN = ("open", "reviewing", "disputed", "other")


@dataclass
class Recount:
    """A triage as its audit trail tells it."""

    stages: dict[int, str]
    #: Final labels per cause (named causes and other), by miss.
    causes: dict[int, str]
    #: What each final label rests on.
    rests_on: dict[int, str]
    #: Each person's labels in force (a single review's final label, a blind label) and
    #: decisions (adjudications).
    labels: Counter[int] = field(default_factory=Counter)
    decisions: Counter[int] = field(default_factory=Counter)
    #: Each person's blind labels in force, by miss; their skips in force.
    blind: dict[int, set[int | None]] = field(default_factory=dict)
    skipped: dict[int, set[int | None]] = field(default_factory=dict)

    def waiting(self, who: int) -> dict[str, int]:
        """Why each miss without a final label is not ``who``'s to label now, as far as the
        trail tells (leases are not in it: "yours to take" and "with other reviewers"
        together)."""
        found = Counter()
        for i, stage in self.stages.items():
            if stage not in ("open", "reviewing", "disputed"):
                continue
            if stage == "disputed":
                found["adjudication"] += 1
            elif who in self.blind[i]:
                found["another_reviewer"] += 1
            elif who in self.skipped[i]:
                found["skipped"] += 1
            else:
                found["for_you_or_with_others"] += 1
        return dict(found)

    def stage_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STAGES, 0)
        for stage in self.stages.values():
            counts[stage] += 1
        return counts

    @property
    def residue(self) -> int:
        return sum(1 for s in self.stages.values() if s in KEEPS_OPEN)


def _stage(state: str, category: str | None, blind_labels: int) -> str:
    if state == "covered":
        return "covered"
    if state == "disputed":
        return "disputed"
    if state == "carried":  # made so: a label from the series' earlier triage
        return "carried"
    if state == "labelled":
        return OTHER if category == OTHER else "final"
    return "reviewing" if blind_labels else "open"


def recount(engine: Engine, triage_id: int) -> Recount:
    """Replay the triage's events: each miss starts open (covered when a duplicate was
    retrieved), a label, relabel, agreement, dispute, adjudication, undo or covered move puts
    it where its ``after`` says; a review adds the reviewer's blind label, the undo of one
    (the miss open before and after) takes it back."""
    with Session(engine) as s:
        misses = {
            m.id: m
            for m in s.exec(select(Miss).where(Miss.triage_id == triage_id).order_by(col(Miss.id)))
        }
        events = s.exec(
            select(LabelEvent).where(LabelEvent.triage_id == triage_id).order_by(col(LabelEvent.id))
        ).all()
    state = {i: ("covered" if m.covered_by else "open") for i, m in misses.items()}
    category: dict[int, str | None] = dict.fromkeys(misses)
    blind: dict[int, dict[int | None, str]] = {i: {} for i in misses}
    setter: dict[int, tuple[str, int | None]] = {}
    skipped: dict[int, set[int | None]] = {i: set() for i in misses}
    for e in events:
        i, action = e.miss_id, e.action
        if action in ("label", "relabel", "agree", "dispute", "adjudicate"):
            state[i], category[i] = e.after["state"], e.after["category"]
            setter[i] = (action, e.user_id)
        elif action == "review":
            blind[i][e.user_id] = e.after["category"]
        elif action == "undo":
            if e.before["state"] == "open" and e.after["state"] == "open":
                blind[i].pop(e.user_id, None)  # a reviewer took their blind label back
            else:
                state[i], category[i] = e.after["state"], e.after["category"]
                setter[i] = (action, e.user_id)
        elif action in ("include", "exclude"):
            state[i] = e.after["state"]
        elif action == "skip":
            skipped[i].add(e.user_id)
        elif action == "take_back":
            skipped[i].discard(e.user_id)
    result = Recount(
        stages={},
        causes={},
        rests_on={},
        blind={i: set(b) for i, b in blind.items()},
        skipped=skipped,
    )
    for i in misses:
        stage = _stage(state[i], category[i], len(blind[i]))
        result.stages[i] = stage
        for who in blind[i]:
            if who is not None:
                result.labels[who] += 1
        if stage in ("final", OTHER):
            result.causes[i] = category[i] or ""
            action, who = setter[i]
            if action == "adjudicate":
                result.rests_on[i] = "adjudicated"
                result.decisions[who or 0] += 1
            elif action == "agree":
                result.rests_on[i] = "agreed"
            else:
                result.rests_on[i] = "single"
                result.labels[who or 0] += 1
    return result


def live_leases(engine: Engine, triage_id: int, now: datetime) -> Counter[int]:
    """Each person's live leases in the triage (on miss rows and as review places)."""
    with Session(engine) as s:
        single = s.exec(
            select(Miss.lease_holder_id).where(
                Miss.triage_id == triage_id,
                col(Miss.state).in_(["open", "disputed"]),
                col(Miss.lease_holder_id).is_not(None),
                col(Miss.lease_expires_at) > now,
            )
        ).all()
        double = s.exec(
            select(Review.reviewer_id)
            .join(Miss, col(Miss.id) == col(Review.miss_id))
            .where(
                Review.triage_id == triage_id,
                col(Review.category).is_(None),
                col(Review.lease_expires_at) > now,
                Miss.state == "open",
            )
        ).all()
    return Counter(who for who in [*single, *double] if who is not None)


def check_people(
    *, engine: Engine, triage_id: int, people: list[int], counted: Recount, now: datetime
) -> None:
    """Each person's tally (the review page's progress and queue end) equals the recount."""
    with Session(engine) as s:
        for who in people:
            person = queue.person_tally(session=s, triage_id=triage_id, user_id=who, now=now)
            assert (person.labels, person.decisions) == (
                counted.labels[who],
                counted.decisions[who],
            )
            waiting = dict(person.waiting)
            waiting["for_you_or_with_others"] = waiting.pop("for_you") + waiting.pop("with_others")
            assert {k: n for k, n in waiting.items() if n} == counted.waiting(who), who


def closed_mark(engine: Engine, triage_id: int) -> bool:
    with Session(engine) as s:
        triage = s.get(Triage, triage_id)
        assert triage is not None
        return triage.closed_at is not None


def emails(engine: Engine) -> dict[int, str]:
    with Session(engine) as s:
        return {u.id: u.email for u in s.exec(select(User)) if u.id is not None}


def check_faces(
    *,
    engine: Engine,
    api: TestClient,
    lead_headers: dict[str, str],
    lead_pages: TestClient,
    triage_id: int,
    causes: list[str],
    counted: Recount,
) -> None:
    """Every face's counts equal the recount: the API's summary, the JSON and CSV backlog,
    the dashboard (closure, bars, residue, progress, reviewers table), the closed mark."""
    stages = counted.stage_counts()
    named = Counter(c for c in counted.causes.values() if c != OTHER)
    unlabelled = stages["open"] + stages["reviewing"] + stages["disputed"]
    closes = counted.residue == 0

    summary = api.get(f"/api/v1/triages/{triage_id}", headers=lead_headers).json()
    assert summary["states"] == stages
    assert summary["counts"] == {c: named[c] for c in causes}
    assert (summary["other"], summary["unlabelled"], summary["covered"]) == (
        stages["other"],
        unlabelled,
        stages["covered"],
    )
    assert summary["adjudication"] == stages["disputed"]
    assert (summary["residue"], summary["closes"]) == (counted.residue, closes)
    rests = Counter(counted.rests_on.values())
    assert summary["final"] == {k: rests[k] for k in ("single", "agreed", "adjudicated")}
    assert closed_mark(engine, triage_id) == closes

    download = api.get(f"/api/v1/triages/{triage_id}/backlog?format=json", headers=lead_headers)
    document = json.loads(download.text)
    assert document["states"] == stages
    assert (document["residue"], document["closes"]) == (counted.residue, closes)
    assert document["closure"] == summary["closure"]
    groups = {g["cause"]: g["count"] for g in document["causes"]}
    for cause in causes:
        assert groups[cause] == named[cause]
    assert groups[OTHER] == stages["other"]
    assert groups["unlabelled"] == unlabelled
    assert groups.get("covered", 0) == stages["covered"]
    table = api.get(f"/api/v1/triages/{triage_id}/backlog?format=csv", headers=lead_headers)
    rows = list(csv.DictReader(io.StringIO(table.text.lstrip("\ufeff"))))
    assert Counter(r["stage"] for r in rows) == Counter(counted.stages.values())
    assert {int(r["miss_id"]): r["stage"] for r in rows} == counted.stages

    page = BeautifulSoup(lead_pages.get(f"/triages/{triage_id}").text, "lxml")
    closure = page.select_one("#closure")
    assert closure is not None
    assert closure.get_text(strip=True) == summary["closure"]
    bars = {
        str(tr["data-cause"]): int(tr.select("td")[0].get_text(strip=True).replace(",", ""))
        for tr in page.select("#counts tr[data-cause]")
    }
    assert bars == {**{c: named[c] for c in causes}, OTHER: stages[OTHER], "unlabelled": unlabelled}
    residue = page.select("#residue tbody tr[data-miss]")
    assert len(residue) == min(counted.residue, 100)
    assert {int(str(tr["data-miss"])) for tr in residue} <= {
        i for i, s in counted.stages.items() if s in KEEPS_OPEN
    }
    labelled = page.select_one("#labelled")
    assert labelled is not None
    final = stages["final"] + stages["other"]
    assert labelled.get_text(strip=True) == f"{final} of {len(rows) - stages['covered']} labelled"
    names = emails(engine)
    shown = {
        str(tr["data-reviewer"]): (
            int(tr.select_one(".labels").get_text()),  # type: ignore[union-attr]
            int(tr.select_one(".decisions").get_text())  # type: ignore[union-attr]
            if tr.select_one(".decisions")
            else 0,
        )
        for tr in page.select("#throughput tbody tr[data-reviewer]")
    }
    people = set(counted.labels) | set(counted.decisions)
    expected = {
        names[who]: (counted.labels[who], counted.decisions[who])
        for who in people
        if counted.labels[who] or counted.decisions[who]
    }
    assert shown == expected
    # beside each count: the blind labels on misses still waiting for another reviewer's
    waiting = {
        str(tr["data-reviewer"]): int(
            tr.select_one(".waiting").get_text(strip=True).strip("()").split()[0]  # type: ignore[union-attr]
        )
        for tr in page.select("#throughput tbody tr[data-reviewer]")
        if tr.select_one(".waiting")
    }
    assert waiting == {
        names[who]: n
        for who in people
        if (
            n := sum(
                1
                for i, st in counted.stages.items()
                if st == "reviewing" and who in counted.blind[i]
            )
        )
    }


def triage_files(tmp: Path, *, queries: int, per_query: int) -> dict[str, bytes]:
    """A golden set whose run retrieves none of its relevant documents but, for every other
    query, a copy (same cluster) of the first one: those misses are covered."""
    qrels = "".join(f"q{q} 0 d{q}-{i} {i + 1}\n" for q in range(queries) for i in range(per_query))
    docs = []
    for q in range(queries):
        for i in range(per_query):
            doc: dict[str, Any] = {"_id": f"d{q}-{i}", "title": f"doc {q}-{i}", "text": "text"}
            if i == 0 and q % 2:
                doc["cluster_id"] = f"c{q}"
            docs.append(doc)
        if q % 2:
            docs.append(
                {"_id": f"copy{q}", "title": "a copy", "text": "text", "cluster_id": f"c{q}"}
            )
    run = "".join(
        f"q{q} Q0 {'copy' + str(q) if q % 2 and r == 0 else f'noise{q}-{r}'} {r + 1} {10 - r} t\n"
        for q in range(queries)
        for r in range(3)
    )
    return {
        "qrels": qrels.encode(),
        "corpus": "".join(json.dumps(d) + "\n" for d in docs).encode(),
        "run": run.encode(),
    }
