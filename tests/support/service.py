"""The service under test: its settings, accounts, logging in through the form, fetching a page
(or its HTMX fragment), and the helpers several page and API tests share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, select

from app.models import Role
from app.settings import Settings

#: ``write_file(name, content, gz=False)``, the fixture that writes a small input file.
WriteFile = Callable[..., Path]
TEST_SECRET = "test-secret-key-that-is-long-enough-for-signing"
PASSWORD = "correct horse battery"
#: The headers of a form posted from our own pages, and of one posted by HTMX.
ORIGIN = {"Origin": "http://testserver"}
HTMX = {"HX-Request": "true", **ORIGIN}


def make_settings(database_url: str, **overrides: object) -> Settings:
    return Settings(
        DATABASE_URL=database_url,  # type: ignore[call-arg]
        environment="test",
        secret_key=TEST_SECRET,
        **overrides,  # type: ignore[arg-type]
    )


class Account:
    def __init__(self, email: str, role: Role, token: str) -> None:
        self.email, self.role, self.token = email, role, token

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def login(client: TestClient, email: str, password: str = PASSWORD) -> None:
    """Log in through the form, as a browser on our own origin would."""
    response = client.post(
        "/login",
        data={"email": email, "password": password, "next": "/"},
        headers={"Origin": "http://testserver"},
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text


def get(client: TestClient, url: str, mode: str) -> BeautifulSoup:
    headers = {"HX-Request": "true"} if mode == "fragment" else {}
    response = client.get(url, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["vary"] == "HX-Request"
    soup = BeautifulSoup(response.text, "html.parser")
    # A fragment is the content block only; a page has the whole layout.
    assert (soup.find("html") is not None) == (mode == "page")
    return soup


def row_counts(engine: Engine) -> dict[str, int]:
    """Rows per table, accounts aside (a token's last use may be written on any request), and
    the processes' auth counter (one row, whatever was imported)."""
    with Session(engine) as session:
        return {
            name: session.exec(select(func.count()).select_from(table)).one()
            for name, table in SQLModel.metadata.tables.items()
            if name not in ("user_account", "api_token", "user_session", "auth_generation")
        }


def claim(client: TestClient, triage_id: int) -> BeautifulSoup:
    """What the review page does as it loads: POST the claim (HTMX), answered by the card."""
    response = client.post(f"/triages/{triage_id}/review/claim", headers=HTMX)
    assert response.status_code == 200, response.text
    return BeautifulSoup(response.text, "html.parser")


def label_some(client: TestClient, accounts: dict[Role, Account], triage_id: int) -> list[int]:
    """The reviewer labels two misses (one 'other'); the lead claims a third and keeps it."""
    reviewer, lead = accounts[Role.REVIEWER].headers, accounts[Role.LEAD].headers
    ids = []
    for category, note in (("vocabulary-mismatch", ""), ("other", "judged wrongly")):
        miss = client.post(f"/api/v1/triages/{triage_id}/claim", headers=reviewer).json()
        response = client.post(
            f"/api/v1/misses/{miss['id']}/label",
            headers=reviewer,
            json={"category": category, "note": note, "version": 1},
        )
        assert response.status_code == 200
        ids.append(miss["id"])
    ids.append(client.post(f"/api/v1/triages/{triage_id}/claim", headers=lead).json()["id"])
    return ids
