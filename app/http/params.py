"""Typed request parameters shared by the JSON API and the pages."""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

from fastapi import Form, Path, Query, Request

from app.eval.conventions import MAX_CUTOFF
from app.eval.jsonl import MAX_JSON_DEPTH, nesting_depth
from app.eval.values import INT32_MAX
from app.services.errors import BadInput, Invalid
from app.services.paging import MAX_PER_PAGE

#: A row id in a URL: within the database's integer range, so a larger number answers 422
#: (documented in /openapi.json) instead of failing in the database driver.
Id = Annotated[int, Path(ge=1, le=INT32_MAX)]
#: A row id in a query string, likewise.
QueryId = Annotated[int, Query(ge=1, le=INT32_MAX)]
#: A row id in a form field (the review page's hidden miss_id), likewise.
FormId = Annotated[int, Form(ge=1, le=INT32_MAX)]
#: A page number: its offset (page x per_page) stays a database integer.
Page = Annotated[int, Query(ge=1, le=INT32_MAX)]
#: Rows per page of every list (API lists and paged pages).
PerPage = Annotated[int, Query(ge=1, le=MAX_PER_PAGE)]
#: A cutoff (k, depth) of a measure.
Cutoff = Annotated[int, Query(ge=1, le=MAX_CUTOFF)]


def _has_nul(value: Any) -> bool:
    """A NUL in any string of a parsed JSON value, walked without recursion (a value nested
    a thousand deep must not exhaust the stack)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
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
        # stdlib json recurses once a level: bound the depth before parsing, as uploads do.
        depth = nesting_depth(await request.body())
        if depth > MAX_JSON_DEPTH:
            raise BadInput(
                f"the JSON body is nested deeper than {MAX_JSON_DEPTH} levels (at least {depth})",
                code="json_too_deep",
            )
        # not JSON: the route's own validation answers
        with contextlib.suppress(ValueError, RecursionError):
            texts.append(await request.json())  # read already for the route: Starlette keeps it
    if any(_has_nul(t) for t in texts):
        raise Invalid("the request contains a NUL character", code="nul_character")
