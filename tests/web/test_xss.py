"""Script injection: payloads in query texts, ids, documents, names, causes, notes, reasons,
emails and token names are shown as text on every page that shows them, never as markup."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app.models import Role
from app.web import copy
from tests.support.payloads import (
    CAUSE,
    IMG,
    SCRIPT,
    Seeded,
    assert_inert,
    pages,
    seed,
)
from tests.support.service import ORIGIN, Account, login

HTMX = {"HX-Request": "true", **ORIGIN}


@pytest.fixture
def seeded(client: TestClient, engine: Engine, accounts: dict[Role, Account]) -> Seeded:
    data = seed(client, engine, accounts[Role.LEAD])
    login(client, accounts[Role.LEAD].email)
    # what the review page does as it loads: the GET alone claims nothing
    claimed = client.post(f"/triages/{data.triages[1]}/review/claim", headers=HTMX)
    assert claimed.status_code == 200, claimed.text
    return data


def test_every_page_shows_payloads_as_text(client: TestClient, seeded: Seeded) -> None:
    for url, shown in pages(seeded):
        for headers in ({}, {"HX-Request": "true"}):
            response = client.get(url, headers=headers)
            assert response.status_code == 200, (url, response.text[:300])
            soup = assert_inert(response.text, url)
            text = soup.get_text()
            # a golden set's own cause shows its human name (copy.label): still text
            missing = [p for p in shown if p not in text and copy.label(p) not in text]
            assert missing == [], (url, headers)


def test_review_actions_answer_with_inert_cards(client: TestClient, seeded: Seeded) -> None:
    """The HTMX answers of the review page carry the next card, with the same texts."""
    second = seeded.triages[1]
    page = assert_inert(client.get(f"/triages/{second}/review").text, "review")
    card = page.select_one(".card")
    assert card is not None
    # In an earlier triage of this golden set the pair was labelled other, with a payload note.
    suggestion = page.select_one("#suggestion")
    assert suggestion is not None
    assert SCRIPT in suggestion.get_text()
    url = f"/triages/{second}/review/label"
    answer = client.post(
        url,
        headers=HTMX,
        data={"miss_id": card["data-miss"], "version": card["data-version"], "category": "other"},
    )
    assert answer.status_code == 422  # other needs a note: the same card again, with the error
    assert_inert(answer.text, "label refused")
    answer = client.post(
        url,
        headers=HTMX,
        data={
            "miss_id": card["data-miss"],
            "version": card["data-version"],
            "category": CAUSE,
            "note": IMG,
        },
    )
    assert answer.status_code == 200, answer.text
    soup = assert_inert(answer.text, "label saved")
    assert copy.label(CAUSE) in soup.select_one("#message").get_text()  # by its name, as text
