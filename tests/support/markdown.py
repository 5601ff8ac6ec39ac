"""Markdown the product writes, as the tests read it: hostile strings (mentions, references,
images, links, HTML, comments, pipes, backticks...), the GFM-like renderer that is the oracle
(markdown-it-py's ``gfm-like`` preset, bare URLs linked by linkify-it), and what a tracker
would link, mention or reference in rendered text."""

from __future__ import annotations

import re

from linkify_it import LinkifyIt
from markdown_it import MarkdownIt

from tests.support.fake_tracker import Tracker

HOSTILE = [
    "ping @alice and @acme/team",
    "see #123, GH-45 and acme/search#7",
    'GitLab: !12 ~bug ~"in progress" %v1.0 $34 &5 acme/search!8',
    "blocked by ENG-123",
    "![tracker pixel](http://evil.example/p.png)",
    "[click](javascript:alert(1)) and [ok](http://evil.example) [ref][1]\n\n[1]: http://x.example",
    "https://evil.example/x and www.evil.example and <https://evil.example>",
    "<img src=x onerror=alert(1)><script>alert(1)</script>",
    "hidden <!-- secret --> text",
    "<details><summary>x</summary>y</details>",
    "a | b || c",
    "``` fence ``` and `x` and ``y``",
    "**bold** _it_ ~~strike~~ __u__",
    "line one\n# Heading\n---\n> quote\n- item\n1. one",
    "&lt;b&gt; &amp; &#64;alice &#x40;bob",
    "C:\\path\\ \\@alice \\#9",
    "$x^2$ and $$y$$ and $`z`$",
    "[^1] and [^1]: note",
    ":warning: :+1: [[_TOC_]] {+ added +}",
    "日本語 «café» 🔎",
]
#: Ids are single tokens in the input files: hostile where a token can be.
ID_PARTS = ["@alice", "#12", "org/r#3", "d|x", "`t`", "<b>", "![i](http://e/i.png)", "ENG-12"]
CAUSES = ["not-indexed", "語彙 mismatch"]
PUBLIC = "http://misstriage.test/"

MENTION = re.compile(r"(?<![\w`/])@[A-Za-z0-9][A-Za-z0-9-]*")
ISSUE = re.compile(r"(?<![\w&])#\d+|\bGH-\d+|[\w.-]+/[\w.-]+#\d+")
GITLAB = re.compile(r"(?<![\w])[!~%$&^][\w\"]|[\w.-]+/[\w.-]+!\d+")
IDENTIFIER = re.compile(r"\b[A-Za-z]{1,10}-\d+\b")
AUTOLINK = re.compile(r"(?i)https?://|www\.")
ALLOWED_TAGS = {"p", "strong", "table", "thead", "tbody", "tr", "th", "td", "code", "a"}


GFM = MarkdownIt("gfm-like")
#: What a tracker's linker finds in rendered text (fuzzy links and e-mail addresses too).
LINKER = LinkifyIt()
#: A commit's SHA, which GitHub links in rendered text.
SHA = re.compile(r"(?<![\w])[0-9a-fA-F]{7,40}(?![\w])")


def assert_no_references(text: str) -> None:
    """Nothing in rendered text that a tracker would link, mention or reference."""
    assert not LINKER.test(text), LINKER.match(text)
    for pattern in (MENTION, ISSUE, GITLAB, IDENTIFIER, AUTOLINK, SHA):
        assert not pattern.search(text), (pattern.pattern, text)


def bodies(tracker: Tracker, name: str) -> list[tuple[str, str]]:
    """(title, body) of every issue ``name`` received."""
    found = []
    for key, fields in tracker.issues.items():
        if key.startswith(f"{name}:"):
            body = fields.get("body") or fields.get("description")
            found.append((str(fields.get("title") or fields.get("summary")), body))
    return found
