"""GitHub issues: POST /repos/{owner}/{repo}/issues, PATCH .../issues/{number}."""

from __future__ import annotations

import re

import httpx

from app.exporters.base import Draft, Request, TargetRefused, Tracker, path_segment

#: An account (user or organisation): letters, digits and hyphens, 39 characters at most,
#: not starting with a hyphen (underscores: Enterprise managed users' ``name_shortcode``).
_OWNER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,38}")
#: A repository: letters, digits, ``.``, ``_`` and ``-``, 100 characters at most, never
#: ``.`` or ``..`` (GitHub refuses those names; a path would resolve them away).
_REPO = re.compile(r"(?!\.\.?\Z)[A-Za-z0-9._-]{1,100}")
RULE = (
    "a GitHub target is owner/repository: the owner of letters, digits, '-' and '_' "
    "(at most 39, not starting with '-'), the repository of letters, digits, '.', '_' and "
    "'-' (at most 100, not '.' or '..')"
)


def repository(target: str) -> tuple[str, str]:
    """(owner, repository) of ``target``, or TargetRefused naming GitHub's rule."""
    owner, slash, repo = target.partition("/")
    if not (slash and _OWNER.fullmatch(owner) and _REPO.fullmatch(repo)):
        raise TargetRefused(RULE, tracker=Tracker.GITHUB)
    return owner, repo


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
        repository(target)

    def _issues(self, target: str) -> str:
        # each part its own percent-encoded segment: the token never leaves /repos/{o}/{r}/
        owner, repo = repository(target)
        return "/".join(
            (
                f"{self.api}/repos",
                path_segment(owner, tracker=self.name, what="the owner"),
                path_segment(repo, tracker=self.name, what="the repository"),
                "issues",
            )
        )

    def _fields(self, draft: Draft) -> dict[str, object]:
        return {"title": draft.title, "body": draft.body, "labels": draft.labels}

    def create(self, target: str, draft: Draft) -> Request:
        return Request("POST", self._issues(target), dict(self.headers), json=self._fields(draft))

    def update(self, target: str, external_id: str, draft: Draft) -> Request:
        number = path_segment(external_id, tracker=self.name, what="the issue number")
        return Request(
            "PATCH",
            f"{self._issues(target)}/{number}",
            dict(self.headers),
            # open while the cause has misses; a series' later run that left it none closes it
            json=self._fields(draft) | {"state": "open" if draft.count else "closed"},
            idempotent=True,
        )

    def created(self, target: str, response: httpx.Response, draft: Draft) -> tuple[str, str]:
        data = response.json()
        return str(data["number"]), str(data.get("html_url", ""))
