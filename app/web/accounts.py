"""Login, logout and the API-token page."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.http.deps import (
    SESSION_COOKIE,
    ClockDep,
    OptionalPrincipal,
    ReviewerDep,
    SessionDep,
    SettingsDep,
    same_origin,
    session_id_from_cookie,
)
from app.http.params import Id
from app.models.users import TokenPublic
from app.security import CookieSigner
from app.services.accounts import logins
from app.services.accounts import users as user_service
from app.settings import Settings
from app.web.render import redirect, render

router = APIRouter(include_in_schema=False)


def _local(next_url: str) -> str:
    """Only same-site paths: never redirect off-site after login."""
    if next_url.startswith("/") and not next_url.startswith("//") and "\\" not in next_url:
        return next_url
    return "/"


def login_policy(settings: Settings) -> logins.LoginPolicy:
    return logins.LoginPolicy(
        per_email_and_address=settings.login_failures_per_email_and_address,
        per_email=settings.login_failures_per_email,
        per_address=settings.login_failures_per_address,
        window=timedelta(seconds=settings.login_window_seconds),
    )


@router.get("/login", name="login_page")
def login_page(request: Request, principal: OptionalPrincipal, next: str = "/") -> Response:
    if principal is not None:
        return RedirectResponse(_local(next), status_code=303)
    return render(request, "login.html", {"error": None, "email": "", "next": _local(next)})


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
    if not same_origin(request):
        return render(
            request,
            "login.html",
            {"error": "Cross-site login refused.", "email": email, "next": _local(next)},
            status=403,
            error_code="csrf_failed",
        )
    policy = login_policy(settings)
    address = request.client.host if request.client else "unknown"
    normalised, now = user_service.normalise_email(email), clock.now()
    wait = logins.retry_after(
        session=session, email=normalised, address=address, now=now, policy=policy
    )
    if wait is not None:
        minutes = math.ceil(wait / 60)
        refused = render(
            request,
            "login.html",
            {
                "error": f"Too many failed logins: try again in {minutes} "
                f"minute{'s' if minutes != 1 else ''}.",
                "email": email,
                "next": _local(next),
            },
            status=429,
            error_code="too_many_attempts",
        )
        refused.headers["Retry-After"] = str(wait)
        return refused
    user = user_service.authenticate(session=session, email=email, password=password)
    if user is None:
        logins.record_failure(
            session=session, email=normalised, address=address, now=now, policy=policy
        )
        return render(
            request,
            "login.html",
            {"error": "Wrong email or password.", "email": email, "next": _local(next)},
            status=400,
            error_code="invalid_credentials",
        )
    logins.clear_failures(session=session, email=normalised, address=address)
    old = session_id_from_cookie(request)
    if old is not None:
        user_service.end_session(session=session, session_id=old)
    session_id = user_service.start_session(
        session=session, user=user, hours=settings.session_hours
    )
    response = redirect(request, _local(next))
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
def logout(request: Request, session: SessionDep, principal: ReviewerDep) -> Response:
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
