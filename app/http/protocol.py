"""The HTTP/1.1 protocol ``misstriage serve`` runs: uvicorn's httptools protocol (uvicorn's
choice wherever httptools is installed, which ``uvicorn[standard]`` always installs) with
bounds on a request's head, checked as its bytes arrive, before the app (and so before
authentication) sees the request.

uvicorn alone keeps a header that never ends in memory (four connections each sending a 64 MiB
header grew a server by 255 MiB, and httptools joins a header's pieces by copying) and waits
for a head forever. Here, from the settings (``MISSTRIAGE_*``, README "Operations"):

- a request target over ``request_line_max_bytes`` (8 KiB) answers 414;
- the request line and headers over ``header_max_bytes`` (64 KiB) answer 431, counted as the
  bytes arrive while the head is incomplete (the parser is fed in pieces that stop at the
  limit), so a head costs at most that much memory (plus one socket read, 256 KiB, where a
  pipelining client starts a head in the read that ends the request before it); so do more
  than ``header_max_count`` (100) headers;
- a head not complete ``header_timeout_seconds`` (15 s) after the connection opened, or after
  the first byte of a later request on a kept-alive connection, answers 408 (a slowloris);
  a connection that sent nothing by then is closed without an answer.

Body bytes are not counted: a body's size is BodySizeLimit's, its stalls BodyTimeout's
(app/middleware.py). Each refusal is a small complete response with ``Connection: close``
(the JSON error body for ``/api/`` paths and clients that prefer JSON, else a tiny page;
after the answers to a pipelining client's earlier requests), then the connection closes, and
one log line names the limit and the client address, never a header's value or the target.
Owns nothing of the app: it reads the settings once a process.
"""

from __future__ import annotations

import asyncio
import functools
import html
import json
import logging
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from app.http import negotiation
from app.settings import Settings, get_settings

#: What ``misstriage serve`` passes as uvicorn's ``http`` option (a string, so the worker
#: processes of ``--workers`` import it themselves).
PROTOCOL = "app.http.protocol:LimitedHttpToolsProtocol"

#: After a refusal the connection stays open this long, or until this many more bytes came,
#: reading and dropping what the client still sends, its answer already sent and the sending
#: side shut: closing with bytes unread makes the kernel reset the connection, and a reset can
#: lose the answer before the client reads it (nginx's "lingering close").
LINGER_SECONDS = 2.0
LINGER_BYTES = 1024 * 1024

log = logging.getLogger("misstriage.http")


@dataclass(frozen=True)
class HeadLimits:
    """The bounds on one request's head (request line and headers)."""

    request_line_bytes: int
    header_bytes: int
    header_count: int
    timeout_seconds: float

    @classmethod
    def of(cls, settings: Settings) -> HeadLimits:
        return cls(
            request_line_bytes=settings.request_line_max_bytes,
            header_bytes=settings.header_max_bytes,
            header_count=settings.header_max_count,
            timeout_seconds=settings.header_timeout_seconds,
        )


@functools.cache
def process_limits() -> HeadLimits:
    """This process's limits, from its settings (read at the first connection)."""
    return HeadLimits.of(get_settings())


@dataclass(frozen=True)
class Refusal:
    """A request refused before the app: its status, error code, message and the limit."""

    status: int
    code: str
    message: str
    details: dict[str, Any]

    def answer(self, *, as_json: bool, default_headers: list[tuple[bytes, bytes]]) -> bytes:
        """The whole HTTP/1.1 response, ``Connection: close`` included."""
        phrase = HTTPStatus(self.status).phrase
        if as_json:
            error = {"code": self.code, "message": self.message, "details": self.details}
            body = json.dumps({"error": error}).encode()
            content_type = b"application/json"
        else:
            title = f"{self.status} {phrase}"
            body = (
                '<!doctype html><html lang="en"><head><meta charset="utf-8">'
                f"<title>{title}</title></head><body><h1>{title}</h1>"
                f"<p>{html.escape(self.message)}</p></body></html>"
            ).encode()
            content_type = b"text/html; charset=utf-8"
        headers = [
            *default_headers,
            (b"content-type", content_type),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
            (b"x-content-type-options", b"nosniff"),
            (b"content-security-policy", b"default-src 'none'"),
            (b"x-error-code", self.code.encode()),
            (b"connection", b"close"),
        ]
        lines = [f"HTTP/1.1 {self.status} {phrase}".encode()]
        lines += [name + b": " + value for name, value in headers]
        return b"\r\n".join(lines) + b"\r\n\r\n" + body


def _target_too_long(limits: HeadLimits) -> Refusal:
    limit = limits.request_line_bytes
    message = f"the request target is longer than {limit} bytes"
    return Refusal(414, "uri_too_long", message, {"max_bytes": limit})


def _head_too_large(limits: HeadLimits) -> Refusal:
    limit = limits.header_bytes
    message = f"the request line and headers are larger than {limit} bytes"
    return Refusal(431, "header_fields_too_large", message, {"max_bytes": limit})


def _too_many_headers(limits: HeadLimits) -> Refusal:
    limit = limits.header_count
    message = f"the request has more than {limit} headers"
    return Refusal(431, "header_fields_too_large", message, {"max_headers": limit})


def _head_timed_out(limits: HeadLimits) -> Refusal:
    seconds = limits.timeout_seconds
    message = f"the request line and headers did not arrive within {seconds:g} seconds"
    return Refusal(408, "request_timeout", message, {"timeout_seconds": seconds})


def path_of(target: bytes) -> str:
    """The path of a request target, as far as it arrived (origin or absolute form)."""
    text = target.decode("latin-1")
    if not text.startswith("/"):
        _, scheme_sep, rest = text.partition("://")
        text = "/" + rest.partition("/")[2] if scheme_sep else ""
    return unquote(text.partition("?")[0])


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the head's limits (the module's docstring)."""

    #: Set by a subclass (or a test) to use other limits than the process's settings.
    limits: HeadLimits | None = None

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.head_limits = self.limits or process_limits()
        #: Reading a head (or waiting for one): its bytes count, its clock runs.
        self._head_open = True
        self._head_bytes = 0
        self._target_bytes = 0
        self._header_count = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._refusal: Refusal | None = None
        self._upgraded = False
        self._linger_timer: asyncio.TimerHandle | None = None
        self._dropped = 0
        #: A refusal waiting for the answers to a pipelining client's earlier requests.
        self._deferred: bytes | None = None

    # The connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()  # a connection that never sends a byte is closed too

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Feed the parser; while a head is incomplete, in pieces that keep its bytes
        within ``header_bytes`` (so a piece that ends a head and starts a body is not
        counted whole against the head)."""
        if self._refusal is not None:
            self._drop(data)
            return
        if self.transport.is_closing():
            return
        while data and self._refusal is None and not self._upgraded:
            if not self._head_open:
                super().data_received(data)
                break
            if self._head_timer is None:
                self._arm_head_timer()  # the first byte of a request on a kept-alive connection
            room = self.head_limits.header_bytes - self._head_bytes
            if room <= 0:
                self._refusal = _head_too_large(self.head_limits)
                break
            piece, data = (data, b"") if len(data) <= room else (data[:room], data[room:])
            self._head_bytes += len(piece)
            super().data_received(piece)
            if self.transport.is_closing():
                return  # uvicorn answered 400 to a malformed request
        if self._refusal is not None:
            self._answer(self._refusal)

    def handle_websocket_upgrade(self) -> None:
        self._upgraded = True
        self._disarm_head_timer()
        super().handle_websocket_upgrade()

    # The parser's callbacks: once a request is refused, the rest of what arrived is ignored.

    def on_message_begin(self) -> None:
        if self._refusal is not None:
            return
        super().on_message_begin()
        self._target_bytes = self._header_count = 0
        if self._head_timer is None:
            self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        if self._refusal is not None:
            return
        room = self.head_limits.request_line_bytes - self._target_bytes
        self._target_bytes += len(url)
        if len(url) > room:
            super().on_url(url[: max(room, 0)])  # the start, for the refusal's path
            self._refusal = _target_too_long(self.head_limits)
            return
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._refusal is not None:
            return
        self._header_count += 1
        if self._header_count > self.head_limits.header_count:
            self._refusal = _too_many_headers(self.head_limits)
            return
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._refusal is not None:
            return
        self._head_open = False
        self._head_bytes = 0
        self._disarm_head_timer()
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self._refusal is None:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._refusal is not None:
            return
        self._head_open = True
        self._head_bytes = 0
        super().on_message_complete()

    # The head's clock and the refusals

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._head_timer = self.loop.call_later(
            self.head_limits.timeout_seconds, self._head_timeout
        )

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or not self._head_open or self._refusal is not None:
            return
        if self._head_bytes == 0 and getattr(self, "url", None) is None:
            # connected and never sent a byte: nothing to answer (as uvicorn's keep-alive
            # timeout closes an idle connection)
            log.debug("closed a connection that sent nothing", extra=self._where())
            self.transport.close()
            return
        self._refusal = _head_timed_out(self.head_limits)
        self._answer(self._refusal)

    def _answer(self, refusal: Refusal) -> None:
        """Write ``refusal`` and close; after the answers to the earlier requests of a
        pipelining client, when they are still going out."""
        self._disarm_head_timer()
        log.warning(
            "refused a request before the app: %d %s",
            refusal.status,
            refusal.code,
            extra={
                **self._where(),
                "status": refusal.status,
                "code": refusal.code,
                **refusal.details,
            },
        )
        target: bytes = getattr(self, "url", None) or b""
        accept = b", ".join(v for n, v in (self.headers or []) if n == b"accept")
        as_json = negotiation.wants_json(path_of(target), accept.decode("latin-1"))
        answer = refusal.answer(as_json=as_json, default_headers=self.server_state.default_headers)
        if self.cycle is not None and not self.cycle.response_complete:
            self._deferred = answer  # written by on_response_complete
            self.flow.pause_reading()
            return
        self._write_and_close(answer)

    def on_response_complete(self) -> None:
        if self._deferred is None or self.pipeline:
            super().on_response_complete()  # the next pipelined request, if any, starts
            return
        self.server_state.total_requests += 1
        if not self.transport.is_closing():
            self._write_and_close(self._deferred)

    def _write_and_close(self, answer: bytes) -> None:
        self.transport.write(answer)
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()  # the answer, then FIN; what still comes is dropped
        self.flow.resume_reading()
        self._linger_timer = self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def _drop(self, data: bytes) -> None:
        """Bytes after a refusal: read and forgotten, a bounded number of them."""
        self._dropped += len(data)
        if self._dropped > LINGER_BYTES and not self.transport.is_closing():
            self.transport.close()

    def _where(self) -> dict[str, Any]:
        return {"client": self.client[0] if self.client else None, "head_bytes": self._head_bytes}
