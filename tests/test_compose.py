"""docker-compose.yml is valid (no Docker engine runs here: Debian's docker-compose v1
validates the file)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def compose() -> str:
    found = shutil.which("docker-compose")
    if found is None:
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail("docker-compose is not installed (.ci/run installs it)")
        pytest.skip("docker-compose is not installed")
    return found


def test_compose_file_is_valid() -> None:
    env = {**os.environ, "MISSTRIAGE_SECRET_KEY": "x" * 40}
    result = subprocess.run(
        [compose(), "-f", str(ROOT / "docker-compose.yml"), "config"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "condition: service_healthy" in result.stdout
    assert "pg_isready" in result.stdout


def test_compose_refuses_a_missing_secret() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MISSTRIAGE_SECRET_KEY"}
    result = subprocess.run(
        [compose(), "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode != 0
    assert "MISSTRIAGE_SECRET_KEY" in result.stderr
