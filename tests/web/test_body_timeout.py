"""A request body that stalls times out: a real server (``misstriage serve``) and a raw
socket that sends the headers and 10 bytes of a promised 1,000, then nothing."""

from __future__ import annotations

import json
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live import LiveServer
from tests.support.service import TEST_SECRET

TIMEOUT_SECONDS = 1.0


@pytest.fixture(scope="module")
def server(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server for the module (on a copy of the migrated SQLite template): the tests send
    raw requests and read no rows, and a server start costs seconds."""
    folder = tmp_path_factory.mktemp("body-timeout")
    database = folder / "misstriage.db"
    shutil.copy(sqlite_template, database)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MISSTRIAGE_BODY_TIMEOUT_SECONDS", str(TIMEOUT_SECONDS))
        live = LiveServer(f"sqlite:///{database}", folder, secret=TEST_SECRET)
    yield live
    live.stop()


def post_slowly(server: LiveServer, chunks: list[bytes], pause: float, length: int) -> bytes:
    """POST /login sending ``chunks`` ``pause`` seconds apart; everything the server answers
    until it closes the connection (or 15 s pass)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
        sock.sendall(
            b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\n"
            b"Content-Length: " + str(length).encode() + b"\r\nConnection: close\r\n\r\n"
        )
        for chunk in chunks:
            sock.sendall(chunk)
            time.sleep(pause)
        answer = b""
        while True:
            try:
                data = sock.recv(65536)
            except TimeoutError:
                break
            if not data:
                break
            answer += data
        return answer


def test_a_stalled_body_answers_408_and_the_server_goes_on(server: LiveServer) -> None:
    started = time.monotonic()
    answer = post_slowly(server, [b"email=x%40e"], pause=0, length=1000)
    waited = time.monotonic() - started
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer[:300]
    assert json.loads(body)["error"]["code"] == "request_timeout"
    # Answered after the timeout, not at once, and the connection was closed (recv ended).
    assert TIMEOUT_SECONDS <= waited < TIMEOUT_SECONDS + 5
    assert httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200
    log = server.log.read_text()
    assert "Traceback" not in log
    assert '"level": "ERROR"' not in log


def test_a_slow_body_that_keeps_coming_is_not_cut(server: LiveServer) -> None:
    """The timeout is for silence, not for the whole upload: bytes every 0.4 s pass."""
    body = b"email=nobody%40example.com&password=wrong+password"
    chunks = [body[i : i + 10] for i in range(0, len(body), 10)]
    answer = post_slowly(server, chunks, pause=0.4, length=len(body))
    status = answer.split(b"\r\n", 1)[0]
    assert status.startswith(b"HTTP/1.1 "), answer[:300]
    assert b" 408 " not in status
