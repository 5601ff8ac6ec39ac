"""The tables. Importing this package registers every table on ``SQLModel.metadata``."""

from app.models.base import column_width, utcnow
from app.models.exports import Export, WebhookDelivery, WebhookEvent
from app.models.golden import DEFAULT_CAUSES, Document, GoldenQuery, GoldenSet, Judgment
from app.models.runs import Run, RunHead, RunJudged, RunQuery
from app.models.triage import (
    CANT_TELL,
    LABEL_ACTIONS,
    OTHER,
    UNLABELLED,
    LabelAction,
    LabelEvent,
    Miss,
    MissState,
    Resolution,
    Review,
    Triage,
)
from app.models.users import ApiToken, LoginAttempt, Role, User, UserSession

__all__ = [
    "CANT_TELL",
    "DEFAULT_CAUSES",
    "LABEL_ACTIONS",
    "OTHER",
    "UNLABELLED",
    "ApiToken",
    "Document",
    "Export",
    "GoldenQuery",
    "GoldenSet",
    "Judgment",
    "LabelAction",
    "LabelEvent",
    "LoginAttempt",
    "Miss",
    "MissState",
    "Resolution",
    "Review",
    "Role",
    "Run",
    "RunHead",
    "RunJudged",
    "RunQuery",
    "Triage",
    "User",
    "UserSession",
    "WebhookDelivery",
    "WebhookEvent",
    "column_width",
    "utcnow",
]
