"""``misstriage demo --port`` and ``serve --port``: when MISSTRIAGE_PUBLIC_URL is not set, the
absolute links (exported issues, webhook bodies, the backlog downloads) follow the address
the server is started on, through the environment its worker processes inherit; a set one
wins. ``make demo PORT=8800`` passes the port on."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from app.cli.demo import demo
from app.cli.service import serve
from app.settings import PUBLIC_URL_VARIABLE, Settings, get_settings, listening_url

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[dict[str, Any]]]:
    """uvicorn.run recorded instead of serving, with the public URL it would see (the
    environment, which the commands change, is restored afterwards)."""
    monkeypatch.setenv(PUBLIC_URL_VARIABLE, "")
    monkeypatch.delenv(PUBLIC_URL_VARIABLE)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'served.db'}")
    monkeypatch.chdir(tmp_path)  # no .env file
    calls: list[dict[str, Any]] = []

    def run(*args: object, **kwargs: object) -> None:
        calls.append({**kwargs, "public_url": os.environ.get(PUBLIC_URL_VARIABLE)})

    import uvicorn

    monkeypatch.setattr(uvicorn, "run", run)
    get_settings.cache_clear()
    yield calls
    get_settings.cache_clear()


def test_demo_links_follow_its_port(
    started: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("app.cli.demo.seed", lambda url, data: (1, 2))
    result = CliRunner().invoke(demo, ["--port", "8800", "--var", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "http://127.0.0.1:8800/golden-sets/1" in result.output
    assert [(c["port"], c["public_url"]) for c in started] == [(8800, "http://127.0.0.1:8800")]
    # what the app's settings (and so every absolute link) then say
    assert Settings().public_url == "http://127.0.0.1:8800"


def test_serve_links_follow_its_host_and_port(
    started: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result = CliRunner().invoke(serve, ["--host", "127.0.0.2", "--port", "8801"])
    assert result.exit_code == 0, result.output
    assert [c["public_url"] for c in started] == ["http://127.0.0.2:8801"]


def test_a_public_url_that_is_set_wins(
    started: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(PUBLIC_URL_VARIABLE, "https://triage.example.com")
    monkeypatch.setattr("app.cli.demo.seed", lambda url, data: (1, 2))
    result = CliRunner().invoke(demo, ["--port", "8800", "--var", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert [c["public_url"] for c in started] == ["https://triage.example.com"]


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8800"),
        ("0.0.0.0", "http://127.0.0.1:8800"),  # all interfaces: reached on loopback here
        ("::", "http://[::1]:8800"),
        ("::1", "http://[::1]:8800"),
        ("triage.internal", "http://triage.internal:8800"),
    ],
)
def test_the_listening_url(host: str, url: str) -> None:
    assert listening_url(host, 8800) == url


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_takes_a_port() -> None:
    def recipe(*args: str) -> str:
        done = subprocess.run(
            ["make", "-n", "--no-print-directory", "-C", str(ROOT), "demo", *args],
            capture_output=True,
            text=True,
            check=True,
            env={k: v for k, v in os.environ.items() if k != "PORT"},
        )
        return done.stdout.strip().splitlines()[-1]

    assert recipe("PORT=8800").endswith("misstriage demo --port 8800")
    assert recipe().endswith("misstriage demo --port 8000")
