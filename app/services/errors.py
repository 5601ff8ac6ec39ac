"""Errors of the use cases, each with a stable machine-readable code (API.md)."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """Base: ``status`` is the HTTP status the API answers with, ``code`` is stable."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details


class NotFound(ServiceError):
    status = 404
    code = "not_found"


class Conflict(ServiceError):
    status = 409
    code = "conflict"


class Forbidden(ServiceError):
    status = 403
    code = "forbidden"


class BadInput(ServiceError):
    """An input file or value that cannot be used; ``details`` names the file and line."""

    status = 400
    code = "bad_input"


class Invalid(ServiceError):
    status = 422
    code = "validation_error"


class TooMany(ServiceError):
    """429: the caller has too many of something at once; ``headers`` carry Retry-After."""

    status = 429
    code = "too_many_requests"

    def __init__(self, message: str, *, code: str | None = None, retry_after: int) -> None:
        super().__init__(message, code=code, details={"retry_after": retry_after})
        self.headers = {"Retry-After": str(retry_after)}
