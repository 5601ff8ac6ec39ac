"""One template serves the full page and its HTMX fragment (the ``content`` block); the error
page; flash messages after a post/redirect/get."""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields
from typing import ClassVar, Literal, Protocol
from urllib.parse import quote, urlsplit

from fastapi import Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer
from jinja2 import StrictUndefined, pass_context
from jinja2.runtime import Context
from jinja2_fragments.fastapi import Jinja2Blocks

from app.eval import formatting
from app.http.deps import Principal
from app.http.links import in_path, path_segment
from app.migrate import resource_dir
from app.models.triage_public import TriageContext
from app.web import copy, invalid_words

log = logging.getLogger(__name__)

templates = Jinja2Blocks(directory=str(resource_dir("templates")))
templates.env.autoescape = True
templates.env.undefined = StrictUndefined

FLASH_COOKIE = "misstriage_flash"
#: A flash message lives until the next page is shown, or this many seconds.
FLASH_SECONDS = 120
#: The longest flash message kept (a message, never a file's content).
FLASH_MAX_CHARS = 300
#: The element of base.html that shows the errors of HTMX requests.
ERROR_REGION = "#errors"

TITLES = {
    400: "Bad request",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Too large",
    422: "Not valid",
    429: "Too many requests",
    500: "Server error",
    503: "Unavailable",
}


# Numbers are formatted one way on the pages and in the terminal: app.eval.formatting.
templates.env.filters["measure"] = formatting.measure
templates.env.filters["share"] = formatting.share
templates.env.filters["ms"] = formatting.ms
templates.env.globals["rate"] = formatting.rate
templates.env.filters["number"] = copy.number
templates.env.filters["label"] = copy.label
templates.env.filters["meaning"] = copy.meaning
templates.env.filters["sentence"] = copy.sentence
templates.env.filters["words"] = copy.truncate_words
templates.env.globals["count"] = copy.count
templates.env.globals["agree"] = copy.agree


#: Links kept per application at most (ids in parameters make them many); all are dropped when
#: it is reached.
PATHS_KEPT = 4096


def path_for(request: Request, name: str, /, **path_params: object) -> str:
    """The path of route ``name`` (with the root path the application is served under),
    built once per application: kept in its state by root path, route name and parameters.
    ``url_for`` walks the application's routes, 0.1-0.3 ms a link, and every page asks for
    the same links of the layout again."""
    scope = request.scope
    state = request.app.state
    paths: dict[tuple[object, ...], str] | None = getattr(state, "link_paths", None)
    if paths is None:
        paths = state.link_paths = {}
    key = (scope.get("app_root_path", scope.get("root_path", "")), name, *path_params.items())
    try:
        return paths[key]
    except KeyError:
        pass
    except TypeError:  # a parameter that cannot be a key: built every time
        return request.url_for(name, **path_params).path
    path = request.url_for(name, **path_params).path
    if len(paths) >= PATHS_KEPT:
        paths.clear()
    paths[key] = path
    return path


@pass_context
def _path_for(context: Context, name: str, /, **path_params: object) -> str:
    """Links within the product are paths: never built from the request's Host header
    (absolute URLs that leave the product come from MISSTRIAGE_PUBLIC_URL)."""
    return path_for(context["request"], name, **path_params)


templates.env.globals["url_for"] = _path_for
# A name people gave, as a path segment or a query parameter's value (app.http.links).
templates.env.filters["segment"] = path_segment

#: The suffix of the name of a route's form that takes its name as a query parameter.
BY_PARAMETER = "_by_parameter"


def query_string(values: Mapping[str, object]) -> str:
    """``values`` as a query string, each key and value percent-encoded (empty: none)."""
    return "&".join(f"{path_segment(k)}={path_segment(v)}" for k, v in values.items())


def name_path(
    request: Request,
    name: str,
    part: str,
    value: str,
    /,
    query: Mapping[str, object] | None = None,
    **path_params: object,
) -> str:
    """The link of route ``name`` to the page of a name people gave, ``value`` (the route's
    path parameter ``part``, taken as ``{part:path}``): ``value`` as one percent-encoded path
    segment, or, for a name a browser drops from a path (``.``, ``..``), the route's
    query-parameter form (the route ``name + "_by_parameter"``, ``?part=value``); then
    ``query``."""
    if in_path(value):
        path = path_for(request, name, **path_params, **{part: path_segment(value)})
        extra = dict(query or {})
    else:
        path = path_for(request, name + BY_PARAMETER, **path_params)
        extra = {part: value, **(query or {})}
    return f"{path}?{query_string(extra)}" if extra else path


@pass_context
def _name_path(
    context: Context,
    name: str,
    part: str,
    value: str,
    /,
    query: Mapping[str, object] | None = None,
    **path_params: object,
) -> str:
    return name_path(context["request"], name, part, value, query, **path_params)


templates.env.globals["name_url"] = _name_path


def is_fragment_request(request: Request) -> bool:
    """An HTMX request wants the fragment, except a history restore, which wants the page."""
    return bool(request.headers.get("hx-request")) and not request.headers.get(
        "hx-history-restore-request"
    )


def _flash_serializer(request: Request) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(request.app.state.settings.secret_key, salt="misstriage-flash")


@dataclass(frozen=True)
class Flash:
    """The message a post left for the page its redirect leads to."""

    kind: Literal["ok", "error"]
    text: str
    #: What a refused form had entered, to fill it in again (never a password or a secret).
    form: dict[str, str] = field(default_factory=dict)


def read_flash(request: Request) -> Flash | None:
    """The flash message the previous post left (signed, so nobody else can plant one)."""
    cookie = request.cookies.get(FLASH_COOKIE)
    if not cookie:
        return None
    try:
        value = _flash_serializer(request).loads(cookie, max_age=FLASH_SECONDS)
    except BadSignature:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("text"), str):
        return None
    form = value.get("form")
    if not isinstance(form, dict):
        form = {}
    return Flash(
        kind="error" if value.get("kind") == "error" else "ok",
        text=value["text"][:FLASH_MAX_CHARS],
        form={str(k): str(v)[:200] for k, v in form.items()},
    )


def set_flash(
    request: Request,
    response: Response,
    text: str,
    *,
    kind: str = "ok",
    form: dict[str, str] | None = None,
) -> None:
    """Leave a message for the next page (escaped when shown, like all output), with the
    values a failed form had entered (never a password or a secret: callers choose)."""
    entered = {k: v[:200] for k, v in (form or {}).items()}
    value = _flash_serializer(request).dumps(
        {"kind": kind, "text": text[:FLASH_MAX_CHARS], "form": entered}
    )
    response.set_cookie(
        FLASH_COOKIE,
        value,
        max_age=FLASH_SECONDS,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/",
    )


class PageContext(Protocol):
    """A page's typed context: a dataclass."""

    __dataclass_fields__: ClassVar[dict[str, Field[object]]]


def context_of(page: PageContext) -> dict[str, object]:
    """A page's typed context (a dataclass, one field per template variable) as the mapping
    ``render`` takes: its fields as they are, not copied (``dataclasses.asdict`` would turn
    the rows inside into dicts). A page about a triage carries its ``TriageContext`` as
    ``ctx``; the template reads its parts as ``triage``, ``run`` and ``golden``."""
    values = {f.name: getattr(page, f.name) for f in fields(page)}
    ctx = values.pop("ctx", None)
    if isinstance(ctx, TriageContext):
        values |= {"triage": ctx.triage, "run": ctx.run, "golden": ctx.golden}
    return values


def render(
    request: Request,
    template: str,
    context: Mapping[str, object],
    *,
    principal: Principal | None = None,
    status: int = 200,
    error_code: str | None = None,
    block: str | None = None,
) -> HTMLResponse:
    """Render the page, or for an HTMX request its ``content`` block (or ``block``).

    A full page shows (and consumes) the flash message a post/redirect/get left."""
    fragment = is_fragment_request(request)
    flash = None if fragment else read_flash(request)
    full = {"request": request, "principal": principal, "flash": flash, **context}
    block = (block or "content") if fragment else None
    response = templates.TemplateResponse(
        request, template, full, status_code=status, block_name=block
    )
    assert isinstance(response, HTMLResponse)
    response.headers["Vary"] = "HX-Request"
    if error_code:
        response.headers["X-Error-Code"] = error_code
    if flash is not None:
        response.delete_cookie(FLASH_COOKIE, path="/")
        response.headers["Cache-Control"] = "no-store"
    return response


def redirect(
    request: Request,
    url: str,
    *,
    flash: str | None = None,
    kind: str = "ok",
    form: dict[str, str] | None = None,
) -> Response:
    """After a POST: 303 for forms, HX-Redirect for HTMX; ``flash`` says what happened."""
    response: Response
    if request.headers.get("hx-request"):
        response = Response(status_code=204, headers={"HX-Redirect": url})
    else:
        response = RedirectResponse(url, status_code=303)
    if flash:
        set_flash(request, response, flash, kind=kind, form=form)
    return response


#: The longest ``next`` followed after a login (longer ones lead home).
MAX_NEXT_CHARS = 2000
#: Unicode categories refused in ``next``: separators (spaces of every kind, line and
#: paragraph separators), controls, format characters (zero-width, bidirectional), and
#: surrogates, private-use and unassigned code points (nothing a path of ours contains).
_REFUSED_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"})


def local_path(candidate: str | None) -> str:
    """``candidate`` when it is a plain path of this site, else ``/``: the one rule for every
    redirect whose target comes from the request (``next`` after a login or a password
    change).

    A plain path starts with one ``/`` and has no second ``/`` or a ``\\`` right after it
    (``//host`` and ``/\\host`` lead off-site), no backslash anywhere, no character below
    0x21, no DEL, no Unicode separator, control, format, surrogate, private-use or
    unassigned character (browsers drop tabs and newlines from URLs, so ``/\\t/evil.example``
    is ``//evil.example`` to them, and a CR or LF would end the header it is written in),
    and at most MAX_NEXT_CHARS characters. Other non-ASCII characters are percent-encoded,
    so the path fits in a header."""
    if not candidate or len(candidate) > MAX_NEXT_CHARS or candidate[0] != "/":
        return "/"
    if candidate.startswith("//") or "\\" in candidate:
        return "/"
    for char in candidate:
        code = ord(char)
        if code < 0x21 or code == 0x7F or unicodedata.category(char) in _REFUSED_CATEGORIES:
            return "/"
    return "".join(char if ord(char) < 0x80 else quote(char, safe="") for char in candidate)


def local_referer(request: Request) -> str | None:
    """The page the request came from, when it is one of ours (a way back from an error)."""
    referer = request.headers.get("referer")
    if not referer:
        return None
    parts = urlsplit(referer)
    if parts.netloc != request.headers.get("host") or not parts.path.startswith("/"):
        return None
    back = parts.path + (f"?{parts.query}" if parts.query else "")
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if back == here or local_path(back) != back:  # the one rule of local_path, exactly
        return None
    return back


def _detail_lines(details: object) -> list[str]:
    """Validation details as short sentences for people ("The run address must end in a
    number (got "abc")."), never a long value."""
    if not isinstance(details, list):
        return []
    lines = []
    for item in details[:20]:
        if isinstance(item, dict) and "type" in item and "loc" in item:
            lines.append(invalid_words.sentence(item)[:200])
        elif isinstance(item, dict) and "msg" in item:
            loc = [str(p) for p in item.get("loc", []) if p not in ("body",)]
            lines.append(f"{' '.join(loc)}: {item['msg']}"[:200])
    return lines


def error_page(
    request: Request,
    status: int,
    code: str,
    message: str,
    *,
    details: object = None,
    headers: dict[str, str] | None = None,
    request_id: str | None = None,
) -> Response:
    """An error in the product's layout, with the message and a way on; for an HTMX request
    the alert alone, retargeted to the page's error region. Needs no database: the principal
    is the one the request's authentication found, if it got that far."""
    headers = {**(headers or {}), "X-Error-Code": code, "Vary": "HX-Request"}
    context = {
        "request": request,
        "principal": getattr(request.state, "principal", None),
        "flash": None,
        "status": status,
        "title": TITLES.get(status, "Error"),
        "code": code,
        "message": message[:1000],
        "lines": _detail_lines(details),
        "back": local_referer(request),
        "request_id": request_id,
    }
    fragment = is_fragment_request(request)
    if fragment:
        headers |= {"HX-Retarget": ERROR_REGION, "HX-Reswap": "innerHTML"}
    try:
        return templates.TemplateResponse(
            request,
            "error.html",
            context,
            status_code=status,
            headers=headers,
            block_name="alert" if fragment else None,
        )
    except Exception:  # the error page must not fail in turn
        log.exception("the error page failed to render")
        return PlainTextResponse(f"{status} {message}", status_code=status, headers=headers)
