"""GitLab issues: POST /api/v4/projects/:id/issues, PUT .../issues/:iid (PRIVATE-TOKEN)."""

from __future__ import annotations

from urllib.parse import quote

import httpx

from app.exporters.base import Draft, Request, Tracker


class GitLabExporter:
    name = Tracker.GITLAB
    markup = "gitlab"

    def __init__(self, api_url: str, token: str) -> None:
        self.api = api_url.rstrip("/")
        self.headers = {"PRIVATE-TOKEN": token}

    def check_target(self, target: str) -> None:
        if not target or target.startswith("/") or " " in target:
            raise ValueError("a GitLab target is a project id or path (group/project)")

    def _project(self, target: str) -> str:
        return f"{self.api}/api/v4/projects/{quote(target, safe='')}/issues"

    def _fields(self, draft: Draft) -> dict[str, object]:
        # GitLab takes labels as one comma-separated string.
        return {"title": draft.title, "description": draft.body, "labels": ",".join(draft.labels)}

    def create(self, target: str, draft: Draft) -> Request:
        return Request("POST", self._project(target), dict(self.headers), json=self._fields(draft))

    def update(self, target: str, external_id: str, draft: Draft) -> Request:
        return Request(
            "PUT",
            f"{self._project(target)}/{external_id}",
            dict(self.headers),
            # open while the cause has misses; a series' later run that left it none closes it
            json=self._fields(draft) | {"state_event": "reopen" if draft.count else "close"},
            idempotent=True,
        )

    def created(self, target: str, response: httpx.Response, draft: Draft) -> tuple[str, str]:
        data = response.json()
        return str(data["iid"]), str(data.get("web_url", ""))
