"""Structured logs: a request id per request, one JSON line per request, a JSON formatter.

``RequestLog`` (ASGI middleware) accepts a sane incoming ``X-Request-ID`` or makes one, echoes
it in the response header, keeps it in a context variable that every log record of the request
carries (``RequestIdFilter``), and writes one line per request to the ``misstriage.access``
logger: method, path (never the query string, which may carry secrets), status, duration and
the user id once authentication has found one. Headers, cookies and bodies are never logged.
``logging_config`` is the ``dictConfig`` that ``misstriage serve`` gives uvicorn, so every
worker process logs the same way.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: An incoming request id is kept when it is short and plain (it lands in logs and headers:
#: no spaces, quotes or control characters that could forge a log line).
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/+=-]{0,127}")
ACCESS_LOGGER = "misstriage.access"

LogFormat = Literal["json", "text"]

#: LogRecord attributes that are not extra fields (what ``logging`` puts on every record).
_STANDARD_ATTRIBUTES = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys() | {"message", "asctime"}
)


@dataclass
class RequestContext:
    """What the logs know about the request being served. Mutable on purpose: sync routes
    and dependencies run in a worker thread with a *copy* of the context, so they can fill
    in the user id of this shared object but could not rebind the variable."""

    request_id: str
    user_id: int | None = None


_current: ContextVar[RequestContext | None] = ContextVar("misstriage_request", default=None)


def current_request_id() -> str | None:
    """The id of the request being served, or None outside a request."""
    context = _current.get()
    return None if context is None else context.request_id


def note_user(user_id: int | None) -> None:
    """Record the authenticated user of the current request (for its access log line)."""
    context = _current.get()
    if context is not None:
        context.user_id = user_id


def request_id_from(headers: list[tuple[bytes, bytes]]) -> str:
    """The caller's X-Request-ID when it is sane, else a new random one."""
    for name, value in headers:
        if name.lower() == b"x-request-id":
            candidate = value.decode("latin-1").strip()
            if SANE_REQUEST_ID.fullmatch(candidate):
                return candidate
            break
    return uuid.uuid4().hex


class RequestLog:
    """ASGI middleware: request id in, request id out, one access log line per request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.log = logging.getLogger(ACCESS_LOGGER)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        context = RequestContext(request_id=request_id_from(scope.get("headers", [])))
        # Not reset afterwards: the server runs each request in its own task, and its own
        # "Exception in ASGI application" line, logged after we return, should carry the id.
        _current.set(context)
        started = time.perf_counter()
        status = 500  # what the client gets if the app fails before answering

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [
                    (name, value)
                    for name, value in message.get("headers", [])
                    if name.lower() != b"x-request-id"
                ]
                headers.append((b"x-request-id", context.request_id.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            duration_ms = round((time.perf_counter() - started) * 1000, 1)
            method, path = scope.get("method", ""), scope.get("path", "")
            self.log.info(
                "%s %s %d %.1fms",
                method,
                path,
                status,
                duration_ms,
                extra={
                    "request_id": context.request_id,
                    "method": method,
                    "path": path,
                    "status": status,
                    "duration_ms": duration_ms,
                    "user_id": context.user_id,
                },
            )


class RequestIdFilter(logging.Filter):
    """Put the current request id on every record (None outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, pid, message, request_id,
    the record's extra fields, and the exception's traceback as text when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or current_request_id(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRIBUTES and key not in line and not key.startswith("_"):
                line[key] = value
        line.pop("color_message", None)  # uvicorn's ANSI-coloured copy of the message
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


def logging_config(log_format: LogFormat, level: str = "INFO") -> dict[str, Any]:
    """The ``logging.config.dictConfig`` of a server process: everything (the app, uvicorn,
    SQLAlchemy warnings) to stderr in ``log_format``; uvicorn's access log off, because
    ``RequestLog`` writes a better one (with the request id, without the query string)."""
    formatter: dict[str, Any] = (
        {"()": "app.observability.JsonFormatter"}
        if log_format == "json"
        else {"format": TEXT_FORMAT}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "app.observability.RequestIdFilter"}},
        "formatters": {"main": formatter},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "main",
                "filters": ["request_id"],
            }
        },
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {
            "uvicorn": {"level": level, "handlers": [], "propagate": True},
            "uvicorn.error": {"level": level, "handlers": [], "propagate": True},
            "uvicorn.access": {"level": "WARNING", "handlers": [], "propagate": False},
        },
    }
