"""Login, logout, the API-token page, the account page (the user's own password) and the
set-password page a user meets after an admin reset their password.

Every redirect built from user input (``next``) goes through ``local_path`` (app/web/render.py)."""

from __future__ import annotations

import math
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.http.deps import (
    SESSION_COOKIE,
    ClockDep,
    NotAuthenticated,
    Principal,
    ReviewerDep,
    SessionDep,
    SettingsDep,
    optional_principal,
    pending_principal,
    same_origin,
    session_id_from_cookie,
)
from app.http.params import Id
from app.models import AccountVia, Role
from app.models.users import TokenPublic, UserPublic
from app.security import CookieSigner
from app.services.accounts import life_cycle, logins
from app.services.accounts import users as user_service
from app.services.accounts.users import PasswordChangeRequired
from app.services.errors import Forbidden, ServiceError
from app.web import users as web_users
from app.web.render import local_path, redirect, render

router = APIRouter(include_in_schema=False)
#: The one answer to a wrong email, a wrong password, and a password changed meanwhile.
WRONG_CREDENTIALS = "Wrong email or password."
# The admins' Users page is the accounts' too (registered with them, in app.main).
router.include_router(web_users.router)


def _client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _set_password_url(request: Request, next_path: str) -> str:
    path = request.url_for("set_password_page").path
    return path if next_path == "/" else f"{path}?{urlencode({'next': next_path})}"


async def principal_or_pending(request: Request, session: SessionDep) -> Principal:
    """Like ``ReviewerDep`` for browser sessions alone, and it also admits the session of a
    user whose password an admin reset (``PasswordChangeRequired`` everywhere else): the
    set-password page and logout are theirs. A bearer token is refused (403)."""
    try:
        principal = await optional_principal(request, session)
    except PasswordChangeRequired:
        principal = await run_in_threadpool(pending_principal, request, session)
    if principal is None:
        raise NotAuthenticated("log in or send an API token")
    if principal.via != "cookie":
        # Tokens keep working through a reset, so a token proves nothing about the
        # temporary password: only a browser session that logged in with it may set the new
        # one (a leaked token must not turn into the account's password).
        raise Forbidden("this form is for the browser session that logged in", code="forbidden")
    return principal


principal_or_pending.min_role = Role.REVIEWER  # type: ignore[attr-defined]  # the route audit
PendingDep = Annotated[Principal, Depends(principal_or_pending)]


@router.get("/login", name="login_page")
def login_page(request: Request, session: SessionDep, next: str = "/") -> Response:
    target = local_path(next)
    session_id = session_id_from_cookie(request)
    user = (
        None
        if session_id is None
        else user_service.session_user(session=session, session_id=session_id)
    )
    if user is not None:
        where = _set_password_url(request, target) if user.must_change_password else target
        return RedirectResponse(where, status_code=303)
    return render(request, "login.html", {"error": None, "email": "", "next": target})


def _login_refused(
    request: Request, email: str, target: str, error: str, *, status: int, code: str
) -> HTMLResponse:
    """The login form again, with ``error`` and the email entered."""
    return render(
        request,
        "login.html",
        {"error": error, "email": email, "next": target},
        status=status,
        error_code=code,
    )


@router.post("/login", name="login")
def login(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    email: Annotated[str, Form()],
    password: Annotated[str, Form()],
    next: Annotated[str, Form()] = "/",
) -> Response:
    target = local_path(next)
    if not same_origin(request):
        return _login_refused(
            request, email, target, "Cross-site login refused.", status=403, code="csrf_failed"
        )
    policy = logins.policy_for(settings)
    address = _client_address(request)
    normalised, now = user_service.normalise_email(email), clock.now()
    wait = logins.retry_after(
        session=session, email=normalised, address=address, now=now, policy=policy
    )
    if wait is not None:
        minutes = math.ceil(wait / 60)
        refused = _login_refused(
            request,
            email,
            target,
            f"Too many failed logins: try again in {minutes} minute{'s' if minutes != 1 else ''}.",
            status=429,
            code="too_many_attempts",
        )
        refused.headers["Retry-After"] = str(wait)
        return refused
    checked = user_service.authenticate(session=session, email=email, password=password)
    if checked is None:
        logins.record_failure(
            session=session, email=normalised, address=address, now=now, policy=policy
        )
        return _login_refused(
            request, email, target, WRONG_CREDENTIALS, status=400, code="invalid_credentials"
        )
    logins.clear_failures(session=session, email=normalised, address=address)
    old = session_id_from_cookie(request)
    if old is not None:
        user_service.end_session(session=session, session_id=old)
    user = checked.user
    must_change = user.must_change_password  # as read with the password checked
    try:
        session_id = user_service.start_session(
            session=session,
            user=user,
            hours=settings.session_hours,
            credential_generation=checked.credential_generation,
        )
    except user_service.CredentialsChanged:
        # The password was changed or reset while this login checked the old one.
        return _login_refused(
            request, email, target, WRONG_CREDENTIALS, status=400, code="invalid_credentials"
        )
    # After an admin's reset, the new password comes before anything else.
    where = _set_password_url(request, target) if must_change else target
    response = redirect(request, where)
    response.set_cookie(
        SESSION_COOKIE,
        CookieSigner(settings.secret_key).sign(session_id),
        max_age=settings.session_hours * 3600,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/logout", name="logout")
def logout(request: Request, session: SessionDep, principal: PendingDep) -> Response:
    session_id = session_id_from_cookie(request)
    if session_id is not None:
        user_service.end_session(session=session, session_id=session_id)
    response = redirect(request, request.url_for("login_page").path)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/tokens", name="tokens_page")
def tokens_page(request: Request, session: SessionDep, principal: ReviewerDep) -> HTMLResponse:
    tokens = [
        TokenPublic.of(t) for t in user_service.list_tokens(session=session, user=principal.user)
    ]
    return render(
        request, "tokens.html", {"tokens": tokens, "new_token": None}, principal=principal
    )


@router.post("/tokens", name="create_token_form")
def create_token(
    request: Request,
    session: SessionDep,
    principal: ReviewerDep,
    name: Annotated[str, Form()] = "api",
) -> HTMLResponse:
    issued = user_service.create_token(session=session, user=principal.user, name=name)
    tokens = [
        TokenPublic.of(t) for t in user_service.list_tokens(session=session, user=principal.user)
    ]
    response = render(
        request,
        "tokens.html",
        {"tokens": tokens, "new_token": issued.secret},
        principal=principal,
        status=201,
    )
    response.headers["Cache-Control"] = "no-store"
    return response


@router.post("/tokens/{token_id}/revoke", name="revoke_token_form")
def revoke_token(
    request: Request, session: SessionDep, principal: ReviewerDep, token_id: Id
) -> Response:
    revoked = user_service.revoke_token(session=session, user=principal.user, token_id=token_id)
    said = f"token `{revoked.name}` revoked"
    return redirect(request, request.url_for("tokens_page").path, flash=said)


# --- the user's own password ---


def _account(
    request: Request,
    principal: Principal,
    *,
    error: str | None = None,
    status: int = 200,
    error_code: str | None = None,
) -> HTMLResponse:
    return render(
        request,
        "account.html",
        {"user": UserPublic.of(principal.user), "error": error},
        principal=principal,
        status=status,
        error_code=error_code,
    )


@router.get("/account", name="account_page")
def account_page(request: Request, principal: ReviewerDep) -> HTMLResponse:
    return _account(request, principal)


def _sessions_sentence(ended: int) -> str:
    if not ended:
        return "no other session was open"
    return f"{ended} other session{'s' if ended != 1 else ''} ended"


@router.post("/account/password", name="change_password_form")
def change_password(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    current: Annotated[str, Form()] = "",
    new: Annotated[str, Form()] = "",
    confirm: Annotated[str, Form()] = "",
) -> Response:
    """Change one's own password: a redirect to the account page, or the page again with
    the reason (400 ``wrong_password``/``passwords_differ``, 422 ``weak_password``, 429)."""
    if new != confirm:
        return _account(
            request,
            principal,
            error="The new password and its confirmation differ.",
            status=400,
            error_code="passwords_differ",
        )
    assert principal.user.id is not None
    try:
        ended = life_cycle.change_password(
            session=session,
            user_id=principal.user.id,
            current=current,
            new=new,
            keep_session=session_id_from_cookie(request) if principal.via == "cookie" else None,
            via=AccountVia.PAGE,
            address=_client_address(request),
            now=clock.now(),
            policy=logins.policy_for(settings),
        )
    except ServiceError as exc:
        refused = _account(
            request, principal, error=exc.message, status=exc.status, error_code=exc.code
        )
        refused.headers.update(getattr(exc, "headers", {}))  # Retry-After of a 429
        return refused
    said = f"password changed: {_sessions_sentence(ended)}"
    return redirect(request, request.url_for("account_page").path, flash=said)


# --- after an admin's reset ---


def _set_password(
    request: Request,
    principal: Principal,
    next_path: str,
    *,
    error: str | None = None,
    status: int = 200,
    error_code: str | None = None,
) -> HTMLResponse:
    # No principal for the layout: its links lead to pages this session may not see yet.
    response = render(
        request,
        "set_password.html",
        {"email": principal.user.email, "next": next_path, "error": error},
        status=status,
        error_code=error_code,
    )
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/account/set-password", name="set_password_page")
def set_password_page(request: Request, principal: PendingDep, next: str = "/") -> Response:
    """The form a user whose password an admin reset sees first after logging in."""
    if not principal.user.must_change_password:
        return RedirectResponse(request.url_for("account_page").path, status_code=303)
    return _set_password(request, principal, local_path(next))


@router.post("/account/set-password", name="set_password_form")
def set_password(
    request: Request,
    session: SessionDep,
    principal: PendingDep,
    new: Annotated[str, Form()] = "",
    confirm: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    target = local_path(next)
    if new != confirm:
        return _set_password(
            request,
            principal,
            target,
            error="The new password and its confirmation differ.",
            status=400,
            error_code="passwords_differ",
        )
    assert principal.user.id is not None
    try:
        life_cycle.set_required_password(
            session=session,
            user_id=principal.user.id,
            new=new,
            keep_session=session_id_from_cookie(request) if principal.via == "cookie" else None,
        )
    except ServiceError as exc:
        return _set_password(
            request, principal, target, error=exc.message, status=exc.status, error_code=exc.code
        )
    return redirect(request, target, flash="your new password is set")
