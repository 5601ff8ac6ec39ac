"""Double review on both databases, with a clock the test controls: the queue offers an overlap
miss to distinct reviewers until it has its labels, labelling is blind, agreement gives the
final label, disagreement and "can't tell" go to adjudication; versioned and audited."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.models import CANT_TELL, Miss, MissState, Review, Role, User
from app.models.triage_public import Overlap
from app.services import queue
from app.services.errors import Conflict, Forbidden, Invalid
from app.services.triage.agreement import review_labels
from app.services.triage.closure import closure_report
from app.services.triage.triages import triage_context
from tests.support.queue import Desk
from tests.support.triage import make_people, make_triage

LEASE = timedelta(minutes=10)
CAUSES = ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]
TWO = Overlap(reviewers=2, fraction=1.0, seed=0)


@pytest.fixture
def people(engine: Engine) -> dict[str, User]:
    return make_people(
        engine,
        ("ann", Role.REVIEWER),
        ("bob", Role.REVIEWER),
        ("cat", Role.REVIEWER),
        ("adjudicator", Role.REVIEWER),
        ("lea", Role.LEAD),
    )


def test_two_reviewers_hold_one_miss_and_a_third_gets_the_next(
    engine: Engine, tmp_path: Path, people: dict[str, User]
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=2, overlap=TWO)
    assert triage.id is not None
    desk = Desk(engine)
    ann, bob, cat = people["ann"], people["bob"], people["cat"]
    with Session(engine, expire_on_commit=False) as s:
        desk.bound = s
        first = desk.claim(ann, triage.id)
        assert first is not None
        assert (first.reviewers, first.lease_holder) == (2, ann.id)
        again = desk.claim(ann, triage.id)  # her current miss, not a second one
        assert again is not None
        assert again.id == first.id
        bobs = desk.claim(bob, triage.id)
        assert bobs is not None
        assert (bobs.id, bobs.lease_holder) == (first.id, bob.id)  # two leases on one miss
        cats = desk.claim(cat, triage.id)
        assert cats is not None
        assert cats.id != first.id  # no third lease: two labels are asked for

        # Ann labels: the miss is unchanged for everybody else (blind), still open.
        after = desk.label(ann, first, "vocabulary-mismatch", note="throttling")
        assert (after.state, after.category, after.version) == ("open", None, 1)
        # Her claims never return a miss she labelled: she gets the one Cat holds.
        nxt = desk.claim(ann, triage.id)
        assert nxt is not None
        assert nxt.id == cats.id
        # She cannot label it twice.
        with pytest.raises(Conflict) as twice:
            desk.label(ann, first, "not-indexed")
        # a repeat answers as a repeated single-review label does: her own label is current
        assert twice.value.code == "stale_version"
        assert twice.value.details["current"]["category"] == "vocabulary-mismatch"
        # Bob sees neither her label in the miss nor her events in its audit trail.
        listed = s.get(Miss, first.id)
        assert listed is not None
        assert listed.category is None
        bobs_trail = queue.audit_trail(session=s, miss_id=first.id, viewer=bob)
        assert bobs_trail == []
        # Bob agrees: the final label, version + 1, resolution "agreed".
        final = desk.label(bob, bobs, "vocabulary-mismatch", note="rate limiting")
        assert (final.state, final.category, final.version) == (
            "labelled",
            "vocabulary-mismatch",
            2,
        )
        assert final.note == "throttling | rate limiting"
        resolved = s.get(Miss, first.id)
        assert resolved is not None
        assert resolved.resolution == "agreed"
        trail = queue.audit_trail(session=s, miss_id=first.id, viewer=bob)
        assert [(e.action, e.after.category) for e in trail] == [
            ("review", "vocabulary-mismatch"),
            ("conflict", "not-indexed"),  # her second label, refused and kept
            ("review", "vocabulary-mismatch"),
            ("agree", "vocabulary-mismatch"),
        ]
        labels = s.exec(select(Review).where(Review.miss_id == first.id)).all()
        assert sorted(r.reviewer_id for r in labels) == sorted([ann.id, bob.id])  # type: ignore[type-var]


def test_never_more_labels_than_asked_after_a_lease_expires(
    engine: Engine, tmp_path: Path, people: dict[str, User]
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1, overlap=TWO)
    assert triage.id is not None
    desk = Desk(engine)
    clock = desk.clock
    ann, bob, cat = people["ann"], people["bob"], people["cat"]
    with Session(engine, expire_on_commit=False) as s:
        desk.bound = s
        mine = desk.claim(ann, triage.id)
        assert mine is not None
        clock.advance(minutes=11)  # Ann's lease runs out; Bob and Cat take both places
        assert desk.claim(bob, triage.id) is not None
        cats = desk.claim(cat, triage.id)
        assert cats is not None
        assert cats.id == mine.id
        with pytest.raises(Forbidden) as refused:
            desk.label(ann, mine, "not-indexed")
        assert refused.value.code == "lease_not_held"
        assert desk.claim(ann, triage.id) is None  # no room for a third reviewer
        desk.label(bob, cats, "not-indexed")
        done = desk.label(cat, cats, "not-indexed")
        assert done.state == "labelled"
        stored = s.exec(select(Review).where(Review.miss_id == mine.id)).all()
        assert len(stored) == 2  # Ann's stale lease went with the resolution
        assert [e.action for e in queue.audit_trail(session=s, miss_id=mine.id)] == [
            "refused",
            "review",
            "review",
            "agree",
        ]


def test_cant_tell_goes_to_adjudication_leased_versioned_audited(
    engine: Engine, tmp_path: Path, people: dict[str, User]
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=2, overlap=TWO)
    assert triage.id is not None
    desk = Desk(engine)
    clock = desk.clock
    ann, bob, lea = people["ann"], people["bob"], people["lea"]
    adj = people["adjudicator"]
    with Session(engine, expire_on_commit=False) as s:
        desk.bound = s
        ctx = triage_context(session=s, triage_id=triage.id)
        disputed = []
        for first, second in (("not-indexed", CANT_TELL), ("not-indexed", "chunk-boundary")):
            a = desk.claim(ann, triage.id)
            b = desk.claim(bob, triage.id)
            assert a is not None
            assert b is not None
            assert a.id == b.id
            desk.label(ann, a, first, note="says A")
            out = desk.label(bob, b, second, note="says B")
            assert (out.state, out.category, out.version) == ("disputed", None, 2)
            disputed.append(out)
        assert desk.claim(ann, triage.id) is None
        report = closure_report(session=s, triage=ctx.triage, causes=ctx.causes)
        assert (report.unlabelled, report.adjudication, report.closes) == (2, 2, False)
        assert "2 unlabelled (2 awaiting adjudication)" in report.closure

        # A reviewer without the flag may not adjudicate; one with it and a lead may.
        with pytest.raises(Forbidden) as denied:
            queue.claim_adjudication(
                session=s, triage_id=ctx.triage_id, user=ann, now=clock.now(), lease=LEASE
            )
        assert denied.value.code == "adjudicator_required"
        case = queue.claim_adjudication(
            session=s, triage_id=ctx.triage_id, user=adj, now=clock.now(), lease=LEASE
        )
        assert case is not None
        assert case.id == disputed[0].id
        assert [(x.email, x.category, x.note) for x in case.labels] == [
            ("ann@example.com", "not-indexed", "says A"),
            ("bob@example.com", CANT_TELL, "says B"),
        ]
        other = queue.claim_adjudication(
            session=s, triage_id=ctx.triage_id, user=lea, now=clock.now(), lease=LEASE
        )
        assert other is not None
        assert other.id == disputed[1].id  # never the miss another adjudicator holds
        with pytest.raises(Invalid):  # can't tell is never a final label
            queue.adjudicate(
                session=s,
                miss_id=case.id,
                user=adj,
                category=CANT_TELL,
                note="",
                version=case.version,
                now=clock.now(),
            )
        # The lead decides the adjudicator's miss first; the adjudicator's version is stale.
        queue.adjudicate(
            session=s,
            miss_id=case.id,
            user=lea,
            category="not-indexed",
            note="the PDF never reached the index",
            version=case.version,
            now=clock.now(),
        )
        with pytest.raises(Conflict) as stale:
            queue.adjudicate(
                session=s,
                miss_id=case.id,
                user=adj,
                category="chunk-boundary",
                note="",
                version=case.version,
                now=clock.now(),
            )
        assert stale.value.code == "stale_version"
        trail = queue.audit_trail(session=s, miss_id=case.id)
        assert [e.action for e in trail] == [
            "review",
            "review",
            "dispute",
            "adjudicate",
            "conflict",
        ]
        assert (trail[-1].before.version, trail[-1].before.category) == (3, "not-indexed")
        assert (trail[-1].after.version, trail[-1].after.category) == (2, "chunk-boundary")
        done = queue.adjudicate(
            session=s,
            miss_id=other.id,
            user=lea,
            category="chunk-boundary",
            note="",
            version=other.version,
            now=clock.now(),
        )
        assert (done.state, done.category) == ("labelled", "chunk-boundary")
        assert (
            queue.claim_adjudication(
                session=s, triage_id=ctx.triage_id, user=lea, now=clock.now(), lease=LEASE
            )
            is None
        )
        report = closure_report(session=s, triage=ctx.triage, causes=ctx.causes)
        assert report.closes
        assert report.final.model_dump() == {"single": 0, "agreed": 0, "adjudicated": 2}
        assert report.closure.endswith("the categories close; 2 adjudicated")
        units = review_labels(session=s, triage=ctx.triage)
        assert [(u.labels, u.final) for u in units] == [
            ({ann.id: "not-indexed", bob.id: CANT_TELL}, "not-indexed"),
            ({ann.id: "not-indexed", bob.id: "chunk-boundary"}, "chunk-boundary"),
        ]


def test_a_stale_version_is_a_409_with_both_versions_in_the_trail(
    engine: Engine, tmp_path: Path, people: dict[str, User]
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1, overlap=TWO)
    assert triage.id is not None
    desk = Desk(engine)
    with Session(engine, expire_on_commit=False) as s:
        desk.bound = s
        miss = desk.claim(people["ann"], triage.id)
        assert miss is not None
        with pytest.raises(Conflict) as stale:
            desk.label(people["ann"], miss, "not-indexed", version=7)
        assert stale.value.code == "stale_version"
        (event,) = queue.audit_trail(session=s, miss_id=miss.id)
        assert (event.action, event.before.version, event.after.version) == ("conflict", 1, 7)
        assert event.after.category == "not-indexed"
        # nothing was lost or counted: her label still goes in at the current version
        assert desk.label(people["ann"], miss, "not-indexed").state == "open"


def test_cant_tell_is_only_for_overlap_misses(
    engine: Engine, tmp_path: Path, people: dict[str, User]
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1)
    assert triage.id is not None
    desk = Desk(engine)
    with Session(engine, expire_on_commit=False):
        miss = desk.claim(people["ann"], triage.id)
        assert miss is not None
        assert miss.reviewers == 1
        with pytest.raises(Invalid) as invalid:
            desk.label(people["ann"], miss, CANT_TELL)
        assert invalid.value.code == "unknown_category"


def test_a_sample_gets_two_reviewers_and_the_rest_one(
    engine: Engine, tmp_path: Path, people: dict[str, User]
) -> None:
    half = Overlap(reviewers=2, fraction=0.5, seed=7)
    _, _, triage = make_triage(engine, tmp_path, queries=5, per_query=2, overlap=half)
    assert triage.id is not None
    desk = Desk(engine)
    with Session(engine, expire_on_commit=False) as s:
        desk.bound = s
        needs = s.exec(
            select(Miss.reviewers).where(Miss.triage_id == triage.id).order_by(col(Miss.position))
        ).all()
        assert sorted(needs) == [1] * 5 + [2] * 5
        # Drain: Ann and Bob each claim and label until nothing is left for them.
        labels = 0
        for user in (people["ann"], people["bob"], people["ann"], people["bob"]):
            while (miss := desk.claim(user, triage.id)) is not None:
                desk.label(user, miss, "chunk-boundary")
                labels += 1
        assert labels == 15  # 5 single + 5 x 2
        ctx = triage_context(session=s, triage_id=triage.id)
        report = closure_report(session=s, triage=ctx.triage, causes=ctx.causes)
        assert report.final.model_dump() == {"single": 5, "agreed": 5, "adjudicated": 0}
        assert report.closure.endswith("; 5 single-reviewed, 5 agreed")
        states = s.exec(select(Miss.state).where(Miss.triage_id == triage.id)).all()
        assert set(states) == {MissState.LABELLED.value}
    _, _, again = make_triage(engine, tmp_path, queries=5, per_query=2, overlap=half, name="again")
    with Session(engine) as s:
        repeat = s.exec(
            select(Miss.reviewers).where(Miss.triage_id == again.id).order_by(col(Miss.position))
        ).all()
    assert repeat == needs  # the same seed, the same sample
