"""The queue driven through its services, for tests: one ``Desk`` per test binds the engine
and a clock the test controls, so a test says what people do ("ann claims", "bob labels")
instead of repeating claim-then-label helpers of its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.clock import FrozenClock
from app.models import User
from app.models.triage_public import AdjudicationCase, MissPublic
from app.services import queue
from app.services.triage.triages import get_triage

LEASE = timedelta(minutes=10)


@dataclass
class Desk:
    """Queue actions on one database, at the time of ``clock``; in sessions of their own,
    or all in ``bound`` (a test's session, which then reads what they wrote: SQLite keeps a
    reading session on its snapshot until its transaction ends)."""

    engine: Engine
    clock: FrozenClock = field(default_factory=FrozenClock)
    lease: timedelta = LEASE
    bound: Session | None = None

    @contextmanager
    def session(self) -> Iterator[Session]:
        if self.bound is not None:
            yield self.bound
            return
        with Session(self.engine, expire_on_commit=False) as own:
            yield own

    def claim(self, user: User, triage_id: int) -> MissPublic | None:
        with self.session() as s:
            return queue.claim(
                session=s, triage_id=triage_id, user=user, now=self.clock.now(), lease=self.lease
            )

    def label(
        self,
        user: User,
        miss: MissPublic,
        category: str,
        *,
        note: str = "",
        version: int | None = None,
    ) -> MissPublic:
        with self.session() as s:
            return queue.label(
                session=s,
                miss_id=miss.id,
                user=user,
                category=category,
                note=note,
                version=miss.version if version is None else version,
                now=self.clock.now(),
            )

    def label_next(
        self, user: User, miss: MissPublic, category: str, *, note: str = ""
    ) -> queue.LabelledAndNext:
        with self.session() as s:
            return queue.label_and_claim(
                session=s,
                miss_id=miss.id,
                user=user,
                category=category,
                note=note,
                version=miss.version,
                now=self.clock.now(),
                lease=self.lease,
            )

    def claim_and_label(
        self, user: User, triage_id: int, category: str, *, note: str = ""
    ) -> MissPublic:
        """``user`` claims their next miss and labels it ``category``."""
        miss = self.claim(user, triage_id)
        assert miss is not None, f"{user.email} has nothing to claim in triage {triage_id}"
        return self.label(user, miss, category, note=note)

    def drain(self, user: User, triage_id: int, category: str, *, note: str = "") -> list[int]:
        """``user`` claims and labels until nothing is left for them; the misses labelled."""
        done = []
        while (miss := self.claim(user, triage_id)) is not None:
            self.label(user, miss, category, note=note)
            done.append(miss.id)
        return done

    def skip(self, user: User, miss: MissPublic, reason: str = "not sure") -> MissPublic:
        with self.session() as s:
            return queue.skip(
                session=s, miss_id=miss.id, user=user, reason=reason, now=self.clock.now()
            )

    def release(self, user: User, miss: MissPublic) -> MissPublic:
        with self.session() as s:
            return queue.release(session=s, miss_id=miss.id, user=user, now=self.clock.now())

    def renew(self, user: User, miss: MissPublic) -> MissPublic:
        with self.session() as s:
            return queue.renew(
                session=s, miss_id=miss.id, user=user, now=self.clock.now(), lease=self.lease
            )

    def undo(self, user: User, triage_id: int) -> MissPublic:
        with self.session() as s:
            return queue.undo(
                session=s, triage_id=triage_id, user=user, now=self.clock.now(), lease=self.lease
            )

    def take_back(self, user: User, triage_id: int) -> int:
        with self.session() as s:
            triage = get_triage(session=s, triage_id=triage_id)
            return queue.take_back(
                session=s, triage=triage, user=user, now=self.clock.now()
            ).taken_back

    def claim_adjudication(self, user: User, triage_id: int) -> AdjudicationCase | None:
        with self.session() as s:
            return queue.claim_adjudication(
                session=s, triage_id=triage_id, user=user, now=self.clock.now(), lease=self.lease
            )

    def adjudicate(
        self, user: User, miss: MissPublic, category: str, *, note: str = ""
    ) -> MissPublic:
        with self.session() as s:
            return queue.adjudicate(
                session=s,
                miss_id=miss.id,
                user=user,
                category=category,
                note=note,
                version=miss.version,
                now=self.clock.now(),
            )

    def include_covered(self, user: User, triage_id: int, *, include: bool) -> int:
        with self.session() as s:
            return queue.include_covered(
                session=s, triage_id=triage_id, user=user, include=include, now=self.clock.now()
            )
