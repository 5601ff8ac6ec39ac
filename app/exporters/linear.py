"""Linear issues through GraphQL: issueCreate with a client-chosen id (so a retried create
cannot make a second issue), issueUpdate."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx

from app.exporters.base import Draft, Request, TargetRefused, Tracker, TrackerError

CREATE = (
    "mutation Create($input: IssueCreateInput!) { issueCreate(input: $input) "
    "{ success issue { id identifier url } } }"
)
UPDATE = (
    "mutation Update($id: String!, $input: IssueUpdateInput!) { issueUpdate(id: $id, "
    "input: $input) { success issue { id identifier url } } }"
)
_NAMESPACE = uuid.UUID("6f1d5a8e-2b7c-4e0a-9c1f-3d2e8b7a6c50")
#: A team's id (a UUID) or key (ENG): letters, digits, '_' and '-', not starting with '-'.
_TEAM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")
RULE = (
    "a Linear target is a team's id or key: letters, digits, '_' and '-' (at most 64, "
    "not starting with '-'), e.g. ENG"
)


def issue_id(target: str, draft: Draft) -> str:
    """The same (team, triage, cause) always gets the same issue id."""
    return str(uuid.uuid5(_NAMESPACE, f"{target}/{draft.triage_id}/{draft.category}"))


class LinearExporter:
    name = Tracker.LINEAR
    markup = "linear"

    def __init__(self, api_url: str, token: str) -> None:
        self.api = api_url
        # Linear API keys go in Authorization as they are (OAuth tokens take "Bearer").
        self.headers = {"Authorization": token, "Content-Type": "application/json"}

    def check_target(self, target: str) -> None:
        # it goes in the GraphQL variables, never in the path: still one token
        if not _TEAM.fullmatch(target):
            raise TargetRefused(RULE, tracker=self.name)

    def _post(self, query: str, variables: dict[str, Any]) -> Request:
        # Creates carry a client-chosen id and updates overwrite: both are safe to repeat.
        return Request(
            "POST",
            self.api,
            dict(self.headers),
            json={"query": query, "variables": variables},
            idempotent=True,
        )

    def create(self, target: str, draft: Draft) -> Request:
        self.check_target(target)
        return self._post(
            CREATE,
            {
                "input": {
                    "id": issue_id(target, draft),
                    "teamId": target,
                    "title": draft.title,
                    "description": draft.body,
                }
            },
        )

    def update(self, target: str, external_id: str, draft: Draft) -> Request:
        return self._post(
            UPDATE,
            {
                "id": external_id,
                "input": {
                    "title": draft.title,
                    "description": draft.body,
                },
            },
        )

    def created(self, target: str, response: httpx.Response, draft: Draft) -> tuple[str, str]:
        data = response.json()
        if data.get("errors"):
            raise TrackerError(f"Linear refused the issue: {data['errors'][0].get('message')}")
        issue = data["data"]["issueCreate"]["issue"]
        return str(issue["id"]), str(issue.get("url", ""))
