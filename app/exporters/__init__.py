"""Issue-tracker exporters, one module each behind one protocol (``base.Exporter``)."""

from __future__ import annotations

from app.exporters.base import Draft, Exporter, Request, Sender, TrackerError
from app.exporters.github import GitHubExporter
from app.exporters.gitlab import GitLabExporter
from app.exporters.jira import JiraExporter
from app.exporters.linear import LinearExporter
from app.exporters.webhook import WebhookExporter
from app.settings import Settings

TRACKERS = ("github", "gitlab", "jira", "linear", "webhook")


class NotConfigured(Exception):
    """The tracker's credentials are not in the settings (no secret is named here)."""


def exporter_for(tracker: str, settings: Settings) -> Exporter:
    """The exporter of ``tracker``, with credentials from the settings."""

    def secret(value: object, variable: str) -> str:
        if value is None:
            raise NotConfigured(f"set {variable} to export to {tracker}")
        return str(value.get_secret_value())  # type: ignore[attr-defined]

    if tracker == "github":
        return GitHubExporter(
            settings.github_api_url, secret(settings.github_token, "MISSTRIAGE_GITHUB_TOKEN")
        )
    if tracker == "gitlab":
        return GitLabExporter(
            settings.gitlab_api_url, secret(settings.gitlab_token, "MISSTRIAGE_GITLAB_TOKEN")
        )
    if tracker == "jira":
        if not settings.jira_api_url or not settings.jira_email:
            raise NotConfigured("set MISSTRIAGE_JIRA_API_URL and MISSTRIAGE_JIRA_EMAIL")
        return JiraExporter(
            settings.jira_api_url,
            settings.jira_email,
            secret(settings.jira_token, "MISSTRIAGE_JIRA_TOKEN"),
        )
    if tracker == "linear":
        return LinearExporter(
            settings.linear_api_url, secret(settings.linear_token, "MISSTRIAGE_LINEAR_TOKEN")
        )
    if tracker == "webhook":
        return WebhookExporter(secret(settings.webhook_secret, "MISSTRIAGE_WEBHOOK_SECRET"))
    raise ValueError(f"unknown tracker {tracker!r}: one of {', '.join(TRACKERS)}")


__all__ = [
    "TRACKERS",
    "Draft",
    "Exporter",
    "NotConfigured",
    "Request",
    "Sender",
    "TrackerError",
    "exporter_for",
]
