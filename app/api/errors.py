"""One error body everywhere: {"error": {"code", "message", "details"}} (API.md)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.api.deps import NotAuthenticated
from app.services.errors import ServiceError

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


def error_response(status: int, code: str, message: str, details: Any = None) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": jsonable_encoder(details)}}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)


def wants_html(request: Request) -> bool:
    return not request.url.path.startswith("/api/") and request.url.path != "/openapi.json"


def install(app: FastAPI) -> None:
    @app.exception_handler(NotAuthenticated)
    async def _unauthenticated(request: Request, exc: NotAuthenticated) -> Response:
        if wants_html(request):
            login = str(request.url_for("login_page"))
            if request.headers.get("hx-request"):
                return Response(status_code=401, headers={"HX-Redirect": login})
            return RedirectResponse(f"{login}?next={request.url.path}", status_code=303)
        return error_response(exc.status, exc.code, exc.message, exc.details)

    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError) -> Response:
        return error_response(exc.status, exc.code, exc.message, exc.details)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        details = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")}
            for e in exc.errors()
        ]
        return error_response(422, "validation_error", "the request is not valid", details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        code = _HTTP_CODES.get(exc.status_code, "error")
        return error_response(exc.status_code, code, str(exc.detail))
