"""Time, injectable: lease expiry is tested with a clock the test controls, never sleeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def utcnow() -> datetime:
    """The time now, timezone-aware UTC (the tables refuse naive datetimes)."""
    return datetime.now(UTC)


class Clock:
    def now(self) -> datetime:
        return utcnow()


class FrozenClock(Clock):
    """A clock that moves only when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or utcnow()

    def now(self) -> datetime:
        return self.current

    def advance(self, **delta: float) -> None:
        self.current += timedelta(**delta)
