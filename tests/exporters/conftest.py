"""The exporter tests talk to the fake tracker on 127.0.0.1: they allow requests to the local
network (MISSTRIAGE_ALLOW_LOCAL_NETWORK), which is refused by default."""

from __future__ import annotations

import pytest

from app.settings import Settings
from tests.conftest import make_settings


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url, allow_local_network=True)
