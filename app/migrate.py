"""Alembic, driven from code: ``misstriage db upgrade`` and the migration tests."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from app.db import normalise_url
from app.settings import Settings

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """A top-level folder of the repository (``migrations``, ``templates``), or its copy
    bundled inside the installed wheel."""
    bundled = _PACKAGE / "_bundled" / name
    return bundled if bundled.is_dir() else _PACKAGE.parent / name


def alembic_config(settings: Settings) -> Config:
    config = Config()
    config.set_main_option("script_location", str(resource_dir("migrations")))
    # Alembic reads the URL through ConfigParser: escape its interpolation character.
    config.set_main_option(
        "sqlalchemy.url", normalise_url(settings.database_url).replace("%", "%%")
    )
    config.attributes["configure_logging"] = False
    return config


def upgrade(settings: Settings, revision: str = "head") -> None:
    command.upgrade(alembic_config(settings), revision)


def downgrade(settings: Settings, revision: str) -> None:
    command.downgrade(alembic_config(settings), revision)
