"""The app's exception handlers: one error body for programs (``{"error": {"code",
"message", "details"}}``, API.md), a page of the product for people."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from sqlalchemy import exc as sa_exc
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from app.db import refused_value
from app.http import negotiation
from app.http.deps import SESSION_COOKIE, NotAuthenticated, Principal, session_id_from_cookie
from app.observability import current_request_id
from app.services.accounts.users import PasswordChangeRequired, session_user
from app.services.errors import ServiceError
from app.web import invalid_words
from app.web.render import error_page

log = logging.getLogger(__name__)

#: Errors that mean "the database cannot be reached or dropped the connection" (PostgreSQL
#: restarting, a network cut, SQLite busy past its timeout, a pool with no free connection):
#: the request may succeed if repeated, so they answer 503, never a 500 with a traceback.
#: What a 500 says (the server log has the traceback, with the request id).
UNEXPECTED = "an unexpected error; the server log has the details"
DATABASE_UNAVAILABLE = (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError)
#: Seconds a client should wait before repeating a request that met an unavailable database.
RETRY_AFTER_SECONDS = 2

_HTTP_CODES = {
    400: "bad_request",
    401: "not_authenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "validation_error",
}


def _people_message(request: Request, status: int, message: str) -> str:
    """Starlette's stock phrase of a status ("Not Found", the page's title again) as a
    sentence for people; any other message as it is."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        return message
    if message != phrase:
        return message
    if status == 404:
        return "There is no page at this address: the link may be old, or mistyped."
    if status == 405:
        return f"This address does not answer a {request.method} request."
    return message


async def remember_principal(request: Request) -> None:
    """Put the session cookie's user on ``request.state.principal`` for the error page's
    header, when no dependency did (a 404 of the routing, a refused parameter): looked up in
    a worker thread, never raising (anything wrong means no user), never for a bearer token
    (the API has no pages)."""
    if getattr(request.state, "principal", None) is not None:
        return
    if not request.cookies.get(SESSION_COOKIE) or request.headers.get("authorization"):
        return
    request.state.principal = await run_in_threadpool(_cookie_principal, request)


def _cookie_principal(request: Request) -> Principal | None:
    try:
        session_id = session_id_from_cookie(request)
        if session_id is None:
            return None
        with Session(request.app.state.engine, expire_on_commit=False) as session:
            user = session_user(session=session, session_id=session_id)
            if user is None or user.must_change_password:  # the pages would not admit them
                return None
            return Principal(user=user, via="cookie")
    except Exception as exc:  # the error page must not fail in turn: no user, then
        # one line, as the other handlers log the database's trouble (never a traceback)
        orig = getattr(exc, "orig", None) or exc
        first_line = (str(orig).strip().splitlines() or [""])[0]
        log.warning(
            "the error page could not look up the session: %s: %s",
            type(orig).__name__,
            first_line[:300],
        )
        return None


def error_response(
    status: int,
    code: str,
    message: str,
    details: Any = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": jsonable_encoder(details)}}
    headers = dict(headers or {})
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(body, status_code=status, headers=headers or None)


def _server_side(
    request: Request, status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> Response:
    """A 5xx answer: the error body (JSON) or the error page, carrying the request id, which
    finds the server's log lines of this request (every response also has it in the
    X-Request-ID header, except a 500, which is answered outside that middleware)."""
    request_id = current_request_id()
    if wants_html(request):
        return error_page(request, status, code, message, headers=headers, request_id=request_id)
    return error_response(status, code, message, {"request_id": request_id}, headers)


def _to_page(request: Request, route: str, htmx_status: int) -> Response:
    """A redirect to the page ``route`` that comes back to this request's page afterwards
    (``next``, encoded: a path of this site with its query); HTMX gets ``HX-Redirect``."""
    page = request.url_for(route).path
    if request.headers.get("hx-request"):
        return Response(status_code=htmx_status, headers={"HX-Redirect": page})
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if request.method not in ("GET", "HEAD"):
        here = "/"  # a form's answer cannot be fetched again: start from the home page
    return RedirectResponse(
        page if here == "/" else f"{page}?{urlencode({'next': here}, safe='/', quote_via=quote)}",
        status_code=303,
    )


def wants_json(request: Request) -> bool:
    """The JSON error body for the API, and for a client whose Accept header prefers JSON
    to HTML (q-values honoured: app.http.negotiation); a page for everything else (browsers,
    HTMX, a client that says nothing)."""
    accept = ", ".join(request.headers.getlist("accept"))
    return negotiation.wants_json(request.url.path, accept)


def wants_html(request: Request) -> bool:
    return not wants_json(request)


def error_answer(
    request: Request,
    status: int,
    code: str,
    message: str,
    details: Any = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """The one place that chooses between the JSON error body and the error page (by the
    Accept header outside /api/, which the answer says in Vary, for caches)."""
    if wants_html(request):
        response = error_page(request, status, code, message, details=details, headers=headers)
    else:
        response = error_response(status, code, message, details, headers)
    if not request.url.path.startswith("/api/"):
        response.headers.add_vary_header("Accept")
    return response


def too_large(scope: Scope, max_bytes: int) -> Response:
    """The 413 of app.middleware.BodySizeLimit: a page for a browser's form upload."""
    return error_answer(
        Request(scope),
        413,
        "too_large",
        f"the upload is larger than {max_bytes} bytes",
        {"max_bytes": max_bytes},
        {"Connection": "close"},
    )


def install(app: FastAPI) -> None:
    @app.exception_handler(NotAuthenticated)
    async def _unauthenticated(request: Request, exc: NotAuthenticated) -> Response:
        if wants_html(request):
            return _to_page(request, "login_page", 401)
        return error_response(exc.status, exc.code, exc.message, exc.details)

    @app.exception_handler(PasswordChangeRequired)
    async def _password_change_required(request: Request, exc: PasswordChangeRequired) -> Response:
        # a person whose password an admin reset is taken to the form that sets a new one
        # (then back where they were going); a program gets the 403 and its code
        if wants_html(request):
            return _to_page(request, "set_password_page", 403)
        return error_response(exc.status, exc.code, exc.message, exc.details)

    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError) -> Response:
        headers = getattr(exc, "headers", None)  # TooMany: Retry-After
        if wants_html(request):
            await remember_principal(request)  # refused before the route's dependencies ran
        return error_answer(request, exc.status, exc.code, exc.message, exc.details, headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        if wants_html(request):
            # People read sentences built from the field and the kind of error; programs keep
            # pydantic's details (below).
            await remember_principal(request)
            sentences = [invalid_words.sentence(e) for e in errors]
            if len(sentences) == 1:
                return error_answer(request, 422, "validation_error", sentences[0])
            message = f"{len(sentences)} things in this request need fixing:"
            return error_answer(request, 422, "validation_error", message, errors)
        details = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")}
            for e in errors
        ]
        return error_answer(request, 422, "validation_error", "the request is not valid", details)

    def _database_said(exc: Exception, what: str) -> str:
        """The database's (or its driver's) own words, their first line, logged under
        ``what`` as a warning."""
        orig = getattr(exc, "orig", None) or exc
        first_line = (str(orig).strip().splitlines() or [""])[0]
        log.warning("%s: %s: %s", what, type(orig).__name__, first_line[:300])
        return first_line

    async def _database_unavailable(request: Request, exc: Exception) -> Response:
        _database_said(exc, "database unavailable")
        return _server_side(
            request,
            503,
            "database_unavailable",
            "the database is unavailable right now; try again in a moment",
            {"Retry-After": str(RETRY_AFTER_SECONDS)},
        )

    for error_class in DATABASE_UNAVAILABLE:
        app.add_exception_handler(error_class, _database_unavailable)

    @app.exception_handler(sa_exc.IntegrityError)
    async def _concurrent_write(request: Request, exc: sa_exc.IntegrityError) -> Response:
        # A constraint the services check before writing (a name taken, a row deleted) was
        # broken by a request that committed in between: a conflict to retry, never a 500.
        # The unit of work rolled back, so nothing of this request was written.
        _database_said(exc, "concurrent write refused")
        return error_answer(
            request,
            409,
            "conflict",
            "another request changed the same data first; nothing was saved: reload and try again",
        )

    @app.exception_handler(sa_exc.DataError)
    async def _refused_value(request: Request, exc: sa_exc.DataError) -> Response:
        # A value of the request the database cannot store (a NUL byte in PostgreSQL's text,
        # a number out of its column's range) that no check before it caught: bad input,
        # said so. Any other DataError is a bug: logged with its traceback, a 500.
        if not refused_value(exc):
            log.error("unexpected database error", exc_info=exc)
            return _server_side(request, 500, "internal_error", UNEXPECTED)
        first_line = _database_said(exc, "value refused by the database")
        return error_answer(
            request,
            400,
            "bad_input",
            f"the database refused a value of this request ({first_line[:120]})",
        )

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:
        # Runs in Starlette's outermost middleware, which then re-raises: the server logs
        # the traceback (with the request id) and closes the connection, which the answer
        # says (a client keeping it alive would otherwise send its next request into it);
        # the client gets the error body, no traceback.
        return _server_side(
            request, 500, "internal_error", UNEXPECTED, headers={"Connection": "close"}
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        code = _HTTP_CODES.get(exc.status_code, "error")
        headers = dict(exc.headers or {})
        message = str(exc.detail)
        if wants_html(request):
            # Starlette's routing answers before any dependency ran: find the session's user
            # for the page's header, and say the stock phrase ("Not Found") in words.
            await remember_principal(request)
            message = _people_message(request, exc.status_code, message)
        return error_answer(request, exc.status_code, code, message, headers=headers)
