"""Queue semantics on both databases, with a clock the test controls (no sleeps)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.clock import FrozenClock
from app.models import Miss, MissState, Role, User
from app.services import queue
from app.services.accounts import users
from app.services.errors import Conflict, Forbidden, Invalid, NotFound
from tests.support.triage import make_triage

LEASE = timedelta(minutes=10)
CAUSES = ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]


@pytest.fixture
def people(engine: Engine) -> dict[str, User]:
    with Session(engine, expire_on_commit=False) as session:
        return {
            name: users.create_user(
                session=session, email=f"{name}@example.com", password="long enough", role=role
            )
            for name, role in (("ann", Role.REVIEWER), ("bob", Role.REVIEWER), ("lea", Role.LEAD))
        }


def test_claim_order_lease_and_expiry(
    engine: Engine, tmp_path: Path, people: dict[str, User]
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=2, per_query=2)
    clock = FrozenClock()
    with Session(engine, expire_on_commit=False) as s:
        first = queue.claim(
            session=s, triage_id=triage.id, user=people["ann"], now=clock.now(), lease=LEASE
        )
        assert first is not None
        # Queue order: q0's misses together, grade descending.
        assert (first.qid, first.doc_id, first.grade) == ("q0", "d0-1", 2)
        # Claiming again returns the miss Ann holds, not a new one.
        again = queue.claim(
            session=s, triage_id=triage.id, user=people["ann"], now=clock.now(), lease=LEASE
        )
        assert again is not None
        assert again.id == first.id
        second = queue.claim(
            session=s, triage_id=triage.id, user=people["bob"], now=clock.now(), lease=LEASE
        )
        assert second is not None
        assert (second.qid, second.doc_id) == ("q0", "d0-0")
        # Ann's lease expires; Bob holds his own, so the next claimer (the lead) gets Ann's.
        clock.advance(minutes=11)
        third = queue.claim(
            session=s, triage_id=triage.id, user=people["lea"], now=clock.now(), lease=LEASE
        )
        assert third is not None
        assert third.id == first.id
        assert third.lease_holder == people["lea"].id
        # Ann's label is refused now (someone else holds it), and the attempt is audited.
        with pytest.raises(Forbidden) as refused:
            queue.label(
                session=s,
                miss_id=first.id,
                user=people["ann"],
                category=CAUSES[0],
                note="",
                version=1,
                now=clock.now(),
            )
        assert refused.value.code == "lease_not_held"
        assert [e.action for e in queue.audit_trail(session=s, miss_id=first.id)] == ["refused"]


def test_label_versions_and_conflict_keep_both(
    engine: Engine, tmp_path: Path, people: dict[str, User]
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1)
    clock = FrozenClock()
    with Session(engine, expire_on_commit=False) as s:
        miss = queue.claim(
            session=s, triage_id=triage.id, user=people["ann"], now=clock.now(), lease=LEASE
        )
        assert miss is not None
        labelled = queue.label(
            session=s,
            miss_id=miss.id,
            user=people["ann"],
            category="vocabulary-mismatch",
            note="throttling vs rate limit",
            version=1,
            now=clock.now(),
        )
        assert (labelled.state, labelled.category, labelled.version) == (
            "labelled",
            "vocabulary-mismatch",
            2,
        )
        assert labelled.lease_holder is None
        # A lead relabels with the current version; a stale version is a 409 and is audited.
        queue.label(
            session=s,
            miss_id=miss.id,
            user=people["lea"],
            category="chunk-boundary",
            note="",
            version=2,
            now=clock.now(),
        )
        with pytest.raises(Conflict) as stale:
            queue.label(
                session=s,
                miss_id=miss.id,
                user=people["lea"],
                category="not-indexed",
                note="",
                version=2,
                now=clock.now(),
            )
        assert stale.value.code == "stale_version"
        trail = queue.audit_trail(session=s, miss_id=miss.id)
        assert [e.action for e in trail] == ["label", "relabel", "conflict"]
        assert trail[1].before.category == "vocabulary-mismatch"
        assert trail[1].after.category == "chunk-boundary"
        assert trail[2].before.category == "chunk-boundary"  # what is stored
        assert trail[2].after.category == "not-indexed"  # what was attempted
        # Reviewers cannot relabel.
        with pytest.raises(Forbidden) as forbidden:
            queue.label(
                session=s,
                miss_id=miss.id,
                user=people["ann"],
                category="other",
                note="x",
                version=3,
                now=clock.now(),
            )
        assert forbidden.value.code == "lead_required"


def test_other_needs_a_note_and_causes_are_checked(
    engine: Engine, tmp_path: Path, people: dict[str, User]
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1)
    with Session(engine, expire_on_commit=False) as s:
        miss = queue.claim(
            session=s, triage_id=triage.id, user=people["ann"], now=FrozenClock().now(), lease=LEASE
        )
        assert miss is not None
        for category, note, code in (
            ("other", "  ", "note_required"),
            ("typo", "", "unknown_category"),
        ):
            with pytest.raises(Invalid) as invalid:
                queue.label(
                    session=s,
                    miss_id=miss.id,
                    user=people["ann"],
                    category=category,
                    note=note,
                    version=1,
                    now=FrozenClock().now(),
                )
            assert invalid.value.code == code
        done = queue.label(
            session=s,
            miss_id=miss.id,
            user=people["ann"],
            category="other",
            note="judgment looks wrong",
            version=1,
            now=FrozenClock().now(),
        )
        assert done.note == "judgment looks wrong"


def test_skip_release_undo(engine: Engine, tmp_path: Path, people: dict[str, User]) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=3)
    clock = FrozenClock()
    ann, bob = people["ann"], people["bob"]
    with Session(engine, expire_on_commit=False) as s:
        first = queue.claim(session=s, triage_id=triage.id, user=ann, now=clock.now(), lease=LEASE)
        assert first is not None
        with pytest.raises(Invalid):
            queue.skip(session=s, miss_id=first.id, user=ann, reason=" ", now=clock.now())
        queue.skip(
            session=s, miss_id=first.id, user=ann, reason="need a domain expert", now=clock.now()
        )
        nxt = queue.claim(session=s, triage_id=triage.id, user=ann, now=clock.now(), lease=LEASE)
        assert nxt is not None
        assert nxt.id != first.id
        assert (
            queue.claim(session=s, triage_id=triage.id, user=bob, now=clock.now(), lease=LEASE).id
            == first.id
        )  # type: ignore[union-attr]
        queue.release(session=s, miss_id=first.id, user=bob, now=clock.now())
        labelled = queue.label(
            session=s,
            miss_id=nxt.id,
            user=ann,
            category="not-indexed",
            note="",
            version=1,
            now=clock.now(),
        )
        undone = queue.undo(session=s, triage_id=triage.id, user=ann, now=clock.now(), lease=LEASE)
        assert undone.id == labelled.id
        assert (undone.state, undone.category, undone.version) == ("open", None, 3)
        assert undone.lease_holder == ann.id  # back on Ann's desk
        with pytest.raises(NotFound):
            queue.undo(session=s, triage_id=triage.id, user=ann, now=clock.now(), lease=LEASE)
        assert [e.action for e in queue.audit_trail(session=s, miss_id=first.id)] == [
            "skip",
            "release",
        ]
        assert [e.action for e in queue.audit_trail(session=s, miss_id=nxt.id)] == ["label", "undo"]
        person = queue.person_tally(session=s, triage_id=triage.id, user_id=ann.id, now=clock.now())
        tally = queue.triage_tally(session=s, triage_id=triage.id, causes=CAUSES)
        assert (person.labels, tally.labelled, tally.unlabelled, tally.queued) == (0, 0, 3, 3)
        # the undone miss is Ann's lease again; the one she skipped is not hers to take
        assert person.waiting == {
            "for_you": 2,
            "with_others": 0,
            "another_reviewer": 0,
            "adjudication": 0,
            "skipped": 1,
        }


def test_renew_needs_the_lease(engine: Engine, tmp_path: Path, people: dict[str, User]) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1)
    clock = FrozenClock()
    with Session(engine, expire_on_commit=False) as s:
        miss = queue.claim(
            session=s, triage_id=triage.id, user=people["ann"], now=clock.now(), lease=LEASE
        )
        assert miss is not None
        clock.advance(minutes=9)
        renewed = queue.renew(
            session=s, miss_id=miss.id, user=people["ann"], now=clock.now(), lease=LEASE
        )
        assert renewed.lease_expires_at == clock.now() + LEASE
        with pytest.raises(Forbidden):
            queue.renew(
                session=s, miss_id=miss.id, user=people["bob"], now=clock.now(), lease=LEASE
            )
        stored = s.get(Miss, miss.id)
        assert stored is not None
        assert stored.state == MissState.OPEN.value
