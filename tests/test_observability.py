"""Request ids and structured logs: the header round-trips, one JSON line per request with its
fields, and no token, cookie or password ever reaches a log line."""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from app.main import create_app
from app.models import Role
from app.observability import ACCESS_LOGGER, TEXT_FORMAT, JsonFormatter, RequestIdFilter
from app.settings import Settings
from tests.support.live import LiveServer
from tests.support.service import Account

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

GENERATED = re.compile(r"[0-9a-f]{32}")
SECRET = "s3cr3t-sentinel-Zq9"


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    """The access log records so far, as the JSON formatter writes them."""
    formatter = JsonFormatter()
    return [
        json.loads(formatter.format(record))
        for record in caplog.records
        if record.name == ACCESS_LOGGER
    ]


def every_log_line(caplog: pytest.LogCaptureFixture) -> str:
    """Every captured record of the server side (not the test client's own request log),
    formatted both ways (JSON and text), as one string."""
    text = logging.Formatter(TEXT_FORMAT)
    id_filter = RequestIdFilter()
    out = []
    for record in caplog.records:
        if record.name.startswith("httpx"):
            continue
        id_filter.filter(record)
        out += [JsonFormatter().format(record), text.format(record)]
    return "\n".join(out)


def test_request_id_round_trips(client: TestClient) -> None:
    sent = client.get("/healthz", headers={"X-Request-ID": "lb-7f3a.19:2"})
    assert sent.headers["x-request-id"] == "lb-7f3a.19:2"
    made = client.get("/healthz")
    assert GENERATED.fullmatch(made.headers["x-request-id"])
    # Not a sane id (spaces, quotes, too long): replaced, so it cannot forge a log line.
    for insane in ['x" status=200', "a" * 200, "", "-leading-dash"]:
        answer = client.get("/healthz", headers={"X-Request-ID": insane})
        assert GENERATED.fullmatch(answer.headers["x-request-id"]), insane
    # Error answers carry it too.
    missing = client.get("/api/v1/me", headers={"X-Request-ID": "req-401"})
    assert missing.status_code == 401
    assert missing.headers["x-request-id"] == "req-401"


def test_one_json_line_per_request(
    client: TestClient, accounts: dict[Role, Account], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    reviewer = accounts[Role.REVIEWER]
    answer = client.get(
        "/api/v1/me?page=2&token=" + SECRET,
        headers={**reviewer.headers, "X-Request-ID": "req-json-1"},
    )
    assert answer.status_code == 200
    lines = [line for line in access_lines(caplog) if line["request_id"] == "req-json-1"]
    assert len(lines) == 1
    line = lines[0]
    assert {"time", "level", "logger", "message", "request_id"} <= line.keys()
    assert line["level"] == "INFO"
    assert line["method"] == "GET"
    assert line["path"] == "/api/v1/me"  # the query string is never logged
    assert line["status"] == 200
    assert isinstance(line["duration_ms"], float)
    assert line["user_id"] == answer.json()["id"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", str(line["time"]))

    client.get("/healthz", headers={"X-Request-ID": "req-anon"})
    anonymous = [line for line in access_lines(caplog) if line["request_id"] == "req-anon"]
    assert anonymous[0]["user_id"] is None
    assert anonymous[0]["status"] == 200


def test_secrets_never_reach_the_logs(
    client: TestClient, accounts: dict[Role, Account], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    lead = accounts[Role.LEAD]
    # An unknown token, a real one, a cookie, a query string and a login form with a password.
    client.get("/api/v1/me", headers={"Authorization": f"Bearer {SECRET}"})
    client.get(f"/api/v1/me?access_token={SECRET}", headers=lead.headers)
    client.cookies.set("misstriage_session", SECRET)
    client.get("/")
    client.cookies.clear()
    client.post(
        "/login",
        data={"email": lead.email, "password": SECRET, "next": "/"},
        headers={"Origin": "http://testserver"},
        follow_redirects=False,
    )
    client.post(
        "/login",
        data={"email": f"{SECRET}@example.com", "password": SECRET},
        headers={"Origin": "http://evil.example"},
    )
    logged = every_log_line(caplog)
    assert len(access_lines(caplog)) >= 5
    assert SECRET not in logged
    assert lead.token not in logged


def test_an_unexpected_error_answers_500_with_the_request_id(
    settings: Settings, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    app = create_app(settings, engine)

    def boom() -> None:
        raise RuntimeError(f"internal detail {SECRET}")

    app.add_api_route("/api/v1/boom", boom)
    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.get("/api/v1/boom", headers={"X-Request-ID": "req-boom"})
    assert answer.status_code == 500
    error = answer.json()["error"]
    assert error["code"] == "internal_error"
    assert error["details"] == {"request_id": "req-boom"}
    assert SECRET not in answer.text
    assert "Traceback" not in answer.text
    [line] = [line for line in access_lines(caplog) if line["request_id"] == "req-boom"]
    assert line["status"] == 500


def test_an_unexpected_error_says_the_connection_closes(settings: Settings, engine: Engine) -> None:
    """uvicorn closes a connection after an error it was handed (Starlette re-raises it once
    answered): the 500 says so (``Connection: close``), on the wire of a real server, and
    the connection is closed after it; the next request on a new one is answered."""
    app = create_app(settings, engine)

    def boom() -> None:
        raise RuntimeError("boom")

    app.add_api_route("/api/v1/boom", boom)
    app.add_api_route("/boom", boom)  # a page's route: a browser gets the error page
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(b"GET /api/v1/boom HTTP/1.1\r\nHost: t\r\nAccept: application/json\r\n\r\n")
            received = b""
            while chunk := raw.recv(65536):  # until the server closes the connection
                received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 500")
        assert b"connection: close" in head.lower()
        assert json.loads(body)["error"]["code"] == "internal_error"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            assert client.get("/api/v1/boom").headers["connection"] == "close"
            page = client.get("/boom", headers={"Accept": "text/html"})
            assert page.status_code == 500
            assert page.headers["content-type"].startswith("text/html")
            assert page.headers["connection"] == "close"
            assert client.get("/healthz").status_code == 200
    finally:
        server.should_exit = True
        thread.join(timeout=20)


def test_serve_writes_json_lines(database_url: str, tmp_path: Path) -> None:
    """The real server (``misstriage serve``, environment "test": JSON by default)."""
    server = LiveServer(database_url, tmp_path, secret="x" * 40)
    try:
        answer = httpx.get(
            f"{server.url}/api/v1/me",
            headers={"X-Request-ID": "req-serve-1", "Authorization": f"Bearer {SECRET}"},
        )
        assert answer.status_code == 401
        assert answer.headers["x-request-id"] == "req-serve-1"
    finally:
        server.stop()
    text = server.log.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    access = [line for line in lines if line.get("request_id") == "req-serve-1"]
    assert [(a["logger"], a["path"], a["status"]) for a in access] == [
        (ACCESS_LOGGER, "/api/v1/me", 401)
    ]
    # uvicorn's own lines are JSON too, and its access log (with query strings) is off.
    assert any(line["logger"].startswith("uvicorn") for line in lines)
    assert not any(line["logger"] == "uvicorn.access" for line in lines)
    assert SECRET not in text
