"""A gzip decompression bomb (1 GiB of zeros in about 1 MB) through every import path: refused
with a message naming the file, with the memory of the process that reads it bounded.

How fast it is refused is a benchmark, not a test: ``python benchmarks/bomb_refusal.py``.

Memory is measured on real processes: the command line's peak resident size (``wait4``)
against the same command on a good file, and the server's high-water mark (``VmHWM``) before
and after the upload.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import zlib
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app.main import create_app
from app.models import Role
from app.settings import Settings
from tests.support.cli import misstriage
from tests.support.hostile_cases import CORPUS, QRELS, QUERIES, RUN
from tests.support.live import LiveServer
from tests.support.service import PASSWORD, TEST_SECRET, Account

GIB = 1 << 30
MIB = 1 << 20
#: Bound from issue 13: the peak memory under 200 MB above a good run.
EXTRA_BYTES = 200 * MIB


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1 GiB of zeros, gzip-compressed in a stream (never held in memory)."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.qrels.gz"
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(MIB)
    with path.open("wb") as out:
        for _ in range(GIB // MIB):
            out.write(packer.compress(zeros))
        out.write(packer.flush())
    assert path.stat().st_size < 2 * MIB
    return path


def env(database_url: str | None = None) -> dict[str, str]:
    values = {
        **os.environ,
        "MISSTRIAGE_ENVIRONMENT": "test",
        "MISSTRIAGE_SECRET_KEY": TEST_SECRET,
    }
    if database_url:
        values["DATABASE_URL"] = database_url
    return values


def measured(args: list[str | Path], environment: dict[str, str]) -> tuple[int, str, int]:
    """(exit status, stderr, peak resident bytes) of ``misstriage ARGS``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "app", *map(str, args)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    stderr = process.stderr.read().decode()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, stderr, usage.ru_maxrss * 1024


def assert_refused(status: int, stderr: str, name: str) -> None:
    assert status == 2, stderr
    (line,) = stderr.strip().splitlines()
    assert line.startswith("misstriage: error: ")
    assert name in line
    assert "decompression bomb" in line
    assert "Traceback" not in stderr
    assert len(line) < 1024


def good_files(tmp_path: Path) -> dict[str, Path]:
    files = {"qrels": QRELS, "queries": QUERIES, "corpus": CORPUS, "run": RUN}
    paths = {}
    for kind, text in files.items():
        paths[kind] = tmp_path / f"good-{kind}"
        paths[kind].write_text(text)
    return paths


def test_evaluate_refuses_a_bomb_in_bounded_memory(bomb: Path, tmp_path: Path) -> None:
    good = good_files(tmp_path)
    base = ["evaluate", "--queries", good["queries"]]
    _, _, baseline = measured([*base, "--qrels", good["qrels"], "--run", f"r={good['run']}"], env())
    for args in (
        [*base, "--qrels", bomb, "--run", f"r={good['run']}"],
        [*base, "--qrels", good["qrels"], "--run", f"r={bomb}"],
        [*base, "--qrels", good["qrels"], "--run", f"r={good['run']}", "--corpus", bomb],
    ):
        status, stderr, peak = measured(args, env())
        assert_refused(status, stderr, bomb.name)
        assert peak - baseline < EXTRA_BYTES, (peak, baseline)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_import_commands_refuse_a_bomb_in_bounded_memory(
    bomb: Path, tmp_path: Path, database_url: str
) -> None:
    good = good_files(tmp_path)
    environment = env(database_url)
    golden = ["import-golden-set", "--name", "g", "--qrels", good["qrels"]]
    status, stderr, baseline = measured(golden, environment)
    assert status == 0, stderr
    for args in (
        ["import-golden-set", "--name", "b1", "--qrels", bomb],
        ["import-golden-set", "--name", "b2", "--qrels", good["qrels"], "--queries", bomb],
        ["import-golden-set", "--name", "b3", "--qrels", good["qrels"], "--corpus", bomb],
        ["import-run", "--golden-set", "g", "--name", "r", "--run", bomb],
    ):
        status, stderr, peak = measured(args, environment)
        assert_refused(status, stderr, bomb.name)
        assert peak - baseline < EXTRA_BYTES, (args, peak, baseline)


def high_water_mark(pid: int) -> int:
    """The peak resident size of a process so far, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_the_server_refuses_a_bomb_in_bounded_memory(
    bomb: Path, tmp_path: Path, database_url: str
) -> None:
    """Through the API and through the HTML form, on a real server process."""
    # The account is made in this process (no memory is measured there); the server is real.
    created = misstriage(
        "create-user", "--email", "lead@example.com", "--password", PASSWORD, "--role", "lead",
        database_url=database_url,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    server = LiveServer(database_url, tmp_path, secret=TEST_SECRET)
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            origin = {"Origin": server.url}
            login = client.post(
                "/login",
                data={"email": "lead@example.com", "password": PASSWORD, "next": "/"},
                headers=origin,
            )
            assert login.status_code in (200, 303), login.text
            # Warm up: a good import, then a bad one, so that the mark counts the bomb only.
            good = client.post(
                "/golden-sets",
                data={"name": "good"},
                files={"qrels": ("good.qrels", QRELS)},
                headers=origin,
            )
            assert good.status_code < 400
            client.post(
                "/golden-sets",
                data={"name": "bad"},
                files={"qrels": ("bad.qrels", "q1 0 a x\n")},
                headers=origin,
            )
            data = bomb.read_bytes()
            for url, field in (("/golden-sets", "qrels"), ("/golden-sets", "queries")):
                for api in (True, False):
                    before = high_water_mark(server.process.pid)
                    files = {"qrels": ("good.qrels", QRELS.encode()), field: (bomb.name, data)}
                    response = client.post(
                        ("/api/v1" if api else "") + url,
                        data={"name": f"bomb-{field}-{api}"},
                        files=files,
                        headers={"Accept": "application/json", **origin} if api else origin,
                    )
                    assert response.status_code == 400, response.text[:500]
                    assert "Traceback" not in response.text
                    assert bomb.name in response.text
                    assert "decompression bomb" in response.text
                    assert high_water_mark(server.process.pid) - before < EXTRA_BYTES
            golden_id = client.get("/api/v1/golden-sets").json()["items"][0]["id"]
            for api in (True, False):
                before = high_water_mark(server.process.pid)
                response = client.post(
                    f"{'/api/v1' if api else ''}/golden-sets/{golden_id}/runs",
                    data={"name": f"bomb-run-{api}"},
                    files={"run": (bomb.name, data)},
                    headers=origin,
                )
                if not api and response.status_code == 303:
                    # the run form: post/redirect/get, the error is the next page's message
                    response = client.get(response.headers["location"])
                    assert response.status_code == 200
                    assert 'data-flash="error"' in response.text
                else:
                    assert response.status_code == 400, response.text[:500]
                assert "Traceback" not in response.text
                assert bomb.name in response.text
                assert "decompression bomb" in response.text
                assert high_water_mark(server.process.pid) - before < EXTRA_BYTES
    finally:
        server.stop()


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_app_applies_its_own_decompression_setting(
    settings: Settings, engine: Engine, accounts: dict[Role, Account]
) -> None:
    """The limit comes from the app's settings on every request (not a process global)."""
    packed = gzip.compress(QRELS.encode() * 50)  # 1.8 KB inflated
    headers = accounts[Role.LEAD].headers
    strict = create_app(settings.model_copy(update={"decompressed_max_bytes": 1000}), engine)
    with TestClient(strict) as client:
        response = client.post(
            "/api/v1/golden-sets",
            headers=headers,
            data={"name": "strict"},
            files={"qrels": ("packed.qrels.gz", packed)},
        )
    assert response.status_code == 400, response.text
    assert "MISSTRIAGE_DECOMPRESSED_MAX_BYTES" in response.json()["error"]["message"]
    with TestClient(create_app(settings, engine)) as client:
        response = client.post(
            "/api/v1/golden-sets",
            headers=headers,
            data={"name": "default"},
            files={"qrels": ("packed.qrels.gz", packed)},
        )
    assert response.status_code == 201, response.text
