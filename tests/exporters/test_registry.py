"""The one registry of trackers: every tracker has a registration, the API and the CLI offer
exactly those, a push names the settings it lacks and a dry run builds without them."""

from __future__ import annotations

import base64

import pytest
from click import Choice
from pydantic import SecretStr

from app.api.routes.triages import ExportBody
from app.cli.service import export as export_command
from app.exporters import (
    PLACEHOLDER,
    REGISTRY,
    NotConfigured,
    Tracker,
    exporter_for,
    missing_credentials,
    tracker_named,
)
from app.exporters.jira import JiraExporter
from app.settings import Settings

BARE = Settings(
    DATABASE_URL="sqlite://",  # type: ignore[call-arg]
    environment="test",
    secret_key="a-test-secret-that-is-long-enough-for-signing",
)


def test_every_tracker_is_registered_and_offered_by_both_faces() -> None:
    names = ["github", "gitlab", "jira", "linear", "webhook"]
    assert list(REGISTRY) == list(Tracker) == names
    schema = ExportBody.model_json_schema()
    enum = schema["$defs"]["Tracker"]["enum"]
    assert enum == names
    option = next(p for p in export_command.params if p.name == "tracker")
    assert isinstance(option.type, Choice)
    assert list(option.type.choices) == names
    assert tracker_named("jira") is Tracker.JIRA
    assert tracker_named("bugzilla") is None


@pytest.mark.parametrize("tracker", list(Tracker))
def test_a_push_names_every_missing_setting_and_a_dry_run_needs_none(tracker: Tracker) -> None:
    needed = list(REGISTRY[tracker].credentials)
    assert missing_credentials(tracker, BARE) == needed
    with pytest.raises(NotConfigured) as refused:
        exporter_for(tracker, BARE)
    assert str(refused.value) == f"set {' and '.join(needed)} to export to {tracker.value}"
    previewer = exporter_for(tracker, BARE, dry_run=True)
    assert previewer.name is tracker


def _basic(exporter: JiraExporter) -> str:
    return base64.b64decode(exporter.headers["Authorization"].removeprefix("Basic ")).decode()


def test_jira_dry_run_placeholders_and_configured_values() -> None:
    previewer = exporter_for(Tracker.JIRA, BARE, dry_run=True)
    assert isinstance(previewer, JiraExporter)
    assert previewer.api == "{MISSTRIAGE_JIRA_API_URL}"
    assert _basic(previewer) == f"{PLACEHOLDER}:{PLACEHOLDER}"
    configured = BARE.model_copy(
        update={
            "jira_api_url": "https://acme.atlassian.net",
            "jira_email": "bot@acme.example",
            "jira_token": SecretStr("t0ken"),
        }
    )
    assert missing_credentials(Tracker.JIRA, configured) == []
    exporter = exporter_for(Tracker.JIRA, configured)
    assert isinstance(exporter, JiraExporter)
    assert exporter.api == "https://acme.atlassian.net"
    assert _basic(exporter) == "bot@acme.example:t0ken"
