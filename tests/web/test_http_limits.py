"""A request's head is bounded before the app sees it (app/http/protocol.py): a real server
(``misstriage serve``) and raw sockets, every read and the whole test bounded in time.

The limits are the shipped defaults (8 KiB target, 64 KiB head, 100 headers), except the
head's timeout, shortened for the tests through its setting."""

from __future__ import annotations

import json
import select
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from bs4 import BeautifulSoup

from app.models import Role
from tests.support.live import LiveServer
from tests.support.service import TEST_SECRET, Account

TIMEOUT_SECONDS = 1.5
TARGET_LIMIT = 8 * 1024
HEAD_LIMIT = 64 * 1024
HEADER_LIMIT = 100
MiB = 1024 * 1024


def start(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path, **kw: int) -> LiveServer:
    folder = tmp_path_factory.mktemp("http-limits")
    database = folder / "misstriage.db"
    shutil.copy(sqlite_template, database)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MISSTRIAGE_HEADER_TIMEOUT_SECONDS", str(TIMEOUT_SECONDS))
        return LiveServer(f"sqlite:///{database}", folder, secret=TEST_SECRET, **kw)


@pytest.fixture(scope="module")
def server(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server for the module (a copy of the migrated SQLite template): the refusals
    happen before the app reads a row, and a server start costs seconds."""
    live = start(tmp_path_factory, sqlite_template)
    yield live
    live.stop()


def exchange(port: int, data: bytes, *, seconds: float = 10.0) -> tuple[bytes, bool]:
    """Send ``data``, then read until the server closes (True) or ``seconds`` pass (False)."""
    with socket.create_connection(("127.0.0.1", port), timeout=seconds) as sock:
        if data:
            sock.sendall(data)
        return read_until_closed(sock, seconds)


def read_until_closed(sock: socket.socket, seconds: float) -> tuple[bytes, bool]:
    deadline = time.monotonic() + seconds
    answer = b""
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            return answer, True
        if not data:
            return answer, True
        answer += data
    return answer, False


def parse(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


def refused(answer: bytes, status: int, code: str, *, as_json: bool) -> None:
    """A small complete response: the status, the length it says, ``Connection: close``,
    and the JSON error body or a tiny page."""
    assert answer.startswith(f"HTTP/1.1 {status} ".encode()), answer[:300]
    got, headers, body = parse(answer)
    assert got == status
    assert headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body) < 1000
    assert headers["x-error-code"] == code
    if as_json:
        assert headers["content-type"] == "application/json"
        error = json.loads(body)["error"]
        assert error["code"] == code
        assert error["message"]
    else:
        assert headers["content-type"].startswith("text/html")
        page = BeautifulSoup(body, "html.parser")
        assert page.title is not None
        assert page.title.get_text().startswith(str(status))


def refusal_lines(server: LiveServer) -> list[dict[str, object]]:
    lines = []
    for line in server.log.read_text().splitlines():
        if line.startswith("{") and '"misstriage.http"' in line:
            lines.append(json.loads(line))
    return lines


def request(path: str = "/healthz", headers: bytes = b"") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode() + headers


# --- the request target: 414 ---


def test_a_long_request_target_answers_414_and_closes(server: LiveServer) -> None:
    long_path = "/api/v1/golden-sets/" + "a" * TARGET_LIMIT
    answer, closed = exchange(server.port, request(long_path) + b"\r\n")
    refused(answer, 414, "uri_too_long", as_json=True)
    assert closed
    # a page's target answers a page; a target that never ends is refused all the same
    answer, closed = exchange(server.port, request("/golden-sets?q=" + "b" * 20_000))
    refused(answer, 414, "uri_too_long", as_json=False)
    assert closed


def test_a_pipelined_refusal_comes_after_the_earlier_answer(server: LiveServer) -> None:
    """A client that sends a good request and, behind it, one with a long target: the first
    is answered in full, then the refusal, then the connection closes."""
    answer, closed = exchange(
        server.port, request() + b"\r\n" + request("/api/v1/" + "f" * TARGET_LIMIT) + b"\r\n"
    )
    status, headers, rest = parse(answer)
    assert status == 200
    length = int(headers["content-length"])
    assert json.loads(rest[:length])["status"] == "ok"
    refused(rest[length:], 414, "uri_too_long", as_json=True)
    assert closed


def test_a_target_within_the_limit_reaches_the_app(server: LiveServer) -> None:
    path = "/healthz?pad=" + "c" * (TARGET_LIMIT - 100)
    answer, _ = exchange(server.port, request(path) + b"Connection: close\r\n\r\n")
    status, _, body = parse(answer)
    assert status == 200
    assert json.loads(body)["status"] == "ok"


# --- the header section: 431 ---


def flood(port: int, head: bytes, total: int, *, seconds: float = 15.0) -> tuple[bytes, int]:
    """Send ``head``, then ``total`` bytes of a header value that never ends, reading while
    sending; returns what the server answered (read until it closed) and the bytes sent."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=seconds)
    try:
        sock.sendall(head)
        sock.setblocking(False)
        chunk, sent, answer = b"a" * 65536, 0, b""
        deadline = time.monotonic() + seconds
        writing = True
        while time.monotonic() < deadline:
            readable, writable, _ = select.select([sock], [sock] if writing else [], [], 0.5)
            if readable:
                try:
                    data = sock.recv(65536)
                except ConnectionResetError:
                    break
                if not data:
                    break
                answer += data
            elif writable:
                try:
                    sent += sock.send(chunk[: total - sent])
                except (BrokenPipeError, ConnectionResetError):
                    writing = False
                    continue
                writing = sent < total
        return answer, sent
    finally:
        sock.close()


def test_a_header_that_never_ends_answers_431_after_at_most_the_limit(
    server: LiveServer,
) -> None:
    """8 MiB of one header, never ended: the answer is 431 as soon as 64 KiB of head have
    been read, and the server counts no more than that."""
    head = request(headers=b"X-Secret-Marker: s3cr3t")
    answer, sent = flood(server.port, head, 8 * MiB)
    refused(answer, 431, "header_fields_too_large", as_json=False)
    # the head and what was sent of the value passed the limit: the server read up to it
    # (under load the refusal can come right after the first 64 KiB piece of the value)
    assert len(head) + sent > HEAD_LIMIT
    line = refusal_lines(server)[-1]
    assert (line["status"], line["code"], line["max_bytes"]) == (
        431,
        "header_fields_too_large",
        HEAD_LIMIT,
    )
    assert line["head_bytes"] == HEAD_LIMIT  # counted up to the limit, not one piece more
    # the log says which limit and from where, never what the header said
    assert "s3cr3t" not in server.log.read_text()


def test_headers_that_never_end_keep_the_memory_bounded(server: LiveServer) -> None:
    """The probe's attack, scaled down: four connections each sending 8 MiB of a header
    that never ends, at once. Each is refused at 64 KiB; the server grows by far less than
    the 32 MiB they sent (it grew by all of it, and more, before the limit)."""
    process = psutil.Process(server.process.pid)
    before = process.memory_info().rss
    peak = before
    answers: list[bytes] = []
    done = threading.Event()

    def one() -> None:
        answers.append(flood(server.port, request(path="/api/v1/me"), 8 * MiB)[0])

    def sample() -> None:  # the peak, while the connections are open
        nonlocal peak
        while not done.wait(0.02):
            peak = max(peak, process.memory_info().rss)

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    done.set()
    sampler.join(5)
    grown = peak - before
    assert len(answers) == 4
    for answer in answers:
        refused(answer, 431, "header_fields_too_large", as_json=True)
    assert grown < 8 * MiB, f"the server grew by {grown / MiB:.1f} MiB"
    assert httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200


def test_a_large_head_within_the_limit_reaches_the_app(server: LiveServer) -> None:
    cookie = b"Cookie: tracking=" + b"d" * (HEAD_LIMIT - 1024) + b"\r\n"
    answer, _ = exchange(server.port, request(headers=cookie) + b"Connection: close\r\n\r\n")
    assert parse(answer)[0] == 200


def test_more_than_100_headers_answer_431(server: LiveServer) -> None:
    # Host, 98 more and Connection make 100, which pass
    many = b"".join(b"X-H%d: 1\r\n" % i for i in range(HEADER_LIMIT - 2))
    answer, _ = exchange(server.port, request(headers=many) + b"Connection: close\r\n\r\n")
    assert parse(answer)[0] == 200
    # 101: refused; the Accept header came after the limit, so it was never read
    too_many = many + b"X-Last: 1\r\nAccept: application/json\r\n"
    answer, closed = exchange(server.port, request("/golden-sets", headers=too_many) + b"\r\n")
    refused(answer, 431, "header_fields_too_large", as_json=False)
    assert closed
    # a client that prefers JSON, its Accept header read before the limit
    prefers_json = b"Accept: text/html;q=0, application/json\r\n" + too_many
    answer, _ = exchange(server.port, request("/golden-sets", headers=prefers_json) + b"\r\n")
    refused(answer, 431, "header_fields_too_large", as_json=True)
    assert refusal_lines(server)[-1]["max_headers"] == HEADER_LIMIT


def test_a_large_body_is_not_counted_as_head(
    live_server: LiveServer, accounts: dict[Role, Account]
) -> None:
    """A multipart upload of 2.5 MiB (its bytes arrive in pieces far larger than the
    head's limit) is imported, on both databases."""
    qrels = "".join(f"q{i % 500} 0 doc-{i:08d} 1\n" for i in range(120_000)).encode()
    assert len(qrels) > 2 * MiB
    response = httpx.post(
        f"{live_server.url}/api/v1/golden-sets",
        headers=accounts[Role.LEAD].headers,
        data={"name": "big"},
        files={"qrels": ("big.qrels", qrels)},
        timeout=60,
    )
    assert response.status_code == 201, response.text[:300]
    assert response.json()["judgments"] == 120_000


# --- the time to send the head: 408 ---


def test_a_slow_head_answers_408_and_closes(server: LiveServer) -> None:
    """A slowloris: a header byte every 0.2 s, each one resetting nothing; 408 arrives the
    timeout after the first byte, and the connection closes."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(request("/api/v1/me"))
        answer = b""
        for byte in b"X-Slow: " + b"z" * 100:
            readable, _, _ = select.select([sock], [], [], 0.2)
            if readable:
                break
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
        answer, closed = read_until_closed(sock, 5)
        waited = time.monotonic() - started
    refused(answer, 408, "request_timeout", as_json=True)
    assert closed
    assert TIMEOUT_SECONDS - 0.1 <= waited < TIMEOUT_SECONDS + 3
    assert refusal_lines(server)[-1]["status"] == 408


def test_a_connection_that_sends_nothing_is_closed(server: LiveServer) -> None:
    started = time.monotonic()
    answer, closed = exchange(server.port, b"", seconds=TIMEOUT_SECONDS + 5)
    assert (answer, closed) == (b"", True)
    assert time.monotonic() - started >= TIMEOUT_SECONDS - 0.1


def test_the_clock_of_a_kept_alive_request_starts_at_its_first_byte(server: LiveServer) -> None:
    """The first request answers; the second, begun later on the same connection and never
    finished, gets its own full timeout from its first byte, then 408."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request() + b"\r\n")
        first = b""
        while b"\r\n\r\n" not in first:
            first += sock.recv(65536)
        status, headers, body = parse(first)
        while len(body) < int(headers["content-length"]):
            body += sock.recv(65536)
        assert status == 200
        assert "connection" not in headers  # kept alive
        time.sleep(1.0)  # within uvicorn's keep-alive (5 s), most of the head's timeout
        began = time.monotonic()
        sock.sendall(request()[:20])
        answer, closed = read_until_closed(sock, TIMEOUT_SECONDS + 5)
        waited = time.monotonic() - began
    refused(answer, 408, "request_timeout", as_json=False)
    assert closed
    assert waited >= TIMEOUT_SECONDS - 0.1


def test_a_complete_head_is_not_timed(server: LiveServer) -> None:
    """The head's clock stops at its end: a body that takes longer than the head's timeout
    (but never stalls for the body's) is the app's to answer."""
    body = b"email=nobody%40example.com&password=wrong"
    with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
        sock.sendall(
            b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        for i in range(0, len(body), 10):
            time.sleep(0.5)
            sock.sendall(body[i : i + 10])
        answer, _ = read_until_closed(sock, 10)
    assert parse(answer)[0] not in (408, 414, 431), answer[:300]


# --- every way `misstriage serve` starts ---


def test_several_workers_enforce_the_limits_too(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    live = start(tmp_path_factory, sqlite_template, workers=2)
    try:
        for _ in range(4):  # connections spread over both workers
            answer, _ = exchange(live.port, request("/api/x" + "e" * TARGET_LIMIT) + b"\r\n")
            refused(answer, 414, "uri_too_long", as_json=True)
        answer, _ = flood(live.port, request(), 2 * MiB)
        refused(answer, 431, "header_fields_too_large", as_json=False)
    finally:
        live.stop()
    assert [line["status"] for line in refusal_lines(live)] == [414] * 4 + [431]
