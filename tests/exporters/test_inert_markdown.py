"""One escaping function, ``app.exporters.markup.markdown_text``, makes text from users and
files inert in every Markdown the product writes (issue bodies, a webhook's body, the gate's
pull-request comment). The oracle is a GFM-like renderer, markdown-it-py's ``gfm-like``
preset (tables, strikethrough, raw HTML, bare URLs linked by linkify-it): the escaped text,
rendered on a line of its own, in a table cell or in a list item, shows exactly the text
given (on one line), and nothing else comes of it: no image, link, raw HTML, comment,
emphasis, heading, list, quote, code or extra cell. Trackers find mentions, references and
bare addresses in the rendered text, after Markdown's escapes are gone: linkify-it and the
mention and reference patterns find none there either."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.exporters import Tracker as TrackerName
from app.exporters.markup import JOINER, markdown_text, one_line
from app.models import GoldenSet, Run, Triage
from app.services.delivery import exports
from app.settings import Settings
from tests.support.fake_tracker import Tracker
from tests.support.markdown import ALLOWED_TAGS, GFM, HOSTILE, PUBLIC, assert_no_references, bodies

#: Pieces a hostile string is made of: every Markdown, HTML, reference and address sigil.
PIECES = [
    *"@#!~%$&^[]()<>`*_|\\:/.-+=\"'{}",
    "@everyone",
    "@acme/team",
    "#123",
    "!1",
    "[~alice]",
    "GH-7",
    "ENG-12",
    "![x](https://evil.example/p.png)",
    "[a](http://evil.example)",
    "<http://evil.example>",
    "https://",
    "//",
    "www.",
    "evil.com",
    "a@b.com",
    "mailto:",
    "1.2.3.4",
    "<!--",
    "-->",
    "<img/src=x/onerror=alert(1)>",
    "&amp;",
    "&#64;",
    "```",
    "# ",
    "- ",
    "1. ",
    "> ",
    "---",
    "===",
    "    ",
    "\n",
    "\t",
    ":+1:",
    "a5c3785ed8",
    "|---|",
    JOINER,
]
hostile_text = st.lists(st.sampled_from(PIECES) | st.text(max_size=4), min_size=1, max_size=16).map(
    "".join
)


def shown(html: str) -> tuple[BeautifulSoup, str]:
    soup = BeautifulSoup(html, "html.parser")
    return soup, soup.get_text().replace(JOINER, "").strip()


def assert_inert(value: str) -> None:
    escaped = markdown_text(value)
    # the joiners are invisible: the text shown is the text given without them
    expected = one_line(value).replace(JOINER, "").strip()
    assert "\n" not in escaped
    # on a line of its own (a paragraph's start: heading, list, quote, fence markers)
    html = GFM.render(escaped)
    assert "<!--" not in html
    soup, text = shown(html)
    assert [t.name for t in soup.find_all(True)] == (["p"] if one_line(value) else [])
    assert text == expected
    assert_no_references(soup.get_text())
    # in a table cell: one cell, the text as given
    soup, _ = shown(GFM.render(f"| a | b |\n|---|---|\n| {escaped} | end |\n"))
    cells = soup.select("tbody td")
    assert [c.get_text().replace(JOINER, "").strip() for c in cells] == [expected, "end"]
    assert {t.name for t in soup.find_all(True)} <= {"table", "thead", "tbody", "tr", "th", "td"}
    # in a list item, after bold text (emphasis that would run across it)
    soup, text = shown(GFM.render(f"- **x** {escaped} **y**\n"))
    assert sorted(t.name for t in soup.find_all(True)) == ["li", "strong", "strong", "ul"]
    assert text.split() == f"x {expected} y".split()


@pytest.mark.parametrize(
    "value",
    [
        *HOSTILE,
        "ping @everyone ![x](https://evil.example/p.png) <!-- the rest of the comment",
        "<img/src=x/onerror=alert(1)>",
        "[~alice] {color:red}x{color} h1. title [link|http://evil.example]",
        "evil.com, a@b.com, mailto:a@b.com, //evil.example/x, 1.2.3.4, foo.co.uk, x.рф",
        "commit a5c3785ed8d6a35868bc169f07e40e889087fd2e",
        "# heading",
        "- item",
        "+ item",
        "1. one",
        "1) one",
        "> quote",
        "    code",
        "=== setext",
        "*em* _em_ ~del~",
        "\\`not code\\`",
        "trailing backslash \\",
        "",
        "   ",
    ],
)
def test_hostile_text_is_inert(value: str) -> None:
    assert_inert(value)


@settings(max_examples=300, deadline=None)
@given(hostile_text)
def test_any_mix_of_markup_is_inert(value: str) -> None:
    assert_inert(value)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_is_inert(value: str) -> None:
    assert_inert(value)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("tracker_name", ["github", "gitlab", "linear", "webhook"])
def test_every_exported_body_is_inert_under_gfm(
    engine: Engine,
    tracker_settings: Settings,
    hostile_triage: tuple[GoldenSet, Run, Triage],
    fake: tuple[str, Tracker],
    tracker_name: str,
) -> None:
    """The bodies the trackers and a webhook receive, rendered by the GFM-like oracle: links
    only to the product, no image, HTML or comment, and nothing a tracker would link, mention
    or reference in the text outside code spans (the notes hold every hostile string)."""
    base, tracker = fake
    target = {"github": "acme/search", "gitlab": "acme/search", "linear": "team-1"}
    with Session(engine, expire_on_commit=False) as s:
        outcome = exports.export(
            session=s,
            settings=tracker_settings,
            triage_id=hostile_triage[2].id or 0,
            tracker=TrackerName(tracker_name),
            target=target.get(tracker_name, f"{base}/hook"),
        )
    assert [r.action for r in outcome.results] == ["create", "create"]
    if tracker_name == "webhook":
        received = [r.body["body"] for r in tracker.requests if r.path == "/hook"]
    else:
        received = [body for _, body in bodies(tracker, tracker_name)]
    assert len(received) == 2
    notes = []
    for body in received:
        html = GFM.render(body)
        assert "<!--" not in html
        soup = BeautifulSoup(html, "html.parser")
        assert {t.name for t in soup.find_all(True)} <= ALLOWED_TAGS
        assert all(a["href"].startswith(PUBLIC) for a in soup.find_all("a"))
        for node in soup.find_all(string=True):
            if node.parent is not None and node.parent.name != "code":
                assert_no_references(str(node))
        notes += [row.find_all("td")[4].get_text() for row in soup.select("tbody tr")]
    assert sorted(n.replace(JOINER, "") for n in notes) == sorted(one_line(n) for n in HOSTILE)
