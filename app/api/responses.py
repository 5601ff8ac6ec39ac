"""The error body of every JSON answer that is not a success, as documented in /openapi.json
(API.md: ``{"error": {"code", "message", "details"}}``), so clients and schema-driven tests
know every status an operation may answer."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import Response
from pydantic import BaseModel, Field


class ErrorDetail(BaseModel):
    code: str = Field(description="stable, snake_case: what went wrong, for programs")
    message: str = Field(description="one sentence for people")
    details: Any = Field(default=None, description="facts about the error (file, line, ...)")


class ErrorBody(BaseModel):
    error: ErrorDetail


_MEANINGS = {
    400: "bad input (a file that cannot be read names its line)",
    401: "no or invalid credentials",
    403: "the caller's role or lease does not allow this (or a cross-site request)",
    404: "no such resource",
    409: "conflict: a name taken, a stale version, labelling already started",
    413: "the request body is larger than the upload limit",
    422: "the request is not valid",
}

#: ``responses=`` for every JSON API route.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": meaning} for status, meaning in _MEANINGS.items()
}


def attachment(filename: str) -> str:
    """A Content-Disposition header value for a download named ``filename`` (any Unicode):
    an ASCII fallback, and the exact name in RFC 5987 ``filename*`` (RFC 6266)."""
    fallback = "".join(c if 0x20 <= ord(c) < 0x7F and c not in '"\\;%/' else "_" for c in filename)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


def answer(model: BaseModel) -> Response:
    """A read model as a 200 JSON answer, serialised once by its own pydantic serializer:
    the body ``response_model`` would write, without validating the model again (the queue's
    hot path builds its models from database rows it trusts)."""
    body = model.__pydantic_serializer__.to_json(model)
    return Response(content=body, media_type="application/json")
