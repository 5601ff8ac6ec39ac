"""The Docker route builds: no Docker engine runs here (and no base image can be pulled), so
this test does what the Dockerfile does with the files it copies. It reads the Dockerfile's
COPY lines, copies exactly those paths into an empty folder, builds the wheel there (the
Dockerfile's ``pip install .``), installs it into a fresh virtual environment, and runs the
installed ``misstriage``: ``--help``, ``db upgrade`` on SQLite, and ``serve`` answering
/healthz, the login page and its static files (so templates, migrations, static files and
examples are inside the wheel)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.live import free_port

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def uv() -> str:
    found = Path(sys.executable).parent / "uv"
    if found.exists():
        return str(found)
    which = shutil.which("uv")
    if which is None:
        pytest.fail("uv is not installed (make install puts it in .venv/bin)")
    return which


def copy_lines(dockerfile: str) -> list[tuple[list[str], str]]:
    """(sources, destination) of every COPY instruction, continuation lines joined."""
    joined = dockerfile.replace("\\\n", " ")
    copies = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if not words or words[0].upper() != "COPY":
            continue
        args = [w for w in words[1:] if not w.startswith("--")]
        if any(w.startswith("--from") for w in words[1:]):
            continue  # a multi-stage copy comes from another image, not the context
        copies.append((args[:-1], args[-1]))
    return copies


def stage_context(dockerfile: str, target: Path) -> list[str]:
    """Copy what the COPY lines name from the repository to ``target`` (the WORKDIR)."""
    copied = []
    for sources, destination in copy_lines(dockerfile):
        into_dir = destination.endswith("/") or len(sources) > 1
        for source in sources:
            path = ROOT / source
            assert path.exists(), f"the Dockerfile copies {source}, which does not exist"
            dest = target / destination / path.name if into_dir else target / destination
            dest.parent.mkdir(parents=True, exist_ok=True)
            if path.is_dir():
                shutil.copytree(path, dest, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(path, dest)
            copied.append(source)
    return copied


def run(
    args: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, timeout=180, cwd=cwd, env=env)
    assert result.returncode == 0, f"{args[0]} {args[1]} failed:\n{result.stderr[-3000:]}"
    return result


def test_copy_lines_are_read() -> None:
    text = "FROM x\nCOPY a b ./\nCOPY --chown=u:u c \\\n  ./c\nCOPY --from=build /x /y\n"
    assert copy_lines(text) == [(["a", "b"], "./"), (["c"], "./c")]


def test_the_image_builds_installs_migrates_and_serves(tmp_path: Path) -> None:
    dockerfile = DOCKERFILE.read_text()
    assert "pip install ." in dockerfile, "the test mirrors the Dockerfile's `pip install .`"
    context = tmp_path / "srv"
    copied = stage_context(dockerfile, context)
    assert {"pyproject.toml", "app", "migrations", "templates"} <= set(copied)

    started = time.monotonic()
    run([uv(), "build", "--wheel", "--out-dir", str(tmp_path / "dist"), str(context)])
    (wheel,) = (tmp_path / "dist").glob("misstriage-*.whl")
    venv = tmp_path / "venv"
    run([uv(), "venv", "--quiet", "--python", sys.executable, str(venv)])
    run([uv(), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), str(wheel)])
    built = time.monotonic() - started

    # Run from an empty folder, so nothing can come from the repository or the build folder.
    work = tmp_path / "work"
    work.mkdir()
    database = tmp_path / "db.sqlite"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "DATABASE_URL": f"sqlite:///{database}",
        "MISSTRIAGE_ENVIRONMENT": "test",
        "MISSTRIAGE_SECRET_KEY": "docker-route-test-secret-" + "x" * 20,
    }
    misstriage = str(venv / "bin" / "misstriage")
    where = run(
        [str(venv / "bin" / "python"), "-c", "import app; print(app.__file__)"], cwd=work, env=env
    )
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout
    assert "serve" in run([misstriage, "--help"], cwd=work, env=env).stdout
    run([misstriage, "db", "upgrade"], cwd=work, env=env)
    assert database.stat().st_size > 0
    again = run([misstriage, "db", "upgrade"], cwd=work, env=env)
    assert "latest" in again.stdout + again.stderr

    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [misstriage, "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=work,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        health = None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                health = httpx.get(f"{base}/healthz", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert health is not None, f"serve did not start: {log.read_text()[-2000:]}"
        assert health.status_code == 200
        assert health.json()["database"] == "up"
        login = httpx.get(f"{base}/login", timeout=5)
        assert login.status_code == 200
        assert 'name="password"' in login.text
        assert "/static/app.css" in login.text
        css = httpx.get(f"{base}/static/app.css", timeout=5)
        assert css.status_code == 200
        assert css.headers["content-type"].startswith("text/css")
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
    # The demo's example data ships too (`misstriage demo` inside the container).
    bundled = run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "from app.migrate import resource_dir; print(resource_dir('examples'))",
        ],
        cwd=work,
        env=env,
    )
    examples = Path(bundled.stdout.strip())
    assert examples.is_relative_to(venv)
    assert (examples / "helpcentre" / "corpus.jsonl").is_file()
    assert built < 120, f"building and installing took {built:.0f} s"
