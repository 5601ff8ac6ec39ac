"""The admins' Users page: every account with its role, activity and adjudicator flag; forms
to create a user, change a role, deactivate or reactivate, give or take the adjudicator flag
and reset a password (the temporary password shown once); the latest account events.

Each form answers with a redirect to the page and a message, or the page again with the
reason (its status and ``X-Error-Code``); a reset answers the page with the temporary
password (``Cache-Control: no-store``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import Session

from app.http.deps import AdminDep, Principal, SessionDep
from app.http.params import Id
from app.models import AccountVia, Role
from app.models.users import AccountEventPublic, UserAccountPublic
from app.services.accounts import life_cycle
from app.services.accounts import users as user_service
from app.services.errors import Invalid, ServiceError
from app.web.render import context_of, redirect, render

router = APIRouter(include_in_schema=False)

#: Account events the page shows, newest first (the API has each account's whole trail).
RECENT_EVENTS = 50


@dataclass(frozen=True)
class Reset:
    """A reset just made: whose, and the temporary password to hand over (shown once)."""

    email: str
    temporary_password: str
    #: Whether the admin asked to revoke the user's API tokens, and how many were.
    revoke_tokens: bool = False
    tokens_revoked: int = 0


@dataclass(frozen=True)
class UsersPage:
    users: list[UserAccountPublic]
    roles: list[str]
    events: list[AccountEventPublic]
    me: int
    error: str | None = None
    reset: Reset | None = None
    #: What the create form had entered when it was refused (never the password).
    entered: dict[str, str] = field(default_factory=dict)


def _users_page(
    request: Request,
    session: Session,
    principal: Principal,
    *,
    error: str | None = None,
    error_code: str | None = None,
    status: int = 200,
    reset: Reset | None = None,
    entered: dict[str, str] | None = None,
) -> HTMLResponse:
    users = [UserAccountPublic.of(u) for u in user_service.list_users(session=session)]
    assert principal.user.id is not None
    page = UsersPage(
        users=users,
        roles=[r.value for r in Role],
        events=life_cycle.list_events(session=session, limit=RECENT_EVENTS),
        me=principal.user.id,
        error=error,
        reset=reset,
        entered=entered or {},
    )
    response = render(
        request,
        "users.html",
        context_of(page),
        principal=principal,
        status=status,
        error_code=error_code,
    )
    if reset is not None:
        response.headers["Cache-Control"] = "no-store"
    return response


def _role(raw: str) -> Role:
    try:
        return Role(raw)
    except ValueError:
        raise Invalid(f"no role {raw[:40]!r}", code="invalid_role") from None


def _changed(request: Request, message: str) -> Response:
    return redirect(request, request.url_for("users_page").path, flash=message)


@router.get("/users", name="users_page")
def users_page(request: Request, session: SessionDep, principal: AdminDep) -> HTMLResponse:
    return _users_page(request, session, principal)


@router.post("/users", name="create_user_form")
def create_user(
    request: Request,
    session: SessionDep,
    principal: AdminDep,
    email: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
    role: Annotated[str, Form()] = Role.REVIEWER.value,
    adjudicator: Annotated[bool, Form()] = False,
) -> Response:
    try:
        user = user_service.create_user(
            session=session,
            email=email,
            password=password,
            role=_role(role),
            adjudicator=adjudicator,
            actor=principal.user,
            via=AccountVia.PAGE,
        )
    except ServiceError as exc:
        return _users_page(
            request,
            session,
            principal,
            error=exc.message,
            error_code=exc.code,
            status=exc.status,
            entered={"email": email[:320], "role": role[:16]},
        )
    return _changed(request, f"{user.email} created ({user.role})")


def _update(
    request: Request,
    session: Session,
    principal: Principal,
    user_id: int,
    *,
    role: str | None = None,
    active: bool | None = None,
    adjudicator: bool | None = None,
) -> Response:
    try:
        user = life_cycle.update_user(
            session=session,
            actor=principal.user,
            user_id=user_id,
            via=AccountVia.PAGE,
            role=None if role is None else _role(role),
            active=active,
            adjudicator=adjudicator,
        )
    except ServiceError as exc:
        return _users_page(
            request, session, principal, error=exc.message, error_code=exc.code, status=exc.status
        )
    if role is not None:
        said = f"{user.email} is now {user.role}"
    elif active is not None:
        said = f"{user.email} {'reactivated' if active else 'deactivated'}"
    else:
        said = f"{user.email} {'may' if user.adjudicator else 'may no longer'} adjudicate"
    return _changed(request, said)


@router.post("/users/{user_id}/role", name="user_role_form")
def change_role(
    request: Request,
    session: SessionDep,
    principal: AdminDep,
    user_id: Id,
    role: Annotated[str, Form()] = "",
) -> Response:
    return _update(request, session, principal, user_id, role=role)


@router.post("/users/{user_id}/deactivate", name="user_deactivate_form")
def deactivate(request: Request, session: SessionDep, principal: AdminDep, user_id: Id) -> Response:
    return _update(request, session, principal, user_id, active=False)


@router.post("/users/{user_id}/reactivate", name="user_reactivate_form")
def reactivate(request: Request, session: SessionDep, principal: AdminDep, user_id: Id) -> Response:
    return _update(request, session, principal, user_id, active=True)


@router.post("/users/{user_id}/adjudicator", name="user_adjudicator_form")
def set_adjudicator(
    request: Request,
    session: SessionDep,
    principal: AdminDep,
    user_id: Id,
    adjudicator: Annotated[bool, Form()] = False,
) -> Response:
    return _update(request, session, principal, user_id, adjudicator=adjudicator)


@router.post("/users/{user_id}/password-reset", name="user_password_reset_form")
def reset_password(
    request: Request,
    session: SessionDep,
    principal: AdminDep,
    user_id: Id,
    revoke_tokens: Annotated[bool, Form()] = False,
) -> Response:
    try:
        user, temporary, revoked = life_cycle.reset_password(
            session=session,
            actor=principal.user,
            user_id=user_id,
            via=AccountVia.PAGE,
            revoke_tokens=revoke_tokens,
        )
    except ServiceError as exc:
        return _users_page(
            request, session, principal, error=exc.message, error_code=exc.code, status=exc.status
        )
    reset = Reset(
        email=user.email,
        temporary_password=temporary,
        revoke_tokens=revoke_tokens,
        tokens_revoked=revoked,
    )
    return _users_page(request, session, principal, reset=reset)
