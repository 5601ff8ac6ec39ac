"""Migrations: upgrade, downgrade, upgrade again on both databases, and no drift from the
models (the equivalent of ``alembic check``)."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlmodel import SQLModel

import app.models  # noqa: F401
from app.db import make_engine
from app.migrate import downgrade, upgrade
from app.settings import Settings
from tests.support.service import make_settings


def _tables(settings: Settings) -> set[str]:
    engine = make_engine(settings)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade(fresh_settings: Settings) -> None:
    expected = set(SQLModel.metadata.tables)
    upgrade(fresh_settings)
    assert _tables(fresh_settings) == expected
    downgrade(fresh_settings, "base")
    assert _tables(fresh_settings) == set()
    upgrade(fresh_settings)
    assert _tables(fresh_settings) == expected


def test_models_and_migrations_do_not_drift(fresh_settings: Settings) -> None:
    upgrade(fresh_settings)
    engine = make_engine(fresh_settings)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            diff = compare_metadata(context, SQLModel.metadata)
    finally:
        engine.dispose()
    assert diff == []


def test_sqlite_pragmas(tmp_path: Path) -> None:
    engine = make_engine(make_settings(f"sqlite:///{tmp_path / 'p.db'}"))
    try:
        with engine.connect() as connection:
            assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
            assert connection.execute(text("PRAGMA busy_timeout")).scalar() == 10_000
    finally:
        engine.dispose()
