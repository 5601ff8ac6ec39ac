"""Reviewers' text and ids in exported issues are inert in each tracker's markup: a table of
hostile strings (mentions, references, images, links, HTML, comments, pipes, backticks...) is
exported to the fake trackers on loopback, and what arrives is rendered (GitHub, GitLab,
Linear: Markdown) or walked (Jira: ADF) and checked. The text still reads as written."""

from __future__ import annotations

import re
from typing import Any

import pytest
from bs4 import BeautifulSoup
from markdown_it import MarkdownIt
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.exporters.markup import JOINER, markdown_code, markdown_text, one_line, url_path
from app.models import OTHER, GoldenSet, Run, Triage
from app.models.exports import ExportOutcome
from app.services.delivery import exports
from app.settings import Settings
from tests.support.fake_tracker import Tracker
from tests.support.markdown import (
    ALLOWED_TAGS,
    AUTOLINK,
    CAUSES,
    GITLAB,
    HOSTILE,
    ID_PARTS,
    IDENTIFIER,
    ISSUE,
    MENTION,
    PUBLIC,
    bodies,
)


def export(
    engine: Engine, settings: Settings, labelled: tuple[GoldenSet, Run, Triage], tracker: str
) -> ExportOutcome:
    triage = labelled[2]
    target = {"github": "acme/search", "gitlab": "acme/search", "linear": "team-1"}.get(
        tracker, "SEARCH"
    )
    with Session(engine, expire_on_commit=False) as s:
        outcome = exports.export(
            session=s,
            settings=settings,
            triage_id=triage.id,
            tracker=tracker,
            target=target,
        )
    assert [r.action for r in outcome.results] == ["create", "create"], outcome.model_dump(
        mode="json"
    )
    return outcome


def text_outside_code(soup: BeautifulSoup) -> list[str]:
    return [
        # with the word joiners: the tracker's reference patterns see them too
        str(node)
        for node in soup.find_all(string=True)
        if node.parent is not None and node.parent.name != "code"
    ]


@pytest.mark.parametrize("tracker_name", ["github", "gitlab", "linear"])
def test_markdown_bodies_are_inert(
    engine: Engine,
    tracker_settings: Settings,
    hostile_triage: tuple[GoldenSet, Run, Triage],
    fake: tuple[str, Tracker],
    tracker_name: str,
) -> None:
    _, tracker = fake
    export(engine, tracker_settings, hostile_triage, tracker_name)
    received = bodies(tracker, tracker_name)
    assert len(received) == 2
    notes_seen: list[str] = []
    for title, body in received:
        for raw in ("<!--", "<img", "<script", "<details"):
            assert raw not in body
        assert all(ord(c) >= 0x20 for c in title)
        assert "golden «ü» @team" in title
        html = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
        soup = BeautifulSoup(html.render(body), "html.parser")
        tags = {tag.name for tag in soup.find_all(True)}
        assert tags <= ALLOWED_TAGS, tags - ALLOWED_TAGS
        links = [a["href"] for a in soup.find_all("a")]
        assert links
        assert all(href.startswith(PUBLIC) for href in links), links
        rows = soup.select("tbody tr")
        assert rows
        for row in rows:
            cells = row.find_all("td")
            assert len(cells) == 6, row
            codes = [c.get_text() for c in cells[0].find_all("code")]
            assert len(codes) == 1
            assert codes[0].startswith("q")  # the qid, exact
            assert cells[1].find("code") is not None
            notes_seen.append(cells[4].get_text().replace(JOINER, ""))
        for text in text_outside_code(soup):
            assert not MENTION.search(text), text
            assert not AUTOLINK.search(text), text
            assert not IDENTIFIER.search(text), text
            assert not ISSUE.search(text), text
            if tracker_name == "gitlab":
                assert not GITLAB.search(text), text
    # Nothing was lost: every note reads as written (on one line).
    assert sorted(notes_seen) == sorted(one_line(note) for note in HOSTILE)


def test_ids_arrive_exact_in_code_spans(
    engine: Engine,
    tracker_settings: Settings,
    hostile_triage: tuple[GoldenSet, Run, Triage],
    fake: tuple[str, Tracker],
) -> None:
    _, tracker = fake
    export(engine, tracker_settings, hostile_triage, "github")
    codes: set[str] = set()
    for _, body in bodies(tracker, "github"):
        html = MarkdownIt("commonmark", {"html": True}).enable("table").render(body)
        soup = BeautifulSoup(html, "html.parser")
        for row in soup.select("tbody tr"):
            cells = row.find_all("td")
            codes.add(cells[0].find("code").get_text())
            codes.add(cells[1].find("code").get_text())
    expected_docs = {f"{ID_PARTS[(i + 3) % len(ID_PARTS)]}-{i}" for i in range(len(HOSTILE))}
    expected_qids = {f"q{ID_PARTS[i % len(ID_PARTS)]}-{i}" for i in range(len(HOSTILE))}
    assert codes == expected_docs | expected_qids


def walk(node: Any) -> list[dict[str, Any]]:
    found = [node] if isinstance(node, dict) else []
    children = node.get("content", []) if isinstance(node, dict) else []
    for child in children:
        found += walk(child)
    return found


def test_jira_adf_text_is_literal(
    engine: Engine,
    tracker_settings: Settings,
    hostile_triage: tuple[GoldenSet, Run, Triage],
    fake: tuple[str, Tracker],
) -> None:
    _, tracker = fake
    export(engine, tracker_settings, hostile_triage, "jira")
    received = bodies(tracker, "jira")
    assert len(received) == 2
    notes: list[str] = []
    for title, description in received:
        assert "語彙 mismatch" in title or "other" in title
        assert len(title) <= 255
        nodes = walk(description)
        assert {n["type"] for n in nodes} <= {
            "doc",
            "paragraph",
            "text",
            "table",
            "tableRow",
            "tableHeader",
            "tableCell",
        }
        for node in nodes:
            if node["type"] != "text":
                continue
            assert "\n" not in node["text"]
            for mark in node.get("marks", []):
                assert mark["type"] == "link", node
                assert mark["attrs"]["href"].startswith(PUBLIC), node
                assert node["text"] in ("miss", "backlog")
        table = next(n for n in nodes if n["type"] == "table")
        for row in table["content"][1:]:
            assert len(row["content"]) == 6
            note_cell = row["content"][4]
            notes.append("".join(n["text"] for n in walk(note_cell) if n["type"] == "text"))
    assert sorted(notes) == sorted(one_line(note) for note in HOSTILE)


def test_links_to_the_product_are_percent_encoded() -> None:
    assert url_path("http://h/", "triages", 3, "backlog", query={"cause": "語彙 & x/y"}) == (
        "http://h/triages/3/backlog?cause=%E8%AA%9E%E5%BD%99%20%26%20x%2Fy"
    )
    assert url_path("http://h", "misses", "../admin?x") == "http://h/misses/..%2Fadmin%3Fx"


@pytest.mark.parametrize("value", HOSTILE)
def test_markdown_text_reads_back(value: str) -> None:
    """Rendered alone, escaped text shows exactly the original (on one line)."""
    html = MarkdownIt("commonmark", {"html": True}).render(markdown_text(value))
    shown = BeautifulSoup(html, "html.parser").get_text().strip().replace(JOINER, "")
    assert shown == one_line(value)


@pytest.mark.parametrize("value", ["`", "a`b", "``x", "|", "a | b", "@x", "`a|b`"])
def test_markdown_code_reads_back(value: str) -> None:
    rendered = MarkdownIt("commonmark").render(markdown_code(value))
    code = BeautifulSoup(rendered, "html.parser").find("code")
    assert code is not None
    # Outside a table the \| escape shows; in a GFM table cell it is the pipe.
    assert code.get_text().replace("\\|", "|") == value


def test_webhook_export_with_unicode_causes_hashes_its_idempotency_key(
    engine: Engine,
    tracker_settings: Settings,
    hostile_triage: tuple[GoldenSet, Run, Triage],
    fake: tuple[str, Tracker],
) -> None:
    base, tracker = fake
    triage = hostile_triage[2]
    with Session(engine, expire_on_commit=False) as s:
        outcome = exports.export(
            session=s,
            settings=tracker_settings,
            triage_id=triage.id,
            tracker="webhook",
            target=f"{base}/hook",
        )
    assert [r.action for r in outcome.results] == ["create", "create"]
    keys = [r.headers["Idempotency-Key"] for r in tracker.requests if r.path == "/hook"]
    assert len(set(keys)) == 2
    assert all(re.fullmatch(r"[0-9a-f]{64}", key) for key in keys)
    causes = sorted(r.body["cause"] for r in tracker.requests if r.path == "/hook")
    assert causes == sorted([OTHER, CAUSES[1]])  # the Unicode cause arrives intact in the body
