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


#: The settings a push to each tracker needs (a preview needs none of them).
CREDENTIALS = {
    "github": ("MISSTRIAGE_GITHUB_TOKEN",),
    "gitlab": ("MISSTRIAGE_GITLAB_TOKEN",),
    "jira": ("MISSTRIAGE_JIRA_API_URL", "MISSTRIAGE_JIRA_EMAIL", "MISSTRIAGE_JIRA_TOKEN"),
    "linear": ("MISSTRIAGE_LINEAR_TOKEN",),
    "webhook": ("MISSTRIAGE_WEBHOOK_SECRET",),
}
#: What a dry run without credentials shows in their place (secret headers are masked anyway).
PLACEHOLDER = "***"


class NotConfigured(Exception):
    """The tracker's credentials are not in the settings (no secret is named here)."""


def missing_credentials(tracker: str, settings: Settings) -> list[str]:
    """The settings (environment variables) a push to ``tracker`` needs and lacks."""
    return [
        variable
        for variable in CREDENTIALS.get(tracker, ())
        if getattr(settings, variable.removeprefix("MISSTRIAGE_").lower(), None) in (None, "")
    ]


def exporter_for(tracker: str, settings: Settings, *, dry_run: bool = False) -> Exporter:
    """The exporter of ``tracker``, with credentials from the settings. A dry run works
    without them: placeholders stand in, and it sends nothing."""

    def secret(value: object, variable: str) -> str:
        if value is None:
            if dry_run:
                return PLACEHOLDER
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
        if not dry_run and (not settings.jira_api_url or not settings.jira_email):
            raise NotConfigured("set MISSTRIAGE_JIRA_API_URL and MISSTRIAGE_JIRA_EMAIL")
        return JiraExporter(
            settings.jira_api_url or "{MISSTRIAGE_JIRA_API_URL}",
            settings.jira_email or PLACEHOLDER,
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
    "CREDENTIALS",
    "TRACKERS",
    "Draft",
    "Exporter",
    "NotConfigured",
    "Request",
    "Sender",
    "TrackerError",
    "exporter_for",
    "missing_credentials",
]
