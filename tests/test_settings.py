"""Where the settings come from: the database URL under its name in API.md
(``DATABASE_URL``) or prefixed as every other setting (``MISSTRIAGE_DATABASE_URL``)."""

from __future__ import annotations

import pytest

from app.settings import Settings


def test_the_database_url_is_read_under_either_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("MISSTRIAGE_DATABASE_URL", "sqlite:///./var/prefixed.db")
    assert Settings(_env_file=None).database_url == "sqlite:///./var/prefixed.db"
    # the name API.md gives comes first
    monkeypatch.setenv("DATABASE_URL", "sqlite:///./var/plain.db")
    assert Settings(_env_file=None).database_url == "sqlite:///./var/plain.db"
    monkeypatch.delenv("DATABASE_URL")
    monkeypatch.delenv("MISSTRIAGE_DATABASE_URL")
    assert Settings(_env_file=None).database_url == "sqlite:///./var/misstriage.db"
