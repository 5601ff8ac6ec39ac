"""Upload copies of killed processes are removed at the next start-up, never a live one's.

Found by an outside probe: each kill -9 of the server during an HTTP import left its
``misstriage-upload-*`` copy of the file in the temporary folder (248 MiB after 8 kills), and
no restart removed them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.http import uploads
from app.main import create_app
from app.models import Role
from app.services.accounts import users
from app.settings import Settings
from tests.support.live import LiveServer
from tests.support.service import TEST_SECRET
from tests.support.triage import make_triage

HOLDER = """
import io, sys, time
from starlette.datastructures import UploadFile
from app.http.uploads import saved_uploads
with saved_uploads(UploadFile(io.BytesIO(b"q1 Q0 d1 1 1 t\\n"), filename="run.trec")) as saved:
    print(saved.paths[0], flush=True)
    time.sleep(120)
"""


def _holder(tmp: Path) -> tuple[subprocess.Popen[str], Path]:
    """A process in the middle of a request that uses an upload copy."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        env={**os.environ, "TMPDIR": str(tmp)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    copy = Path(process.stdout.readline().strip())
    assert copy.is_file()
    assert copy.parent.parent == tmp
    return process, copy


def test_a_live_request_keeps_its_copy_a_killed_one_loses_it(tmp_path: Path) -> None:
    live, live_copy = _holder(tmp_path)
    killed, killed_copy = _holder(tmp_path)
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        assert killed_copy.is_file()  # nothing of a killed process cleans up after it
        assert uploads.sweep_abandoned(tmp_path) == 1
        assert not killed_copy.parent.exists()
        assert live_copy.is_file()  # another process's import goes on with its file
    finally:
        live.kill()
        live.wait(10)
    assert uploads.sweep_abandoned(tmp_path) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_folder_without_its_lock_is_left_while_new(tmp_path: Path) -> None:
    """A folder whose request is making it (no lock file yet) is not taken away from it."""
    making = tmp_path / f"{uploads.PREFIX}making"
    making.mkdir()
    assert uploads.sweep_abandoned(tmp_path) == 0
    old = time.time() - uploads.UNLOCKED_GRACE_S - 60
    os.utime(making, (old, old))
    assert uploads.sweep_abandoned(tmp_path) == 1


def test_the_app_sweeps_at_start_up(
    settings: Settings, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    _, copy = _holder(folder)  # killed at once below
    os.kill(int(_pid_holding(copy.parent)), signal.SIGKILL)
    time.sleep(0.2)
    with TestClient(create_app(settings, engine)) as client:
        assert client.get("/healthz").status_code == 200
        assert not copy.parent.exists()


def _pid_holding(folder: Path) -> str:
    """The pid of the process holding ``folder``'s lock (from /proc/locks)."""
    inode = (folder / uploads.LOCK_NAME).stat().st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if fields[1] == "FLOCK" and fields[5].endswith(f":{inode}"):
            return fields[4]
    raise AssertionError("nobody holds the lock")


def test_a_server_killed_mid_import_leaves_nothing_after_its_restart(
    database_url: str, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's case, end to end: kill -9 the server while it imports an upload."""
    golden, _, _ = make_triage(engine, tmp_path)
    with Session(engine, expire_on_commit=False) as session:
        lead = users.create_user(
            session=session, email="lead@example.com", password="long enough", role=Role.LEAD
        )
        token = users.create_token(session=session, user=lead, name="t").secret
    big = tmp_path / "big.trec"
    with big.open("w") as out:  # about 40 MB: the import takes a few seconds
        for q in range(5):
            out.writelines(f"q{q} Q0 doc{q}-{r} {r + 1} {1e6 - r} t\n" for r in range(250_000))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    (tmp_path / "one").mkdir()
    server = LiveServer(database_url, tmp_path / "one", secret=TEST_SECRET)
    failed: list[BaseException] = []

    def upload() -> None:
        try:
            with big.open("rb") as handle:
                httpx.post(
                    f"{server.url}/api/v1/golden-sets/{golden.id}/runs",
                    headers={"Authorization": f"Bearer {token}"},
                    data={"name": "big"},
                    files={"run": ("big.trec", handle)},
                    timeout=120,
                )
        except httpx.HTTPError as exc:  # the server is killed under it: expected
            failed.append(exc)

    sender = threading.Thread(target=upload)
    sender.start()
    deadline = time.monotonic() + 60
    while not any(scratch.glob(f"{uploads.PREFIX}*/*.trec")):
        assert time.monotonic() < deadline, "the upload never reached its copy"
        time.sleep(0.01)
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(10)
    sender.join(60)
    assert failed, "the import finished before the kill: make the file bigger"
    assert list(scratch.glob(f"{uploads.PREFIX}*")), "a killed process removes nothing"
    (tmp_path / "two").mkdir()
    again = LiveServer(database_url, tmp_path / "two", secret=TEST_SECRET)
    try:
        assert list(scratch.glob(f"{uploads.PREFIX}*")) == []
    finally:
        again.stop()


def test_what_the_sweep_never_touches(tmp_path: Path) -> None:
    """Another user's folder in the shared temporary directory, and a lock file that is not a
    file (a FIFO would block a plain open, and the start-up with it)."""
    if os.getuid() != 0:
        pytest.skip("giving a folder to another user takes root (CI runs as root)")
    old = time.time() - uploads.UNLOCKED_GRACE_S - 60
    foreign = tmp_path / f"{uploads.PREFIX}foreign"
    foreign.mkdir()
    (foreign / uploads.LOCK_NAME).touch()
    os.chown(foreign, 65534, 65534)
    trap = tmp_path / f"{uploads.PREFIX}trap"
    trap.mkdir()
    os.mkfifo(trap / uploads.LOCK_NAME)
    for folder in (foreign, trap):
        os.utime(folder, (old, old))
    started = time.monotonic()
    assert uploads.sweep_abandoned(tmp_path) == 0
    assert time.monotonic() - started < 5
    assert foreign.is_dir()
    assert trap.is_dir()
