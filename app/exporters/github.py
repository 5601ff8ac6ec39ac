"""GitHub issues: POST /repos/{owner}/{repo}/issues, PATCH .../issues/{number}."""

from __future__ import annotations

import re

import httpx

from app.exporters.base import Draft, Request, Tracker

_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


class GitHubExporter:
    name = Tracker.GITHUB
    markup = "github"

    def __init__(self, api_url: str, token: str) -> None:
        self.api = api_url.rstrip("/")
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }

    def check_target(self, target: str) -> None:
        if not _REPO.match(target):
            raise ValueError("a GitHub target is owner/repository")

    def _fields(self, draft: Draft) -> dict[str, object]:
        return {"title": draft.title, "body": draft.body, "labels": draft.labels}

    def create(self, target: str, draft: Draft) -> Request:
        return Request(
            "POST",
            f"{self.api}/repos/{target}/issues",
            dict(self.headers),
            json=self._fields(draft),
        )

    def update(self, target: str, external_id: str, draft: Draft) -> Request:
        return Request(
            "PATCH",
            f"{self.api}/repos/{target}/issues/{external_id}",
            dict(self.headers),
            # open while the cause has misses; a series' later run that left it none closes it
            json=self._fields(draft) | {"state": "open" if draft.count else "closed"},
            idempotent=True,
        )

    def created(self, target: str, response: httpx.Response, draft: Draft) -> tuple[str, str]:
        data = response.json()
        return str(data["number"]), str(data.get("html_url", ""))
