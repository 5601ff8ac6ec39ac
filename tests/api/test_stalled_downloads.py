"""Downloads that cannot starve the service (a real server on loopback, both databases).

Found by an outside probe: 22 clients (16 on SQLite) that asked for the JSONL backlog and never
read the body held a pooled connection each, and after a few seconds ``/healthz``, ``/api/v1/me``
and ``claim`` waited 30 s for a connection and answered 503. Now a download reads each page of
rows in a session of its own and holds no connection while its client does not read; and one
user may have only a few downloads running at once."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import psutil
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.http.downloads import MAX_PER_USER
from app.models import Role
from app.services.accounts import users
from app.services.imports import golden_sets, runs
from app.services.triage import triages
from tests.support.live import LiveServer

#: More stalled downloads than either database's pool has connections (20 on PostgreSQL,
#: 15 on SQLite), spread over enough users that the per-user bound admits them all.
USERS = 6
MISSES = 2_500


def _tokens(engine: Engine, count: int) -> list[str]:
    with Session(engine, expire_on_commit=False) as session:
        secrets = []
        for n in range(count):
            user = users.create_user(
                session=session,
                email=f"reader{n}@example.com",
                password="long enough",
                role=Role.REVIEWER,
            )
            secrets.append(users.create_token(session=session, user=user, name="t").secret)
        return secrets


def _stalled_download(port: int, path: str, token: str) -> tuple[socket.socket, bytes]:
    """Ask for ``path`` and read only the start of the answer; the socket's tiny receive
    window makes the server's writes wait (as a client that never reads does)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        "Connection: close\r\n\r\n"
    )
    sock.sendall(request.encode())
    head = b""
    while b"\r\n" not in head:
        chunk = sock.recv(64)
        if not chunk:
            break
        head += chunk
    return sock, head.split(b"\r\n", 1)[0]


def _settled(pid: int) -> None:
    """Wait until the server stops working (its CPU time still for half a second): the
    streams have written what their sockets take and wait for their clients."""
    server = psutil.Process(pid)
    deadline = time.monotonic() + 90
    spent = sum(server.cpu_times()[:2])
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = sum(server.cpu_times()[:2])
        if now - spent < 0.05:
            return
        spent = now
    raise AssertionError("the server never settled")


@pytest.fixture
def stalled(engine: Engine, tmp_path: Path) -> tuple[int, list[str]]:
    """A triage whose JSON lines (about 8 MB: each row carries its query's 3,000-character
    text) are more than the server's socket takes in (its send buffer grows to 4 MB on
    loopback) and the client's 2 KiB window together: each download waits for its client."""
    queries = MISSES // 10
    (tmp_path / "g.qrels").write_text(
        "".join(f"q{q} 0 d{q}-{i} 1\n" for q in range(queries) for i in range(10))
    )
    words = "rate limiting and retries for the public api " * 70
    (tmp_path / "g.tsv").write_text("".join(f"q{q}\t{q} {words[:3000]}\n" for q in range(queries)))
    (tmp_path / "g.trec").write_text("".join(f"q{q} Q0 other 1 9 t\n" for q in range(queries)))
    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(
            session=session, name="g", qrels=tmp_path / "g.qrels", queries=tmp_path / "g.tsv"
        )
        run = runs.import_run(
            session=session, golden=golden, name="r", path=tmp_path / "g.trec", source_name="r"
        )
        triage = triages.create_triage(
            session=session, run=run, golden=golden, depth=10, k=1, user=None
        )
    assert triage.id is not None
    return triage.id, _tokens(engine, USERS)


def test_stalled_downloads_leave_the_service_answering(
    stalled: tuple[int, list[str]], live_server: LiveServer
) -> None:
    triage_id, tokens = stalled
    path = f"/api/v1/triages/{triage_id}/backlog?format=jsonl"
    sockets: list[socket.socket] = []
    try:
        for token in tokens:
            for _ in range(MAX_PER_USER):
                sock, status = _stalled_download(live_server.port, path, token)
                sockets.append(sock)
                assert status == b"HTTP/1.1 200 OK"
        _settled(live_server.process.pid)  # every stream has filled its buffers and waits
        with httpx.Client(base_url=live_server.url, timeout=5.0) as client:
            started = time.monotonic()
            assert client.get("/healthz").status_code == 200
            me = client.get("/api/v1/me", headers={"Authorization": f"Bearer {tokens[0]}"})
            assert me.status_code == 200, me.text
            claimed = client.post(
                f"/api/v1/triages/{triage_id}/claim",
                headers={"Authorization": f"Bearer {tokens[1]}"},
            )
            assert claimed.status_code == 200, claimed.text
            assert time.monotonic() - started < 5.0
            # one more download of a user whose downloads all still run: refused, said why
            refused = client.get(path, headers={"Authorization": f"Bearer {tokens[0]}"})
            assert refused.status_code == 429
            assert refused.json()["error"]["code"] == "too_many_downloads"
            assert int(refused.headers["Retry-After"]) > 0
    finally:
        for sock in sockets:
            sock.close()
    # the clients are gone: their slots are given back, the user downloads again, in full
    with httpx.Client(base_url=live_server.url, timeout=30.0) as client:
        deadline = time.monotonic() + 10
        while True:
            again = client.get(path, headers={"Authorization": f"Bearer {tokens[0]}"})
            if again.status_code != 429 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert again.status_code == 200, again.text
        assert len(again.text.splitlines()) == MISSES
