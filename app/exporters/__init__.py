"""Issue-tracker exporters, one module each behind one protocol (``base.Exporter``), and the
one registry of trackers (``REGISTRY``): what each is called, which settings a push to it
needs, and how its exporter is built."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from app.exporters.base import (
    Draft,
    Exporter,
    Follow,
    Request,
    Sender,
    TargetRefused,
    Tracker,
    TrackerError,
)
from app.exporters.github import GitHubExporter
from app.exporters.gitlab import GitLabExporter
from app.exporters.jira import JiraExporter
from app.exporters.linear import LinearExporter
from app.exporters.webhook import WebhookExporter
from app.settings import Settings

#: What a dry run without credentials shows in their place (secret headers are masked anyway).
PLACEHOLDER = "***"


class Setting(Protocol):
    """A setting's value by its environment variable (``MISSTRIAGE_GITHUB_TOKEN``), secrets
    revealed; ``placeholder`` (a dry run's) for a setting that is not set."""

    def __call__(self, variable: str, *, placeholder: str = PLACEHOLDER) -> str: ...


@dataclass(frozen=True)
class Registration:
    """One tracker of the registry."""

    #: The tracker in a sentence: "a push to GitHub needs ...".
    title: str
    #: The settings (environment variables) a push needs; a preview needs none of them.
    credentials: tuple[str, ...]
    build: Callable[[Settings, Setting], Exporter]


REGISTRY: dict[Tracker, Registration] = {
    Tracker.GITHUB: Registration(
        "GitHub",
        ("MISSTRIAGE_GITHUB_TOKEN",),
        lambda settings, setting: GitHubExporter(
            settings.github_api_url, setting("MISSTRIAGE_GITHUB_TOKEN")
        ),
    ),
    Tracker.GITLAB: Registration(
        "GitLab",
        ("MISSTRIAGE_GITLAB_TOKEN",),
        lambda settings, setting: GitLabExporter(
            settings.gitlab_api_url, setting("MISSTRIAGE_GITLAB_TOKEN")
        ),
    ),
    Tracker.JIRA: Registration(
        "Jira",
        ("MISSTRIAGE_JIRA_API_URL", "MISSTRIAGE_JIRA_EMAIL", "MISSTRIAGE_JIRA_TOKEN"),
        lambda _settings, setting: JiraExporter(
            setting("MISSTRIAGE_JIRA_API_URL", placeholder="{MISSTRIAGE_JIRA_API_URL}"),
            setting("MISSTRIAGE_JIRA_EMAIL"),
            setting("MISSTRIAGE_JIRA_TOKEN"),
        ),
    ),
    Tracker.LINEAR: Registration(
        "Linear",
        ("MISSTRIAGE_LINEAR_TOKEN",),
        lambda settings, setting: LinearExporter(
            settings.linear_api_url, setting("MISSTRIAGE_LINEAR_TOKEN")
        ),
    ),
    Tracker.WEBHOOK: Registration(
        "a webhook",
        ("MISSTRIAGE_WEBHOOK_SECRET",),
        lambda _settings, setting: WebhookExporter(setting("MISSTRIAGE_WEBHOOK_SECRET")),
    ),
}


class NotConfigured(Exception):
    """The tracker's credentials are not in the settings (no secret is named here)."""


def tracker_named(name: str) -> Tracker | None:
    """The tracker called ``name`` (``github``), or None."""
    try:
        return Tracker(name)
    except ValueError:
        return None


def _value(settings: Settings, variable: str) -> object:
    return getattr(settings, variable.removeprefix("MISSTRIAGE_").lower(), None)


def missing_credentials(tracker: Tracker, settings: Settings) -> list[str]:
    """The settings (environment variables) a push to ``tracker`` needs and lacks."""
    return [
        variable
        for variable in REGISTRY[tracker].credentials
        if _value(settings, variable) in (None, "")
    ]


def exporter_for(tracker: Tracker, settings: Settings, *, dry_run: bool = False) -> Exporter:
    """The exporter of ``tracker``, with credentials from the settings. A dry run works
    without them: placeholders stand in, and it sends nothing."""
    missing = missing_credentials(tracker, settings)
    if missing and not dry_run:
        raise NotConfigured(f"set {' and '.join(missing)} to export to {tracker}")

    def setting(variable: str, *, placeholder: str = PLACEHOLDER) -> str:
        value = _value(settings, variable)
        if value in (None, ""):
            return placeholder
        reveal = getattr(value, "get_secret_value", None)
        return str(reveal() if reveal is not None else value)

    return REGISTRY[tracker].build(settings, setting)


__all__ = [
    "PLACEHOLDER",
    "REGISTRY",
    "Draft",
    "Exporter",
    "Follow",
    "NotConfigured",
    "Registration",
    "Request",
    "Sender",
    "TargetRefused",
    "Tracker",
    "TrackerError",
    "exporter_for",
    "missing_credentials",
    "tracker_named",
]
