"""The tally holds whatever people do, in any order: a stateful property test (hypothesis
``RuleBasedStateMachine``) drives claims, labels, skips, take-backs, undos, relabels, double
review with "can't tell", adjudication, covered misses put on and off the queue and leases
running out, by three reviewers (one an adjudicator) and a lead, through the API and the
review page, on both databases. After every step each face's counts (the API's summary, the
dashboard, the JSON and CSV backlog, the reviewers table, the review page's queue end) are
compared with a recount from the audit trail alone, and nobody holds two leases."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.clock import FrozenClock
from app.main import create_app
from app.models import Role
from app.services.accounts import users
from app.settings import Settings
from tests.support.service import HTMX, PASSWORD, login
from tests.support.tally import (
    CANT_TELL,
    OTHER,
    check_faces,
    check_people,
    live_leases,
    recount,
    triage_files,
)

CAUSES = ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]
PEOPLE = ("ann", "bob", "adj", "lea")
#: Every answer the queue may give (status, error code): anything else fails the machine.
DOCUMENTED = {
    (200, None),
    (204, None),
    (403, "lease_not_held"),
    (403, "lead_required"),
    (404, "nothing_to_undo"),
    (409, "stale_version"),
    (409, "not_disputed"),
    (409, "not_on_queue"),
    (422, "unknown_category"),
}
#: The causes people pick, "not-indexed" most often: reviewers then agree often enough for
#: agreed misses (and the triage's closure) to come up within a run.
PICKS = [CAUSES[0], CAUSES[0], CAUSES[0], CAUSES[1], CAUSES[2], OTHER, CANT_TELL]
#: The review page's queue end, as the recount says it ("3 wait for another reviewer").
WAITING = re.compile(r"of the ([\d,]+) without one, (.*)\. See the triage")


def _people(engine: Engine) -> dict[str, tuple[int, str]]:
    """(id, token) per person: three reviewers (adj flagged adjudicator) and a lead."""
    made = {}
    with Session(engine, expire_on_commit=False) as s:
        for name in PEOPLE:
            user = users.create_user(
                session=s,
                email=f"{name}@example.com",
                password=PASSWORD,
                role=Role.LEAD if name == "lea" else Role.REVIEWER,
                adjudicator=name == "adj",
            )
            token = users.create_token(session=s, user=user, name="machine").secret
            assert user.id is not None
            made[name] = (user.id, token)
    return made


class Machine(RuleBasedStateMachine):
    """One triage per run of the machine; the test's fixtures bind its class attributes."""

    engine: Engine
    settings: Settings
    tmp: Path
    people: dict[str, tuple[int, str]]
    made = 0

    def __init__(self) -> None:
        super().__init__()
        self.clock = FrozenClock()
        self.app = create_app(self.settings, self.engine)
        self.app.state.clock = self.clock
        self.api = TestClient(self.app, base_url="http://testserver")
        self.pages: dict[str, TestClient] = {}
        for name in PEOPLE:
            self.pages[name] = TestClient(self.app, base_url="http://testserver")
            login(self.pages[name], f"{name}@example.com")
        #: The miss each person was last handed, as they saw it.
        self.held: dict[str, dict[str, object]] = {}

    def headers(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.people[name][1]}"}

    def answered(self, response: object) -> dict[str, object] | None:
        status = response.status_code  # type: ignore[attr-defined]
        body = response.json() if response.content else None  # type: ignore[attr-defined]
        code = body["error"]["code"] if status >= 400 and body else None
        assert (status, code) in DOCUMENTED, (status, code, response.text)  # type: ignore[attr-defined]
        return body if status == 200 else None

    @initialize(
        overlap=st.sampled_from([1.0, 0.5, 0.0]),
        seed=st.integers(0, 5),
        queries=st.integers(2, 4),
    )
    def make_triage(self, overlap: float, seed: int, queries: int) -> None:
        Machine.made += 1
        name = f"g{Machine.made}"
        files = triage_files(self.tmp, queries=queries, per_query=2)
        lead = self.headers("lea")
        golden = self.api.post(
            "/api/v1/golden-sets",
            headers=lead,
            data={"name": name},
            files={"qrels": ("q.tsv", files["qrels"]), "corpus": ("c.jsonl", files["corpus"])},
        ).json()
        run = self.api.post(
            f"/api/v1/golden-sets/{golden['id']}/runs",
            headers=lead,
            data={"name": "run"},
            files={"run": ("run.trec", files["run"])},
        ).json()
        triage = self.api.post(
            f"/api/v1/runs/{run['id']}/triages",
            headers=lead,
            json={
                "depth": 3,
                "k": 1,
                "overlap": {"reviewers": 2, "fraction": overlap, "seed": seed},
            },
        ).json()
        self.triage = triage["id"]
        self.base = f"/api/v1/triages/{self.triage}"

    # --- what people do ------------------------------------------------------------------

    @rule(who=st.sampled_from(PEOPLE))
    def claim_on_the_review_page(self, who: str) -> None:
        """The review page's claim: the card of a miss, or the queue's end with its reasons,
        which must be the recount's."""
        card = self.pages[who].post(f"/triages/{self.triage}/review/claim", headers=HTMX)
        assert card.status_code == 200, card.text
        soup = BeautifulSoup(card.text, "lxml")
        counted = recount(self.engine, self.triage)
        stages = counted.stage_counts()
        progress = " ".join(soup.select_one("#progress").get_text().split())  # type: ignore[union-attr]
        final, to_go = stages["final"] + stages[OTHER], len(counted.stages) - stages["covered"]
        unlabelled = stages["open"] + stages["reviewing"] + stages["disputed"]
        assert progress == (
            f"yours {counted.labels[self.people[who][0]]} · final {final} of {to_go} · "
            f"to go {unlabelled}"
        )
        held = soup.select_one(".card[data-miss]")
        if held is not None:
            self.held[who] = {
                "id": int(str(held["data-miss"])),
                "version": int(str(held["data-version"])),
            }
            return
        self.held.pop(who, None)
        said = " ".join(soup.select_one("#waiting").get_text().split())  # type: ignore[union-attr]
        counted = recount(self.engine, self.triage)
        unlabelled = sum(
            1 for s in counted.stages.values() if s in ("open", "reviewing", "disputed")
        )
        if not unlabelled:
            assert "without one" not in said
            return
        found = WAITING.search(said)
        assert found is not None, said
        assert int(found.group(1).replace(",", "")) == unlabelled
        reasons = dict(_reason(part) for part in found.group(2).split(", "))
        assert sum(reasons.values()) == unlabelled
        assert "yours to take" not in reasons  # the claim found nothing: none is
        assert reasons.get("for adjudication", 0) == counted.stage_counts()["disputed"]

    @rule(who=st.sampled_from(PEOPLE))
    def claim_through_the_api(self, who: str) -> None:
        miss = self.answered(self.api.post(f"{self.base}/claim", headers=self.headers(who)))
        if miss is not None:
            self.held[who] = miss

    @rule(who=st.sampled_from(PEOPLE), cause=st.sampled_from(PICKS))
    def claim_and_label(self, who: str, cause: str) -> None:
        """The common case: take the next miss and label it at once."""
        self.claim_through_the_api(who)
        self.label_what_you_hold(who, cause)

    @rule(who=st.sampled_from(PEOPLE), cause=st.sampled_from(PICKS))
    def label_what_you_hold(self, who: str, cause: str) -> None:
        miss = self.held.get(who)
        if miss is None:
            return
        body = {
            "category": cause,
            "note": "why" if cause == OTHER else "",
            "version": miss["version"],
        }
        self.answered(
            self.api.post(
                f"/api/v1/misses/{miss['id']}/label", headers=self.headers(who), json=body
            )
        )

    @rule(
        who=st.sampled_from(["lea", "lea", "ann", "adj"]),
        pick=st.integers(0, 40),
        cause=st.sampled_from([*CAUSES, OTHER]),
        stale=st.booleans(),
    )
    def label_any_miss(self, who: str, pick: int, cause: str, stale: bool) -> None:
        """A label of any miss, at its version or an older one: a lead's relabel or decision,
        a stale tab, a reviewer's guess at a miss they do not hold."""
        items = self.api.get(f"{self.base}/misses", headers=self.headers("lea")).json()["items"]
        miss = items[pick % len(items)]
        version = max(1, miss["version"] - 1) if stale else miss["version"]
        body = {"category": cause, "note": "lead" if cause == OTHER else "", "version": version}
        self.answered(
            self.api.post(
                f"/api/v1/misses/{miss['id']}/label", headers=self.headers(who), json=body
            )
        )

    @rule(who=st.sampled_from(PEOPLE))
    def skip(self, who: str) -> None:
        miss = self.held.pop(who, None)
        if miss is not None:
            self.answered(
                self.api.post(
                    f"/api/v1/misses/{miss['id']}/skip",
                    headers=self.headers(who),
                    json={"reason": "not sure"},
                )
            )

    @rule(who=st.sampled_from(PEOPLE))
    def release(self, who: str) -> None:
        miss = self.held.pop(who, None)
        if miss is not None:
            self.answered(
                self.api.post(f"/api/v1/misses/{miss['id']}/release", headers=self.headers(who))
            )

    @rule(who=st.sampled_from(PEOPLE))
    def take_back(self, who: str) -> None:
        self.answered(self.api.post(f"{self.base}/take-back", headers=self.headers(who)))

    @rule(who=st.sampled_from(PEOPLE))
    def undo(self, who: str) -> None:
        miss = self.answered(self.api.post(f"{self.base}/undo", headers=self.headers(who)))
        if miss is not None:
            self.held[who] = miss

    @rule(who=st.sampled_from(["adj", "lea"]), cause=st.sampled_from([*CAUSES, OTHER]))
    def adjudicate(self, who: str, cause: str) -> None:
        case = self.answered(
            self.api.post(f"{self.base}/adjudication/claim", headers=self.headers(who))
        )
        if case is None:
            return
        body = {"category": cause, "note": "decided", "version": case["version"]}
        self.answered(
            self.api.post(
                f"/api/v1/misses/{case['id']}/adjudicate", headers=self.headers(who), json=body
            )
        )

    @rule(include=st.booleans())
    def covered(self, include: bool) -> None:
        self.answered(
            self.api.post(
                f"{self.base}/covered", headers=self.headers("lea"), json={"include": include}
            )
        )

    @rule(minutes=st.sampled_from([1, 11]))
    def time_passes(self, minutes: int) -> None:
        self.clock.advance(minutes=minutes)

    # --- what must hold after every step --------------------------------------------------

    @invariant()
    def every_face_counts_what_the_trail_says(self) -> None:
        if not hasattr(self, "triage"):
            return
        check_faces(
            engine=self.engine,
            api=self.api,
            lead_headers=self.headers("lea"),
            lead_pages=self.pages["lea"],
            triage_id=self.triage,
            causes=CAUSES,
            counted=recount(self.engine, self.triage),
        )

    @invariant()
    def each_person_counts_what_the_trail_says(self) -> None:
        if hasattr(self, "triage"):
            check_people(
                engine=self.engine,
                triage_id=self.triage,
                people=[who for who, _ in self.people.values()],
                counted=recount(self.engine, self.triage),
                now=self.clock.now(),
            )

    @invariant()
    def nobody_holds_two_leases(self) -> None:
        if hasattr(self, "triage"):
            leases = live_leases(self.engine, self.triage, self.clock.now())
            assert all(n <= 1 for n in leases.values()), leases

    def teardown(self) -> None:
        for client in [self.api, *self.pages.values()]:
            client.close()


def _reason(part: str) -> tuple[str, int]:
    """ "3 wait for another reviewer" -> ("for another reviewer", 3)."""
    n, _, words = part.partition(" ")
    for verb in ("wait ", "waits ", "are ", "is "):
        if words.startswith(verb):
            words = words[len(verb) :]
    return words.replace("with another reviewer", "with other reviewers"), int(n.replace(",", ""))


@pytest.fixture
def machine(engine: Engine, settings: Settings, tmp_path: Path) -> type[Machine]:
    Machine.engine, Machine.settings, Machine.tmp = engine, settings, tmp_path
    Machine.people = _people(engine)
    return Machine


def test_the_tally_holds_whatever_people_do(machine: type[Machine]) -> None:
    runner = machine.TestCase
    runner.settings = settings(
        max_examples=16,
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    runner().runTest()
