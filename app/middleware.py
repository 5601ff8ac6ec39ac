"""ASGI middleware: upload size limit, stalled bodies, security headers and HEAD requests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]


class BodyTooLarge(Exception):
    pass


class BodySizeLimit:
    """Refuse request bodies over ``max_bytes`` with 413, before or while they stream in."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        refusal: Callable[[Scope, int], Response] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        #: Builds the 413 answer (the error page for a browser); the JSON body without it.
        self.refusal = refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.refusal is not None:
            await self.refusal(scope, self.max_bytes)(scope, receive, send)
            return
        body = json.dumps(
            {
                "error": {
                    "code": "too_large",
                    "message": f"the upload is larger than {self.max_bytes} bytes",
                    "details": {"max_bytes": self.max_bytes},
                }
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _json_error(status: int, code: str, message: str, details: dict[str, Any]) -> list[Message]:
    body = json.dumps({"error": {"code": code, "message": message, "details": details}}).encode()
    return [
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        },
        {"type": "http.response.body", "body": body},
    ]


class BodyTimeout:
    """Answer 408 and close when a request body stalls: no bytes for ``seconds`` while the
    body is still coming (a slow client holding a worker and a connection open forever).
    The app then sees the client as gone, and whatever it answers is dropped."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body_done = False
        started = False
        timed_out = False

        async def timed_receive() -> Message:
            nonlocal body_done, timed_out
            if body_done or timed_out:
                return await receive() if not timed_out else {"type": "http.disconnect"}
            try:
                message = await asyncio.wait_for(receive(), self.seconds)
            except TimeoutError:
                timed_out = True
                if not started:
                    for reply in _json_error(
                        408,
                        "request_timeout",
                        f"the request body stalled for {self.seconds:g} seconds",
                        {"timeout_seconds": self.seconds},
                    ):
                        await send(reply)
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if timed_out:
                return  # the 408 went out already
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, timed_receive, guarded_send)


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers: list[Any] = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(n, v) for n, v in SECURITY_HEADERS if n not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


class HeadAsGet:
    """Answer HEAD wherever GET answers (RFC 9110 section 9.3.2): the app sees a GET, the
    client gets its status and headers (Content-Length included) and no body. FastAPI's
    routes take only the methods they declare, so without this every page, the API and
    ``/healthz`` answered HEAD with 405; the OpenAPI document still lists each GET once.

    The body ends right after the response start: the server then tells the app the client
    is done (``http.disconnect``), which stops a streamed response (Starlette listens for
    it) instead of running its whole stream for nothing; whatever the app sends after that
    is dropped. A route without GET still answers 405, now with ``Allow`` naming HEAD
    wherever it names GET."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] != "HEAD":
            await self.app(scope, receive, _allowing_head(send))
            return
        finished = False

        async def headers_only(message: Message) -> None:
            nonlocal finished
            if finished:
                return
            if message["type"] != "http.response.start":
                if message["type"] != "http.response.body":
                    await send(message)  # e.g. the test client's http.response.debug
                return
            await send(message)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            finished = True

        await self.app({**scope, "method": "GET"}, receive, _allowing_head(headers_only))


def _allowing_head(send: Send) -> Send:
    """``send`` with HEAD added to a 405's ``Allow`` header wherever it names GET."""

    async def allowing(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] == 405:
            headers = [
                (name, _with_head(value) if name.lower() == b"allow" else value)
                for name, value in message.get("headers", [])
            ]
            message = {**message, "headers": headers}
        await send(message)

    return allowing


def _with_head(allow: bytes) -> bytes:
    methods = [m.strip() for m in allow.split(b",") if m.strip()]
    if b"GET" in methods and b"HEAD" not in methods:
        methods.insert(methods.index(b"GET") + 1, b"HEAD")
    return b", ".join(methods)
