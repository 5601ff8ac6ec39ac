"""HEAD answers wherever GET does (app/middleware.py ``HeadAsGet``): the same status and
headers, no body; a streamed answer stops after its start; a route without GET still says 405;
the OpenAPI document lists each GET once."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy.engine import Engine
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route as StarletteRoute
from starlette.types import Message

from app.main import STATIC_DIR
from app.middleware import HeadAsGet
from app.models import Role
from app.observability import ACCESS_LOGGER
from tests.support.live import LiveServer
from tests.support.routes import concrete, routes
from tests.support.service import Account, label_some
from tests.support.triage import make_triage

#: Headers that differ between any two answers.
VOLATILE = {"x-request-id", "date"}


def same_answer(get: Response, head: Response, where: str) -> None:
    assert head.status_code == get.status_code, where
    assert head.content == b"", where

    def kept(response: Response) -> dict[str, str]:
        return {k: v for k, v in response.headers.items() if k not in VOLATILE}

    assert kept(head) == kept(get), where


def test_head_answers_as_get_on_every_get_route(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    """Every GET route, as a stranger (401, or the login redirect) and as a lead (mostly 404
    for the made-up ids, 200 for the lists): HEAD gets GET's status and headers."""
    lead = accounts[Role.LEAD].headers
    checked = 0
    for route in routes(client):
        if "GET" not in route.methods:
            continue
        path = concrete(route.path)
        for headers in ({}, lead):
            get = client.get(path, headers=headers, follow_redirects=False)
            head = client.head(path, headers=headers, follow_redirects=False)
            same_answer(get, head, f"HEAD {route.path}")
            checked += 1
    assert checked > 40


def test_healthz_answers_head(client: TestClient) -> None:
    get, head = client.get("/healthz"), client.head("/healthz")
    assert head.status_code == 200
    same_answer(get, head, "/healthz")
    assert int(head.headers["content-length"]) == len(get.content) > 0


def test_head_of_a_page_and_a_static_file(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    lead = accounts[Role.LEAD].headers
    for path in ("/golden-sets", "/login", "/api/v1/me", "/api/v1/golden-sets"):
        get, head = client.get(path, headers=lead), client.head(path, headers=lead)
        assert head.status_code == 200, path
        same_answer(get, head, path)
    css = client.head("/static/app.css")
    assert css.status_code == 200
    assert int(css.headers["content-length"]) == (STATIC_DIR / "app.css").stat().st_size
    assert css.content == b""


def test_a_streamed_download_answers_head(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=3, per_query=2, corpus=True)
    label_some(client, accounts, triage.id)
    lead = accounts[Role.LEAD].headers
    for fmt in ("csv", "jsonl", "json"):
        url = f"/api/v1/triages/{triage.id}/backlog?format={fmt}"
        get, head = client.get(url, headers=lead), client.head(url, headers=lead)
        assert head.status_code == 200, fmt
        assert get.content, fmt
        same_answer(get, head, url)
    # the download's slot is given back after a HEAD too: more HEADs than slots all answer
    url = f"/api/v1/triages/{triage.id}/backlog?format=csv"
    assert [client.head(url, headers=lead).status_code for _ in range(8)] == [200] * 8


def test_head_without_get_is_still_405(client: TestClient, accounts: dict[Role, Account]) -> None:
    lead = accounts[Role.LEAD].headers
    post_only = [r for r in routes(client) if "GET" not in r.methods]
    assert post_only
    for route in post_only:
        path = concrete(route.path)
        head = client.head(path, headers=lead, follow_redirects=False)
        # a path that also has a GET route (a form's page) answers HEAD as that GET
        if client.get(path, headers=lead, follow_redirects=False).status_code == 405:
            assert head.status_code == 405, route.path
            assert "HEAD" not in head.headers["allow"], route.path
    # a method that a GET route refuses: its Allow names HEAD beside GET
    refused = client.delete("/healthz")
    assert refused.status_code == 405
    assert refused.headers["allow"] == "GET, HEAD"
    assert client.get("/runs/1/triages").headers["allow"] == "POST"


def test_the_openapi_document_lists_no_head(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    document = client.get("/openapi.json", headers=accounts[Role.REVIEWER].headers).json()
    methods = {method for item in document["paths"].values() for method in item}
    assert "get" in methods
    assert "head" not in methods


def test_the_access_log_says_head(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    client.head("/healthz", headers={"X-Request-ID": "head-1"})
    lines = [r for r in caplog.records if getattr(r, "request_id", None) == "head-1"]
    assert [(r.method, r.status) for r in lines if r.name == ACCESS_LOGGER] == [  # type: ignore[attr-defined]
        ("HEAD", 200)
    ]


# --- the middleware alone: the body never leaves it, and a stream stops ---


def endless_app(produced: list[int]) -> Starlette:
    async def chunks() -> Any:
        n = 0
        while True:
            n += 1
            produced.append(n)
            yield b"x" * 1024
            await asyncio.sleep(0)

    async def stream(request: Request) -> StreamingResponse:
        return StreamingResponse(chunks(), media_type="text/plain")

    return Starlette(routes=[StarletteRoute("/stream", stream)])


def run_asgi(app: Any, method: str, *, client_leaves_after: int = 10_000) -> list[Message]:
    """``app`` answering one request, the way uvicorn talks to it: the request's body, then
    ``http.disconnect`` once the response is complete (or the client has read
    ``client_leaves_after`` messages)."""
    sent: list[Message] = []

    async def main() -> None:
        gone = asyncio.Event()
        received = False

        async def receive() -> Message:
            nonlocal received
            if not received:
                received = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            sent.append(message)
            ended = message["type"] == "http.response.body" and not message.get("more_body")
            if ended or len(sent) >= client_leaves_after:
                gone.set()

        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": "/stream",
            "raw_path": b"/stream",
            "root_path": "",
            "query_string": b"",
            "headers": [(b"host", b"testserver")],
            "client": ("127.0.0.1", 1),
            "server": ("testserver", 80),
        }
        await asyncio.wait_for(app(scope, receive, send), 5)

    # in a thread of its own: a browser test before this one (sync Playwright) may have left
    # its event loop running in this thread
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, main()).result()
    return sent


def test_a_stream_answered_to_head_stops_after_its_start() -> None:
    produced: list[int] = []
    sent = run_asgi(HeadAsGet(endless_app(produced)), "HEAD")
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 200
    assert sent[1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert len(produced) <= 2  # the endless stream was stopped, not run for nothing


def test_a_get_streams_through_the_middleware_unchanged() -> None:
    produced: list[int] = []
    sent = run_asgi(HeadAsGet(endless_app(produced)), "GET", client_leaves_after=6)
    assert sent[0]["type"] == "http.response.start"
    bodies = sent[1:6]
    assert [m["type"] for m in bodies] == ["http.response.body"] * 5
    assert all(m["body"] == b"x" * 1024 and m["more_body"] for m in bodies)


# --- a real server: HEAD on the wire, then the connection goes on ---


def test_head_on_a_real_server(live_server: LiveServer) -> None:
    """``misstriage serve`` on both databases: HEAD /healthz has GET's headers and no body
    on the wire, and the kept-alive connection answers the next request right after it."""
    with socket.create_connection(("127.0.0.1", live_server.port), timeout=10) as sock:
        sock.sendall(
            b"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        answer = b""
        while True:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    head, _, rest = answer.partition(b"\r\n\r\n")
    get, _, body = rest.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK"), answer[:300]
    assert get.startswith(b"HTTP/1.1 200 OK"), answer[:600]  # nothing between the two

    def fields(block: bytes) -> dict[bytes, bytes]:
        pairs = [line.split(b": ", 1) for line in block.split(b"\r\n")[1:]]
        return {name: value for name, value in pairs if name not in (b"date", b"x-request-id")}

    head_fields, get_fields = fields(head), fields(get)
    assert get_fields.pop(b"connection") == b"close"
    assert head_fields == get_fields
    assert int(head_fields[b"content-length"]) == len(body)
