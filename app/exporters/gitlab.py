"""GitLab issues: POST /api/v4/projects/:id/issues, PUT .../issues/:iid (PRIVATE-TOKEN)."""

from __future__ import annotations

import re

import httpx

from app.exporters.base import Draft, Request, TargetRefused, Tracker, path_segment

#: A project's numeric id.
_ID = re.compile(r"[1-9][0-9]{0,18}")
#: One part of a project's path (a group, a subgroup, the project): letters, digits, '_',
#: '-' and '.', starting with a letter, a digit or '_' (so never '.' or '..'), not ending
#: in '.git' or '.atom' (GitLab's rule for paths).
_PART = re.compile(r"(?![\s\S]*\.(?:git|atom)\Z)[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")
#: Groups nest 20 deep at most: 21 parts with the project.
MAX_PARTS = 21
RULE = (
    "a GitLab target is a project's numeric id or its path (group/project, "
    "group/subgroup/project): parts of letters, digits, '_', '-' and '.', each starting "
    "with a letter, a digit or '_', not ending in '.git' or '.atom'"
)


def check_project(target: str) -> None:
    """Raise TargetRefused naming GitLab's rule unless ``target`` is a project id or path."""
    if _ID.fullmatch(target):
        return
    parts = target.split("/")
    if not (2 <= len(parts) <= MAX_PARTS and all(_PART.fullmatch(p) for p in parts)):
        raise TargetRefused(RULE, tracker=Tracker.GITLAB)


class GitLabExporter:
    name = Tracker.GITLAB
    markup = "gitlab"

    def __init__(self, api_url: str, token: str) -> None:
        self.api = api_url.rstrip("/")
        self.headers = {"PRIVATE-TOKEN": token}

    def check_target(self, target: str) -> None:
        check_project(target)

    def _project(self, target: str) -> str:
        # the whole path is one segment (GitLab's "URL-encoded path of the project")
        check_project(target)
        project = path_segment(target, tracker=self.name, what="the project")
        return f"{self.api}/api/v4/projects/{project}/issues"

    def _fields(self, draft: Draft) -> dict[str, object]:
        # GitLab takes labels as one comma-separated string.
        return {"title": draft.title, "description": draft.body, "labels": ",".join(draft.labels)}

    def create(self, target: str, draft: Draft) -> Request:
        return Request("POST", self._project(target), dict(self.headers), json=self._fields(draft))

    def update(self, target: str, external_id: str, draft: Draft) -> Request:
        iid = path_segment(external_id, tracker=self.name, what="the issue iid")
        return Request(
            "PUT",
            f"{self._project(target)}/{iid}",
            dict(self.headers),
            # open while the cause has misses; a series' later run that left it none closes it
            json=self._fields(draft) | {"state_event": "reopen" if draft.count else "close"},
            idempotent=True,
        )

    def created(self, target: str, response: httpx.Response, draft: Draft) -> tuple[str, str]:
        data = response.json()
        return str(data["iid"]), str(data.get("web_url", ""))
