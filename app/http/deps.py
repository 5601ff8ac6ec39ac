"""Request dependencies: database session, the authenticated user, role checks, CSRF."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Literal
from urllib.parse import urlsplit

from fastapi import Depends, Request
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from app.clock import Clock
from app.db import end_reading
from app.models import Role, User
from app.observability import note_user
from app.security import CookieSigner
from app.services.accounts import users as user_service
from app.services.errors import Forbidden, ServiceError
from app.settings import Settings

SESSION_COOKIE = "misstriage_session"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class NotAuthenticated(ServiceError):
    status = 401
    code = "not_authenticated"


# The trivial dependencies are ``async def``: FastAPI runs a plain ``def`` dependency in the
# thread pool, a hand-off (and back) per dependency per request for an attribute read.


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_settings(request: Request) -> Settings:
    return settings_of(request)


async def get_session(request: Request) -> AsyncIterator[Session]:
    # Making a session does no I/O (it connects on first use); closing one whose work is
    # committed only hands its connection back to the pool.
    with Session(request.app.state.engine, expire_on_commit=False) as session:
        yield session


def clock_of(request: Request) -> Clock:
    """The application's clock (injected: tests freeze it)."""
    clock: Clock = request.app.state.clock
    return clock


async def get_clock(request: Request) -> Clock:
    return clock_of(request)


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
ClockDep = Annotated[Clock, Depends(get_clock)]


@dataclass(frozen=True)
class Principal:
    user: User
    via: Literal["token", "cookie"]

    @property
    def role(self) -> Role:
        return Role(self.user.role)


def same_origin(request: Request) -> bool:
    """CSRF check for cookie-authenticated writes (datasette's way): the browser says the
    request comes from our own pages (Sec-Fetch-Site), or its Origin is our host."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin") or request.headers.get("referer")
    if not origin:
        return False
    return urlsplit(origin).netloc == request.headers.get("host")


def session_id_from_cookie(request: Request) -> str | None:
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        return None
    signer = CookieSigner(settings_of(request).secret_key)
    return signer.unsign(cookie)


async def optional_principal(request: Request, session: SessionDep) -> Principal | None:
    """Bearer token first (API clients), else the session cookie (the HTML UI).

    A token this process has looked up lately is answered here, in the event loop, from
    memory (``users.cached_user_for_token``): no thread hand-off and no query, so a route
    costs one hand-off, its own. Anything that needs the database (a token not cached, the
    revocation check due, a last use to write, a session cookie) is looked up in a worker
    thread (``_principal_from_database``)."""
    principal = _principal_from_memory(request, session)
    if principal is _ASK_DATABASE:
        principal = await run_in_threadpool(_principal_from_database, request, session)
    assert not isinstance(principal, _AskDatabase)
    request.state.principal = principal  # for the error page, which must not query
    return principal


class _AskDatabase:
    """``_principal_from_memory``'s answer when only the database can tell."""


_ASK_DATABASE = _AskDatabase()


def _principal_from_memory(request: Request, session: Session) -> Principal | _AskDatabase | None:
    authorization = request.headers.get("authorization")
    if authorization:
        user = user_service.cached_user_for_token(session=session, secret=_bearer(authorization))
        if user is None:
            return _ASK_DATABASE
        note_user(user.id)
        return Principal(user=user, via="token")
    if request.cookies.get(SESSION_COOKIE):
        return _ASK_DATABASE
    return None


def _principal_from_database(request: Request, session: Session) -> Principal | None:
    """The principal, looked up in the database (in a worker thread).

    Ends its transaction before returning, so the request gives its pooled connection back
    while it waits for a worker thread to run the route. Holding it there deadlocks a busy
    process: every thread taken by newer requests waiting for a connection, every connection
    held by requests waiting for a thread, until the pool times out (found by
    benchmarks/load_fault.py; tests/api/test_pool_starvation.py)."""
    try:
        principal = _principal(request, session)
    except BaseException:
        session.rollback()  # hand the connection back on this way out too
        raise
    end_reading(session)  # not a unit of work: ends the reads; the user stays loaded
    return principal


def pending_principal(request: Request, session: Session) -> Principal | None:
    """The cookie's user, even one who must choose a new password after an admin's reset
    (in a worker thread; the set-password page and logout admit it). Ends its reads as
    ``_principal_from_database`` does."""
    try:
        session_id = session_id_from_cookie(request)
        user = (
            None
            if session_id is None
            else user_service.session_user(session=session, session_id=session_id)
        )
        if user is not None and request.method not in SAFE_METHODS and not same_origin(request):
            raise Forbidden("cross-site request refused (CSRF)", code="csrf_failed")
    except BaseException:
        session.rollback()
        raise
    end_reading(session)
    return None if user is None else Principal(user=user, via="cookie")


def _bearer(authorization: str) -> str:
    """The secret of an ``Authorization: Bearer <token>`` header; 401 for anything else."""
    scheme, _, secret = authorization.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise NotAuthenticated("use 'Authorization: Bearer <token>'", code="invalid_token")
    return secret.strip()


def _principal(request: Request, session: Session) -> Principal | None:
    authorization = request.headers.get("authorization")
    if authorization:
        user = user_service.user_for_token(session=session, secret=_bearer(authorization))
        if user is None:
            raise NotAuthenticated("the token is unknown or revoked", code="invalid_token")
        note_user(user.id)
        return Principal(user=user, via="token")
    session_id = session_id_from_cookie(request)
    if session_id is None:
        return None
    user = user_service.user_for_session(session=session, session_id=session_id)
    if user is None:
        return None
    note_user(user.id)
    if request.method not in SAFE_METHODS and not same_origin(request):
        raise Forbidden("cross-site request refused (CSRF)", code="csrf_failed")
    return Principal(user=user, via="cookie")


OptionalPrincipal = Annotated[Principal | None, Depends(optional_principal)]


def require(role: Role) -> Callable[..., Coroutine[None, None, Principal]]:
    """A dependency that admits users of ``role`` or above (401 without credentials)."""

    async def dependency(principal: OptionalPrincipal) -> Principal:
        if principal is None:
            raise NotAuthenticated("log in or send an API token")
        if not principal.role.allows(role):
            raise Forbidden(f"this needs the {role.value} role", code="forbidden")
        return principal

    dependency.min_role = role  # type: ignore[attr-defined]  # read by the route-audit test
    return dependency


ReviewerDep = Annotated[Principal, Depends(require(Role.REVIEWER))]
LeadDep = Annotated[Principal, Depends(require(Role.LEAD))]
AdminDep = Annotated[Principal, Depends(require(Role.ADMIN))]


def require_or_none(role: Role) -> Callable[..., Coroutine[None, None, Principal | None]]:
    """Like ``require``, but without credentials it returns None instead of refusing, so a
    page action can answer in its own words ("your label was NOT saved: log in again")."""

    async def dependency(principal: OptionalPrincipal) -> Principal | None:
        if principal is not None and not principal.role.allows(role):
            raise Forbidden(f"this needs the {role.value} role", code="forbidden")
        return principal

    dependency.min_role = role  # type: ignore[attr-defined]  # read by the route-audit test
    return dependency


ReviewerOrNoneDep = Annotated[Principal | None, Depends(require_or_none(Role.REVIEWER))]
