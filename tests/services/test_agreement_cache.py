"""The agreement kept per process is measured again whenever a label of the triage changes,
and only then."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.models import Role
from app.models.triage_public import Overlap
from app.services import queue
from app.services.triage import agreement
from tests.support.queue import Desk
from tests.support.triage import make_people, make_triage

LEASE = timedelta(minutes=10)
CAUSES = ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]


def test_the_agreement_follows_the_labels(engine: Engine, tmp_path: Path) -> None:
    _, _, triage = make_triage(
        engine, tmp_path, queries=1, per_query=3, overlap=Overlap(reviewers=2)
    )
    people = make_people(engine, ("ann", Role.REVIEWER), ("bob", Role.REVIEWER), ("lea", Role.LEAD))
    desk = Desk(engine)
    clock = desk.clock
    with Session(engine, expire_on_commit=False) as s:
        desk.bound = s
        for name in ("ann", "bob"):  # the first miss: they agree
            desk.claim_and_label(people[name], triage.id, CAUSES[0])
        first = agreement.triage_agreement(session=s, triage=triage, causes=CAUSES)
        assert (first.units, first.confusion_pairs) == (1, 1)
        # nothing changed: the same answer, not measured again
        assert agreement.triage_agreement(session=s, triage=triage, causes=CAUSES) is first
        # one label of two on the next miss, at the same instant: no unit yet, the same
        # figures (measured again: every write of the queue is an event, counted in the key)
        desk.claim_and_label(people["ann"], triage.id, CAUSES[0])
        assert agreement.triage_agreement(session=s, triage=triage, causes=CAUSES) == first
        # the second label disagrees, still at the same instant: the miss leaves the queue
        # (disputed), and the counts of the misses off it tell the change
        desk.claim_and_label(people["bob"], triage.id, CAUSES[1])
        second = agreement.triage_agreement(session=s, triage=triage, causes=CAUSES)
        assert (second.units, second.confusion_pairs) == (2, 2)
        assert second.confusion[CAUSES[0]][CAUSES[1]] == 1
        # a later event, the lead's adjudication: measured again, the same two units
        clock.advance(seconds=1)
        case = queue.claim_adjudication(
            session=s, triage_id=triage.id, user=people["lea"], now=clock.now(), lease=LEASE
        )
        assert case is not None
        queue.adjudicate(
            session=s,
            miss_id=case.id,
            user=people["lea"],
            category=CAUSES[1],
            note="",
            version=case.version,
            now=clock.now(),
        )
        third = agreement.triage_agreement(session=s, triage=triage, causes=CAUSES)
        assert third is not second
        assert third.units == 2
        bob = next(r for r in third.per_reviewer if r.reviewer == "bob@example.com")
        assert (bob.compared, bob.equal) == (2, 2)  # the final labels are his


def test_two_databases_with_the_same_triage_id_keep_apart(tmp_path: Path) -> None:
    """Triage ids repeat across databases (and when one is emptied): with the same labels'
    time and counts, each database still gets its own agreement."""
    from app.db import make_engine
    from app.migrate import upgrade
    from tests.support.service import make_settings

    found = []
    for name, second in (("one", CAUSES[0]), ("two", CAUSES[1])):
        settings = make_settings(f"sqlite:///{tmp_path / name}.db")
        upgrade(settings)
        engine = make_engine(settings)
        folder = tmp_path / name
        folder.mkdir()
        _, _, triage = make_triage(
            engine, folder, queries=1, per_query=1, overlap=Overlap(reviewers=2)
        )
        people = make_people(engine, ("ann", Role.REVIEWER), ("bob", Role.REVIEWER))
        desk = Desk(engine)
        with Session(engine, expire_on_commit=False) as s:
            desk.bound = s
            desk.claim_and_label(people["ann"], triage.id, CAUSES[0])
            desk.claim_and_label(people["bob"], triage.id, second)
            found.append(agreement.triage_agreement(session=s, triage=triage, causes=CAUSES))
        engine.dispose()
    assert [a.triage_id for a in found] == [1, 1]
    assert found[0].confusion[CAUSES[0]][CAUSES[0]] == 1  # they agreed in one
    assert found[1].confusion[CAUSES[0]][CAUSES[1]] == 1  # and disagreed in the other
