"""The review page as a full page and as a fragment; review actions answer with the next card."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app.models import Role
from tests.support.service import ORIGIN, Account, claim, get, login
from tests.support.triage import make_triage

HTMX = {"HX-Request": "true", **ORIGIN}


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_review_page_shows_one_miss_with_context(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path, mode: str
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=2, per_query=2, corpus=True)
    login(client, accounts[Role.REVIEWER].email)
    claim(client, triage.id)
    # the page shows the miss the reviewer holds
    soup = get(client, f"/triages/{triage.id}/review", mode)
    card = soup.select_one("#review .card")
    assert card["data-miss"]
    assert card["data-version"] == "1"
    assert soup.select_one("#query-text").get_text() == "how do I handle api throttling limits?"
    assert [m.get_text() for m in soup.select("#doc-title mark")] == ["api", "throttling", "limits"]
    assert (
        soup.select_one("#where").get_text()
        == "not retrieved: not among the run's 3 results for this query"
    )
    keys = [(b["data-key"], b.get("value")) for b in soup.select("#review button[data-key]")]
    assert keys[:3] == [("1", "not-indexed"), ("2", "vocabulary-mismatch"), ("3", "chunk-boundary")]
    assert [li["value"] for li in soup.select("#candidates li")] == ["1", "2", "3"]
    assert soup.select_one("#candidates-count").get_text() == "showing 3 of 3"
    # the cause buttons by name, each with its meaning
    buttons = soup.select("#review form.actions button[data-key]")
    assert [b.get_text(" ", strip=True) for b in buttons[:3]] == [
        "1 Not indexed",
        "2 Vocabulary mismatch",
        "3 Chunk boundary",
    ]
    assert all(b["title"] for b in buttons[:3])


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_empty_card_agrees_with_its_numbers(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    """ "1 of 1 miss has a final label", never "1 of 1 misses have"."""
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1, corpus=True)
    login(client, accounts[Role.REVIEWER].email)
    miss_id = claim(client, triage.id).select_one(".card")["data-miss"]
    done = client.post(
        f"/triages/{triage.id}/review/label",
        headers=HTMX,
        data={"miss_id": miss_id, "version": "1", "category": "chunk-boundary"},
    )
    empty = BeautifulSoup(done.text, "html.parser").select_one("#empty")
    assert empty is not None
    said = " ".join(empty.select_one("p").get_text().split())
    assert said == "1 of 1 miss has a final label. See the triage."


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_label_answers_with_the_next_card(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=2, corpus=True)
    login(client, accounts[Role.REVIEWER].email)
    first = claim(client, triage.id)
    miss_id = first.select_one(".card")["data-miss"]
    url = f"/triages/{triage.id}/review/label"
    response = client.post(
        url, headers=HTMX, data={"miss_id": miss_id, "version": "1", "category": "not-indexed"}
    )
    assert response.status_code == 200
    card = BeautifulSoup(response.text, "html.parser")
    assert card.find("html") is None  # the card alone, swapped in place
    # the cause by its name, not its identifier
    message = card.select_one("#message").get_text()
    assert re.fullmatch(r"Saved: q0 / d0-[01] is Not indexed\.", message), message
    assert card.select_one(".card")["data-miss"] != miss_id
    # The same label again: stale, and the reviewer is told it was NOT saved.
    again = client.post(
        url, headers=HTMX, data={"miss_id": miss_id, "version": "1", "category": "chunk-boundary"}
    )
    assert again.status_code == 409
    assert again.headers["x-error-code"] == "stale_version"
    assert (
        "was NOT saved"
        in BeautifulSoup(again.text, "html.parser").select_one("#message").get_text()
    )


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_query_and_note_text_are_escaped(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    (tmp_path / "x.qrels").write_text("q1 0 d1 1\n")
    (tmp_path / "x.tsv").write_text("q1\t<script>alert(1)</script> <img src=x onerror=alert(2)>\n")
    (tmp_path / "x.trec").write_text("q1 Q0 other 1 1 t\n")
    from sqlmodel import Session

    from app.services.imports import golden_sets, runs
    from app.services.triage import triages

    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(
            session=session, name="x", qrels=tmp_path / "x.qrels", queries=tmp_path / "x.tsv"
        )
        run = runs.import_run(
            session=session, golden=golden, name="r", path=tmp_path / "x.trec", source_name="x.trec"
        )
        triage = triages.create_triage(
            session=session, run=run, golden=golden, depth=5, k=1, user=None
        )
    login(client, accounts[Role.REVIEWER].email)
    claim(client, triage.id)
    html = client.get(f"/triages/{triage.id}/review").text
    soup = BeautifulSoup(html, "html.parser")
    assert soup.select_one("#query-text").get_text() == (
        "<script>alert(1)</script> <img src=x onerror=alert(2)>"
    )
    assert soup.select("#review script") == []
    assert soup.select("#review img") == []
