"""The login rate limit: failed logins counted within a window, in the database, so that
every app process behind a load balancer sees one count (a wrong current password given to
change one's own password counts as a failed login). Three counts: per (email, address),
the tight one; per email across addresses, higher, so that a stranger who fails on purpose
with someone's email locks out only their own address; per address across emails."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_
from sqlmodel import Session, col, delete, select

from app.db import writing
from app.models import LoginAttempt
from app.settings import Settings

#: Column widths of the table: longer values are cut (they are only compared).
_EMAIL_CHARS = 320
_ADDRESS_CHARS = 64


@dataclass(frozen=True)
class LoginPolicy:
    per_email_and_address: int
    per_email: int
    per_address: int
    window: timedelta


def policy_for(settings: Settings) -> LoginPolicy:
    """The limits the settings name (``login_failures_*``, ``login_window_seconds``)."""
    return LoginPolicy(
        per_email_and_address=settings.login_failures_per_email_and_address,
        per_email=settings.login_failures_per_email,
        per_address=settings.login_failures_per_address,
        window=timedelta(seconds=settings.login_window_seconds),
    )


def _recent(
    session: Session, where: ColumnElement[bool], *, since: datetime, limit: int
) -> list[datetime]:
    """The ``limit`` most recent failures matching ``where`` inside the window, newest first."""
    return list(
        session.exec(
            select(LoginAttempt.attempted_at)
            .where(where, col(LoginAttempt.attempted_at) > since)
            .order_by(col(LoginAttempt.attempted_at).desc())
            .limit(limit)
        )
    )


def retry_after(
    *, session: Session, email: str, address: str, now: datetime, policy: LoginPolicy
) -> int | None:
    """Seconds to wait before this email may try again from this address; None when it may
    try now. A login is refused once ``per_email_and_address`` failures for the email from
    this address, ``per_email`` for the email from anywhere, or ``per_address`` from the
    address, fall inside the window, until the oldest of them leaves it."""
    since = now - policy.window
    waits: list[timedelta] = []
    same_email = col(LoginAttempt.email) == email[:_EMAIL_CHARS]
    same_address = col(LoginAttempt.address) == address[:_ADDRESS_CHARS]
    for where, limit in (
        (and_(same_email, same_address), policy.per_email_and_address),
        (same_email, policy.per_email),
        (same_address, policy.per_address),
    ):
        failures = _recent(session, where, since=since, limit=limit)
        if len(failures) >= limit:
            waits.append(failures[limit - 1] + policy.window - now)
    if not waits:
        return None
    return max(1, math.ceil(max(waits).total_seconds()))


def record_failure(
    *, session: Session, email: str, address: str, now: datetime, policy: LoginPolicy
) -> None:
    """Count a failed login; failures that have left the window are deleted on the way."""
    with writing(session):
        session.exec(
            delete(LoginAttempt).where(col(LoginAttempt.attempted_at) <= now - policy.window)
        )
        session.add(
            LoginAttempt(
                email=email[:_EMAIL_CHARS], address=address[:_ADDRESS_CHARS], attempted_at=now
            )
        )


def clear_failures(*, session: Session, email: str, address: str) -> None:
    """A successful login forgets the email's failures from this address (not the failures
    others made with the email elsewhere, nor the address's with other emails)."""
    with writing(session):
        session.exec(
            delete(LoginAttempt).where(
                col(LoginAttempt.email) == email[:_EMAIL_CHARS],
                col(LoginAttempt.address) == address[:_ADDRESS_CHARS],
            )
        )
