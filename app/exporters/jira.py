"""Jira Cloud issues: POST /rest/api/3/issue, PUT /rest/api/3/issue/{key}; basic auth with
email:token; the description in Atlassian Document Format."""

from __future__ import annotations

import base64
import re
from typing import Any

import httpx

from app.exporters.base import Draft, Request, TargetRefused, Tracker, path_segment
from app.exporters.markup import follow_sentences, one_line

#: A project key: an uppercase letter, then uppercase letters, digits and '_' (Jira's rule).
_PROJECT = re.compile(r"[A-Z][A-Z0-9_]{1,254}")
RULE = (
    "a Jira target is a project key, e.g. SEARCH: an uppercase letter, then uppercase "
    "letters, digits and '_'"
)
ROWS_SHOWN = 100


def _text(value: object) -> dict[str, Any]:
    # A text node is literal in ADF: no markup in it is parsed, no mark or link is made.
    return {"type": "text", "text": one_line(value)}


def _link(label: str, href: str) -> dict[str, Any]:
    """The only link marks: to the product's own (percent-encoded) URLs."""
    return {"type": "text", "text": label, "marks": [{"type": "link", "attrs": {"href": href}}]}


def _paragraph(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"type": "paragraph", "content": [p for p in parts if p.get("text")]}


def _cell(value: object, header: bool = False) -> dict[str, Any]:
    kind = "tableHeader" if header else "tableCell"
    node = value if isinstance(value, dict) else _text(value)
    content = [node] if node["text"] else []
    return {"type": kind, "content": [{"type": "paragraph", "content": content}]}


def adf(draft: Draft) -> dict[str, Any]:
    """The issue body as an ADF document: summary, meaning, and a table of the misses."""
    header = ["Query", "Document", "Grade", "Rank", "Note", "Link"]
    rows = [{"type": "tableRow", "content": [_cell(h, header=True) for h in header]}]
    for row in draft.rows[:ROWS_SHOWN]:
        query = f"{row['qid']}: {row['query']}" if row.get("query") else row["qid"]
        rows.append(
            {
                "type": "tableRow",
                "content": [
                    _cell(query),
                    _cell(row["doc_id"]),
                    _cell(row["grade"]),
                    _cell(row["where"]),
                    _cell(row["note"]),
                    _cell(_link("miss", row["url"])),
                ],
            }
        )
    misses = "miss" if draft.count == 1 else "misses"
    content: list[dict[str, Any]] = [
        _paragraph(_text(f"{draft.count} {misses} labelled {draft.category}.")),
        _paragraph(_text(draft.meaning)),
        *(
            [_paragraph(_text(f"These labels rest on: {draft.rests_on}."))]
            if draft.rests_on
            else []
        ),
        *(_followed(draft) if draft.follows else []),
        *([{"type": "table", "content": rows}] if draft.rows else []),
    ]
    if draft.count > ROWS_SHOWN:
        content.append(
            _paragraph(
                _text(f"And {draft.count - ROWS_SHOWN} more in the "),
                _link("backlog", draft.backlog_url),
            )
        )
    return {"type": "doc", "version": 1, "content": content}


def _followed(draft: Draft) -> list[dict[str, Any]]:
    """A followed issue's series and the misses the new run fixed (``markup``'s words)."""
    assert draft.follows is not None
    said, fixed = follow_sentences(draft.follows, draft.triage_id)
    items = [
        {"type": "listItem", "content": [_paragraph(_text(f"{row['qid']}: {row['doc_id']}"))]}
        for row in draft.follows.fixed[:ROWS_SHOWN]
    ]
    out = [_paragraph(_text(said)), _paragraph(_text(fixed))]
    if items:
        out.append({"type": "bulletList", "content": items})
    if len(draft.follows.fixed) > ROWS_SHOWN:
        out.append(_paragraph(_text(f"And {len(draft.follows.fixed) - ROWS_SHOWN} more.")))
    return out


class JiraExporter:
    name = Tracker.JIRA
    markup = "jira"

    def __init__(self, api_url: str, email: str, token: str) -> None:
        self.api = api_url.rstrip("/")
        basic = base64.b64encode(f"{email}:{token}".encode()).decode()
        self.headers = {"Authorization": f"Basic {basic}", "Accept": "application/json"}

    def check_target(self, target: str) -> None:
        if not _PROJECT.fullmatch(target):
            raise TargetRefused(RULE, tracker=self.name)

    def _fields(self, draft: Draft) -> dict[str, Any]:
        labels = [label.replace(" ", "-") for label in draft.labels]
        return {"summary": draft.title, "description": adf(draft), "labels": labels}

    def create(self, target: str, draft: Draft) -> Request:
        self.check_target(target)  # it goes in the body, never in the path
        fields = {"project": {"key": target}, "issuetype": {"name": "Task"}} | self._fields(draft)
        return Request(
            "POST", f"{self.api}/rest/api/3/issue", dict(self.headers), json={"fields": fields}
        )

    def update(self, target: str, external_id: str, draft: Draft) -> Request:
        key = path_segment(external_id, tracker=self.name, what="the issue key")
        return Request(
            "PUT",
            f"{self.api}/rest/api/3/issue/{key}",
            dict(self.headers),
            json={"fields": self._fields(draft)},
            idempotent=True,
        )

    def created(self, target: str, response: httpx.Response, draft: Draft) -> tuple[str, str]:
        key = str(response.json()["key"])
        return key, f"{self.api}/browse/{key}"
