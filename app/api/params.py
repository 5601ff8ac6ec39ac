"""Typed request parameters shared by the JSON API and the pages."""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

from fastapi import Path, Query, Request

from app.services.errors import Invalid

#: A row id in a URL: within the database's integer range, so a larger number answers 422
#: (documented in /openapi.json) instead of failing in the database driver.
Id = Annotated[int, Path(ge=1, le=2**31 - 1)]
#: A row id in a query string, likewise.
QueryId = Annotated[int, Query(ge=1, le=2**31 - 1)]
#: A page number: its offset (page x per_page) stays a database integer.
Page = Annotated[int, Query(ge=1, le=2**31 - 1)]
#: Rows per page of every list (API lists and paged pages).
PerPage = Annotated[int, Query(ge=1, le=1000)]


def paged(items: list[Any], page: int, per_page: int) -> dict[str, Any]:
    """One page of an in-memory list, in the API's list shape."""
    start = (page - 1) * per_page
    return {"items": items[start : start + per_page], "total": len(items)}


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


async def refuse_nul(request: Request) -> None:
    """Refuse a NUL character anywhere in a request's text: path, query, form fields, JSON.

    It is never text a person typed, and PostgreSQL cannot store or even compare it (the
    driver fails before the query). Uploaded files are not text fields: their readers say
    which line holds a NUL byte.
    """
    texts: list[Any] = [request.url.path, *request.query_params.values()]
    content_type = request.headers.get("content-type", "")
    if content_type.startswith(("multipart/form-data", "application/x-www-form-urlencoded")):
        form = await request.form()  # parsed already for the route: Starlette keeps it
        texts += [v for v in form.values() if isinstance(v, str)]
    elif content_type.startswith("application/json"):
        with contextlib.suppress(ValueError):  # not JSON: the route's own validation answers
            texts.append(await request.json())  # read already for the route: Starlette keeps it
    if any(_has_nul(t) for t in texts):
        raise Invalid("the request contains a NUL character", code="nul_character")
