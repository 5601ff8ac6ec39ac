"""Markdown the product writes, with text and ids from users and files made inert: one
escaping function, ``markdown_text``, for every Markdown (issue bodies of GitHub, GitLab and
Linear, a webhook's body, the gate's pull-request comment), and ``markdown_code`` for ids.

Reviewers write notes, golden sets and runs bring query texts and ids: none of it may become
a mention that notifies someone, a reference that links (and back-links) another issue or
merge request, an image that the tracker fetches, a link, raw HTML, a hidden comment,
emphasis, a heading or list, or a broken table. Jira gets Atlassian Document Format
(``jira.adf``): text nodes are literal there, and marks and links are only made from the
product's own URLs.

How: ids go in code spans (no mention, reference, link or emphasis is parsed inside one, and
a copied id stays exact); free text is put on one line, has every ASCII punctuation mark
backslash-escaped, and ``<``, ``>`` and ``&`` written as entities. Trackers find mentions,
references and bare addresses in the rendered text, after Markdown's escapes are gone, so
an invisible WORD JOINER (U+2060) also goes around ``@``, after every reference sigil of any
tracker (GitLab's ``! ~ % $ & ^`` too: one set for every Markdown), after a ``:`` not
followed by a space (emoji, schemes) and a dot before a letter or digit (``evil.com``,
``1.2.3.4``), between the slashes of ``//``, in ``www.`` and ``ABC-12``, and every six
characters of a run of seven or more hex digits (a commit's SHA). Links to the product are
built from percent-encoded URLs only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from app.exporters.base import Follow

#: U+2060 WORD JOINER: invisible, not a space, breaks the trackers' reference patterns.
JOINER = "\u2060"
ROWS_SHOWN = 100

_WHITESPACE = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_ASCII_PUNCTUATION = set("!\"#$%'()*+,-./:;=?@[\\]^_`{|}~")
#: Sigils that start a mention or a reference in some tracker's rendered text (GitHub and
#: Linear ``@`` and ``#``; GitLab also ``!`` merge requests, ``~`` labels, ``%`` milestones,
#: ``$`` snippets, ``&`` epics, ``^``): a joiner follows each.
_SIGILS = frozenset("@#!~%$&^")
_JOINED = [
    (re.compile(r"(\\:)(?=\S)"), r"\1" + JOINER),  # :+1: (emoji), scheme: (not "x: y")
    (re.compile(r"(?=\\@)"), JOINER),  # before @ too: no e-mail address ends there
    (re.compile(r"(\\/)(?=\\/)"), r"\1" + JOINER),  # // (scheme://, //host)
    (re.compile(r"(\\\.)(?=\w)"), r"\1" + JOINER),  # evil.com, 1.2.3.4, x.рф
    (re.compile(r"(?i)(www)(?=\\\.)"), r"\1" + JOINER),
    (re.compile(r"([A-Za-z0-9])(?=\\-\d)"), r"\1" + JOINER),  # ENG-12, GH-12
]
_HEX_RUN = re.compile(r"(?<![0-9A-Za-z_])[0-9A-Fa-f]{7,}(?![0-9A-Za-z_])")


def _split_hex(match: re.Match[str]) -> str:
    run = match.group()
    return JOINER.join(run[i : i + 6] for i in range(0, len(run), 6))


def one_line(text: object) -> str:
    """Text on one line: newlines, tabs, other control and separator characters as spaces."""
    return _WHITESPACE.sub(" ", "" if text is None else str(text)).strip()


def markdown_text(text: object) -> str:
    """Text shown as it is (on one line), inert in any Markdown the product writes: the one
    escaping function for text (see the module docstring); ids go in ``markdown_code``."""
    out: list[str] = []
    for char in one_line(text):
        if char == "&":
            out.append("&amp;")
        elif char == "<":
            out.append("&lt;")
        elif char == ">":
            out.append("&gt;")
        elif char in _ASCII_PUNCTUATION:
            out.append("\\" + char)
        else:
            out.append(char)
        if char in _SIGILS:
            out.append(JOINER)
    escaped = _HEX_RUN.sub(_split_hex, "".join(out))
    for pattern, replacement in _JOINED:
        escaped = pattern.sub(replacement, escaped)
    return escaped


def markdown_code(text: object) -> str:
    """An id as an inline code span (exact when copied), safe inside a table cell."""
    value = one_line(text)
    if not value:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    if value.startswith("`") or value.endswith("`"):
        value = f" {value} "
    # In a GFM table a pipe ends the cell even inside a code span; \| is the documented escape.
    return f"{fence}{value.replace('|', chr(92) + '|')}{fence}"


def url_path(base_url: str, *segments: object, query: dict[str, object] | None = None) -> str:
    """``base_url`` + percent-encoded path segments (+ an encoded query): a product URL."""
    path = "".join("/" + quote(str(s), safe="") for s in segments)
    url = base_url.rstrip("/") + path
    if query:
        url += "?" + "&".join(
            f"{quote(k, safe='')}={quote(str(v), safe='')}" for k, v in query.items()
        )
    return url


def title_text(text: str, limit: int = 255) -> str:
    """An issue title: one line, at most ``limit`` characters (Jira's summary limit)."""
    line = one_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass(frozen=True)
class Body:
    """What an issue body says, before it is written in a tracker's markup."""

    count: int
    category: str
    golden_name: str
    run_name: str
    depth: int
    triage_id: int
    meaning: str
    backlog_url: str
    rows: list[dict[str, Any]]
    #: With double review, what the labels rest on ("8 agreed, 4 adjudicated"); else empty.
    rests_on: str = ""
    #: When the issue follows an earlier triage of the run's series.
    follows: Follow | None = None


def follow_sentences(follow: Follow, triage_id: int) -> tuple[str, str]:
    """What a followed issue says of its series, in plain text (each markup escapes it):
    the runs and triages, and how many earlier misses of the cause the new run fixed."""
    said = (
        f"Series {follow.series}: run {follow.run_name} (triage #{triage_id}) follows "
        f"run {follow.earlier_run} (triage #{follow.earlier_triage}); this issue is "
        "updated, not made again."
    )
    n = len(follow.fixed)
    fixed = (
        f"Fixed by {follow.run_name}: {n} earlier {'miss' if n == 1 else 'misses'} of this "
        "cause, no longer missed:"
        if n
        else f"Fixed by {follow.run_name}: none of the earlier misses of this cause."
    )
    return said, fixed


def issue_markdown(body: Body) -> str:
    """The issue body in Markdown: GitHub's, GitLab's and Linear's (webhooks get it too)."""
    text = markdown_text
    summary = (
        f"**{body.count}** relevant documents of golden set **{text(body.golden_name)}** are "
        f"missing from the top {body.depth} of run **{text(body.run_name)}**, and reviewers "
        f"labelled them **{text(body.category)}**."
        if body.count
        # a followed issue whose cause the new run left empty
        else f"No relevant document of golden set **{text(body.golden_name)}** missing from "
        f"the top {body.depth} of run **{text(body.run_name)}** is labelled "
        f"**{text(body.category)}** now."
    )
    table = ["| Query | Document | Grade | Rank | Note | Link |", "|---|---|---|---|---|---|"]
    lines = [
        summary,
        "",
        f"What it usually means: {text(body.meaning)}",
        "",
        *([f"These labels rest on: {text(body.rests_on)}.", ""] if body.rests_on else []),
        *(_followed(body) if body.follows else []),
        *(table if body.rows else []),
    ]
    for row in body.rows[:ROWS_SHOWN]:
        query = markdown_code(row["qid"])
        if row.get("query"):
            query += " " + text(row["query"])
        # "where": the sentence about the miss's place in the run (app/eval/placement.py),
        # which every backlog row carries: never worded again here
        lines.append(
            f"| {query} | {markdown_code(row['doc_id'])} | {text(row['grade'])} | "
            f"{text(row['where'])} | "
            f"{text(row['note'])} | [miss](<{row['url']}>) |"
        )
    if body.count > ROWS_SHOWN:
        lines.append(
            f"\nAnd {body.count - ROWS_SHOWN} more in the [backlog](<{body.backlog_url}>)."
        )
    lines.append(
        f"\nExported by misstriage from triage #{JOINER}{body.triage_id}: "
        f"[backlog](<{body.backlog_url}>)"
    )
    return "\n".join(lines)


def _followed(body: Body) -> list[str]:
    """The lines of a followed issue: its series, then the fixed misses, one per line."""
    assert body.follows is not None
    said, fixed = follow_sentences(body.follows, body.triage_id)
    lines = [markdown_text(said), "", f"**{markdown_text(fixed)}**"]
    for row in body.follows.fixed[:ROWS_SHOWN]:
        query = markdown_code(row["qid"])
        if row.get("query"):
            query += " " + markdown_text(row["query"])
        lines.append(f"- {query}: {markdown_code(row['doc_id'])}")
    if len(body.follows.fixed) > ROWS_SHOWN:
        lines.append(f"- and {len(body.follows.fixed) - ROWS_SHOWN} more")
    return [*lines, ""]


#: Each Markdown family's renderer: one body, escaped for all of them (``markdown_text``).
RENDERERS = dict.fromkeys(("github", "gitlab", "linear"), issue_markdown)
