"""The tables. Importing this package registers every table on ``SQLModel.metadata``."""

from app.models.base import column_width, utcnow
from app.models.exports import Export, WebhookDelivery, WebhookEvent
from app.models.golden import DEFAULT_CAUSES, Document, GoldenQuery, GoldenSet, Judgment
from app.models.runs import (
    JUDGED,
    LOG,
    RUN_KINDS,
    Run,
    RunClusterQuery,
    RunClustersPublic,
    RunClusterTotals,
    RunHead,
    RunJudged,
    RunQuery,
)
from app.models.triage import (
    LABEL_ACTIONS,
    OTHER,
    UNLABELLED,
    LabelAction,
    LabelEvent,
    Miss,
    MissState,
    Triage,
)
from app.models.users import ApiToken, LoginAttempt, Role, User, UserSession

__all__ = [
    "DEFAULT_CAUSES",
    "JUDGED",
    "LABEL_ACTIONS",
    "LOG",
    "OTHER",
    "RUN_KINDS",
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
    "Role",
    "Run",
    "RunClusterQuery",
    "RunClusterTotals",
    "RunClustersPublic",
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
