"""One template serves the full page and its HTMX fragment (the ``content`` block)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import StrictUndefined, pass_context
from jinja2_fragments.fastapi import Jinja2Blocks

from app.migrate import resource_dir

templates = Jinja2Blocks(directory=str(resource_dir("templates")))
templates.env.autoescape = True
templates.env.undefined = StrictUndefined


def _format_measure(value: float | None) -> str:
    return "\N{EN DASH}" if value is None else f"{value:.4f}"


templates.env.filters["measure"] = _format_measure


@pass_context
def _path_for(context: dict[str, Any], name: str, /, **path_params: Any) -> str:
    """Links within the product are paths: never built from the request's Host header
    (absolute URLs that leave the product come from MISSTRIAGE_PUBLIC_URL)."""
    return context["request"].url_for(name, **path_params).path  # type: ignore[no-any-return]


templates.env.globals["url_for"] = _path_for


def is_fragment_request(request: Request) -> bool:
    """An HTMX request wants the fragment, except a history restore, which wants the page."""
    return bool(request.headers.get("hx-request")) and not request.headers.get(
        "hx-history-restore-request"
    )


def render(
    request: Request,
    template: str,
    context: dict[str, Any],
    *,
    principal: Any = None,
    status: int = 200,
    error_code: str | None = None,
    block: str | None = None,
) -> HTMLResponse:
    """Render the page, or for an HTMX request its ``content`` block (or ``block``)."""
    full = {"request": request, "principal": principal, **context}
    block = (block or "content") if is_fragment_request(request) else None
    response = templates.TemplateResponse(
        request, template, full, status_code=status, block_name=block
    )
    assert isinstance(response, HTMLResponse)
    response.headers["Vary"] = "HX-Request"
    if error_code:
        response.headers["X-Error-Code"] = error_code
    return response


def redirect(request: Request, url: str) -> Response:
    """After a successful POST: 303 for forms, HX-Redirect for HTMX."""
    if request.headers.get("hx-request"):
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)
