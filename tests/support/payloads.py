"""Script-injection payloads in everything a person can type or upload, and the check that a
page shows them as text.

``seed`` fills a database through the JSON API (as a lead and a reviewer would): a golden set,
its query texts, ids, corpus, causes and webhook, two runs, two triages, labels with notes, a
skip reason, a reviewer whose email is a payload, a token name. ``assert_inert`` parses a page
and fails on any element or attribute that did not come from our templates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app import security
from app.models import Role, User
from app.services.accounts import users as user_service
from tests.support.service import PASSWORD, Account

SCRIPT = '<script>alert("xss-1")</script>'
IMG = '"><img src=x onerror=alert("xss-2")>'
JS = 'javascript:alert("xss-3")'
SVG = "<svg/onload=alert('xss-4')>"
PAYLOADS = (SCRIPT, IMG, JS, SVG)

#: ids have no whitespace, but may hold markup
QID = "q3<svg/onload=alert('xss-5')>"
DOC = "d<img/src=x/onerror=alert('xss-6')>"
PARENT = "p<img/src=x/onerror=alert('xss-8')>"
EMAIL = 'x"><img src=x onerror=alert("xss-7")>@example.com'
CAUSE = f"vocab {IMG}"

QRELS = f"q1 0 {DOC} 2\nq1 0 a 1\n{QID} 0 b 1\nq2 0 c 1\n"
QUERIES = f"q1\t{SCRIPT} {IMG} rate limits\nq2\t{JS}\n{QID}\t{SVG} sso\n"
CORPUS = "".join(
    json.dumps(doc) + "\n"
    for doc in (
        {"_id": DOC, "title": SVG, "text": f"rate limits {SCRIPT} {IMG} {JS}", "parent_id": PARENT},
        {
            "_id": "a",
            "title": SCRIPT,
            "text": f"limits {IMG}",
            "parent_id": PARENT,
            "chunk_index": 1,
        },
        {"_id": "b", "title": IMG, "text": SVG},
        {"_id": "c", "title": JS, "text": SCRIPT},
        {"_id": "n1", "title": IMG, "text": f"ranked first {SCRIPT}"},
    )
)
# Every relevant document is outside the top 1 of the first run; the second finds 'a'.
FIRST = f"q1 Q0 n1 1 9 t\nq2 Q0 n1 1 9 t\n{QID} Q0 n1 1 9 t\n"
SECOND = f"q1 Q0 a 1 9 t\nq1 Q0 n1 2 8 t\nq2 Q0 n1 1 9 t\n{QID} Q0 n1 1 9 t\n"


@dataclass
class Seeded:
    golden: int
    runs: tuple[int, int]
    triages: tuple[int, int]
    #: the misses of the first triage: labelled other, labelled with CAUSE, skipped, leased
    misses: tuple[int, int, int, int]
    reviewer: Account


def seed(client: TestClient, engine: Engine, lead: Account) -> Seeded:
    """Fill the database with payloads, through the API as the people who type them."""
    with Session(engine, expire_on_commit=False) as session:
        # create_user refuses this email now; the row stands for an account made before
        # emails were validated: pages must still show it as text.
        user = User(
            email=EMAIL, password_hash=security.hash_password(PASSWORD), role=Role.REVIEWER.value
        )
        session.add(user)
        session.commit()
        session.refresh(user)
        secret = user_service.create_token(session=session, user=user, name=SCRIPT).secret
    reviewer = Account(EMAIL, Role.REVIEWER, secret)
    client.post("/api/v1/tokens", headers=lead.headers, json={"name": IMG})

    def ok(response: Any) -> dict[str, Any]:
        assert response.status_code in (200, 201), response.text
        body: dict[str, Any] = response.json()
        return body

    golden = ok(
        client.post(
            "/api/v1/golden-sets",
            headers=lead.headers,
            data={"name": f"gs {SCRIPT}", "description": IMG},
            files={
                "qrels": ("q.qrels", QRELS),
                "queries": ("q.tsv", QUERIES),
                "corpus": ("c.jsonl", CORPUS),
            },
        )
    )["id"]
    base = f"/api/v1/golden-sets/{golden}"
    ok(
        client.put(
            f"{base}/causes",
            headers=lead.headers,
            json={"causes": ["not-indexed", CAUSE, "chunk-boundary"]},
        )
    )
    ok(
        client.put(
            f"{base}/webhook",
            headers=lead.headers,
            # no spaces: a URL with spaces is refused (bad_url); the markup stays hostile
            json={
                "url": f"https://example.com/{IMG.replace(' ', '/')}",
                "events": ["miss.labelled"],
            },
        )
    )
    runs = tuple(
        ok(
            client.post(
                f"{base}/runs",
                headers=lead.headers,
                data={"name": name, "description": SVG},
                files={"run": (f"{name[:20]}.trec", content)},
            )
        )["id"]
        for name, content in ((IMG, FIRST), (SCRIPT, SECOND))
    )
    triages = tuple(
        ok(
            client.post(
                f"/api/v1/runs/{run}/triages", headers=lead.headers, json={"depth": 1, "k": 1}
            )
        )["id"]
        for run in runs
    )
    claimed = []
    for category, note in (("other", SCRIPT), (CAUSE, JS), (None, SVG), (None, None)):
        miss = ok(client.post(f"/api/v1/triages/{triages[0]}/claim", headers=reviewer.headers))
        claimed.append(miss["id"])
        if category is not None:
            ok(
                client.post(
                    f"/api/v1/misses/{miss['id']}/label",
                    headers=reviewer.headers,
                    json={"category": category, "note": note, "version": miss["version"]},
                )
            )
        elif note is not None:
            ok(
                client.post(
                    f"/api/v1/misses/{miss['id']}/skip",
                    headers=reviewer.headers,
                    json={"reason": note},
                )
            )
    return Seeded(
        golden=golden,
        runs=(runs[0], runs[1]),
        triages=(triages[0], triages[1]),
        misses=(claimed[0], claimed[1], claimed[2], claimed[3]),
        reviewer=reviewer,
    )


#: attributes whose value a browser follows or evaluates
_ACTIVE = {"href", "src", "action", "formaction", "hx-get", "hx-post", "hx-vals", "hx-on"}


def assert_inert(html: str, where: str) -> BeautifulSoup:
    """No element or attribute of the page came from a payload: scripts only from /static/,
    no event handlers, no images or frames, the only SVG our chart, no active attribute that
    holds a payload."""
    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.find_all(True):
        here = f"{where}: <{tag.name} {tag.attrs}>"
        if tag.name == "script":
            assert urlsplit(str(tag.get("src", ""))).path.startswith("/static/"), here
            assert not tag.get_text().strip(), here
        assert tag.name not in ("img", "iframe", "object", "embed", "frame"), here
        if tag.name == "svg":
            # our chart, or one of the dashboard's bars (a single rect, drawn by the template)
            bar = "bar" in tag.get("class", []) and [c.name for c in tag.find_all(True)] == ["rect"]
            assert tag.get("id") == "depth-curve" or bar, here
        for name, value in tag.attrs.items():
            text = " ".join(value) if isinstance(value, list) else str(value)
            assert not name.lower().startswith("on"), here
            assert not name.lower().startswith("hx-on"), here
            if name.lower() in _ACTIVE:
                assert "alert(" not in text, here
                assert not text.strip().lower().startswith("javascript:"), here
    return soup


def pages(s: Seeded) -> list[tuple[str, list[str]]]:
    """Every page that shows typed or uploaded text, with payloads it must show as text."""
    first, second = s.triages
    other, caused, skipped, _leased = s.misses
    return [
        ("/golden-sets", [f"gs {SCRIPT}"]),
        (f"/golden-sets/{s.golden}", [f"gs {SCRIPT}", IMG, SCRIPT]),
        (f"/runs/{s.runs[0]}", [IMG, f"{SCRIPT} {IMG} rate limits", JS, SVG, QID]),
        (f"/runs/{s.runs[1]}?q={quote(QID)}", [SCRIPT, QID, SVG]),
        (f"/golden-sets/{s.golden}/compare?a={s.runs[0]}&b={s.runs[1]}&depth=1", [IMG, CAUSE]),
        (f"/triages/{first}", [CAUSE, EMAIL, DOC, QID, SCRIPT, JS, SVG]),
        (f"/triages/{first}/backlog", [DOC, QID, SCRIPT, IMG, JS, SVG, CAUSE, EMAIL]),
        (f"/triages/{first}/backlog?cause={quote(CAUSE)}&qid=q1", [CAUSE, JS, EMAIL]),
        (f"/triages/{first}/backlog?qid={quote(QID)}", [QID, SVG]),
        (f"/misses/{other}", [DOC, SCRIPT, EMAIL]),
        (f"/misses/{caused}", [CAUSE, JS, EMAIL]),
        (f"/misses/{skipped}", [SVG, QID, EMAIL]),
        (f"/triages/{second}/review", [f"{SCRIPT} {IMG} rate limits", SVG, DOC, CAUSE, SCRIPT]),
        ("/tokens", [IMG]),
        # the pages every query id and document id links to, under hostile ids
        (f"/runs/{s.runs[0]}/queries/{quote(QID)}", [QID, SVG, IMG]),
        (f"/runs/{s.runs[1]}/queries/q1", [SCRIPT, DOC, SVG]),
        (f"/golden-sets/{s.golden}/documents/{quote(DOC)}", [DOC, SVG, SCRIPT, IMG, PARENT]),
        (f"/golden-sets/{s.golden}/documents/a", [SCRIPT, IMG, PARENT]),
    ]
