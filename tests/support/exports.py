"""Exports run through the service, for the exporter tests."""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.exporters import Tracker as ExportTracker
from app.models import GoldenSet, Run, Triage, User
from app.models.exports import ExportOutcome
from app.services.delivery import exports
from app.settings import Settings

CAUSES = ["not-indexed", "vocabulary-mismatch", "chunk-boundary"]


def run_export(
    engine: Engine,
    settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    tracker: str,
    target: str,
    **kwargs: object,
) -> ExportOutcome:
    triage = labelled[2]
    assert triage.id is not None
    with Session(engine, expire_on_commit=False) as s:
        return exports.export(
            session=s,
            settings=settings,
            triage_id=triage.id,
            tracker=ExportTracker(tracker),
            target=target,
            **kwargs,  # type: ignore[arg-type]
        )


def no_wait(seconds: float) -> None:
    """A ``Sender``'s sleep between attempts in tests: the wait is recorded (``Sender.waits``,
    which the tests assert) and not spent."""
