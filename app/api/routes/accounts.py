"""/api/v1/me (and its password), /api/v1/tokens (own tokens) and /api/v1/users (admin:
accounts, their life cycle and its audit trail)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from app.api.responses import ErrorBody
from app.http.deps import (
    AdminDep,
    ClockDep,
    ReviewerDep,
    SessionDep,
    SettingsDep,
    session_id_from_cookie,
)
from app.http.params import Id, Page, PerPage
from app.models import AccountVia, Role
from app.models.users import (
    AccountEventPublic,
    PasswordChanged,
    PasswordReset,
    TokenCreated,
    TokenPublic,
    UserAccountPublic,
    UserPublic,
)
from app.readmodel import PageOf, paged
from app.services.accounts import life_cycle, logins
from app.services.accounts import users as service
from app.services.paging import DEFAULT_PER_PAGE

router = APIRouter(tags=["accounts"])


@router.get("/me")
def me(principal: ReviewerDep) -> UserPublic:
    return UserPublic.of(principal.user)


class PasswordChange(BaseModel):
    current: str = Field(max_length=1000)
    new: str = Field(max_length=1000)  # the policy: services.accounts.passwords


@router.post(
    "/me/password",
    responses={
        429: {
            "model": ErrorBody,
            "description": "``too_many_attempts``: the login limit reached by wrong current "
            "passwords and failed logins; Retry-After says when to try again",
        }
    },
)
def change_password(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    clock: ClockDep,
    principal: ReviewerDep,
    body: PasswordChange,
) -> PasswordChanged:
    """Change the caller's own password. Every browser session of the caller ends but the
    one that asks (when it is a cookie session); API tokens keep working. A wrong
    ``current`` answers 400 ``wrong_password`` and counts as a failed login (429
    ``too_many_attempts`` once the login limit is reached)."""
    assert principal.user.id is not None
    ended = life_cycle.change_password(
        session=session,
        user_id=principal.user.id,
        current=body.current,
        new=body.new,
        keep_session=session_id_from_cookie(request) if principal.via == "cookie" else None,
        via=AccountVia.API,
        address=request.client.host if request.client else "unknown",
        now=clock.now(),
        policy=logins.policy_for(settings),
    )
    user = service.get_user(session=session, user_id=principal.user.id)
    return PasswordChanged(user=UserPublic.of(user), sessions_ended=ended)


class TokenCreate(BaseModel):
    name: str = Field(default="api", max_length=100)


@router.post("/tokens", status_code=201)
def create_token(session: SessionDep, principal: ReviewerDep, body: TokenCreate) -> TokenCreated:
    """A new token for the caller; ``token`` is shown in this answer only."""
    issued = service.create_token(session=session, user=principal.user, name=body.name)
    return TokenCreated.of_secret(issued.token, issued.secret)


@router.get("/tokens")
def list_tokens(
    session: SessionDep,
    principal: ReviewerDep,
    page: Page = 1,
    per_page: PerPage = DEFAULT_PER_PAGE,
) -> PageOf[TokenPublic]:
    tokens = service.list_tokens(session=session, user=principal.user)
    return paged([TokenPublic.of(t) for t in tokens], page, per_page)


@router.delete("/tokens/{token_id}")
def revoke_token(session: SessionDep, principal: ReviewerDep, token_id: Id) -> TokenPublic:
    return TokenPublic.of(
        service.revoke_token(session=session, user=principal.user, token_id=token_id)
    )


class UserCreate(BaseModel):
    email: str = Field(max_length=320)
    password: str = Field(max_length=1000)  # the policy: services.passwords
    role: Role
    #: A reviewer who may also decide disputed overlap misses (leads may anyway).
    adjudicator: bool = False


@router.post("/users", status_code=201)
def create_user(session: SessionDep, principal: AdminDep, body: UserCreate) -> UserAccountPublic:
    user = service.create_user(
        session=session,
        email=body.email,
        password=body.password,
        role=body.role,
        adjudicator=body.adjudicator,
        actor=principal.user,
        via=AccountVia.API,
    )
    return UserAccountPublic.of(user)


class UserUpdate(BaseModel):
    """The fields to change; an absent (or null) field stays as it is."""

    role: Role | None = None
    #: False deactivates the user (their sessions end, their tokens are refused); true
    #: reactivates them (their tokens work again).
    active: bool | None = None
    adjudicator: bool | None = None


@router.patch("/users/{user_id}")
def update_user(
    session: SessionDep, principal: AdminDep, user_id: Id, body: UserUpdate
) -> UserAccountPublic:
    """Change a user's role, activity or adjudicator flag; each change is an account event.
    409 ``last_admin`` when no active admin would be left, ``cannot_deactivate_self``."""
    user = life_cycle.update_user(
        session=session,
        actor=principal.user,
        user_id=user_id,
        via=AccountVia.API,
        role=body.role,
        active=body.active,
        adjudicator=body.adjudicator,
    )
    return UserAccountPublic.of(user)


class PasswordResetBody(BaseModel):
    #: Also revoke every API token of the user: the password leaked, and whoever had it may
    #: have made a token with it. False (the default): the tokens keep working.
    revoke_tokens: bool = False


@router.post("/users/{user_id}/password-reset")
def reset_password(
    response: Response,
    session: SessionDep,
    principal: AdminDep,
    user_id: Id,
    body: PasswordResetBody | None = None,
) -> PasswordReset:
    """A one-time temporary password, in this answer only. Every browser session of the
    user ends, logins in flight with the old password included (a session started with
    the old password is refused on use), and their next login must choose a new password
    before anything else (a cookie session meanwhile gets 403 ``password_change_required``).
    Their API tokens keep working, unless the body says ``{"revoke_tokens": true}`` (the
    password leaked): then each is revoked and ``tokens_revoked`` counts them."""
    user, temporary, revoked = life_cycle.reset_password(
        session=session,
        actor=principal.user,
        user_id=user_id,
        via=AccountVia.API,
        revoke_tokens=body is not None and body.revoke_tokens,
    )
    response.headers["Cache-Control"] = "no-store"
    return PasswordReset(
        user=UserAccountPublic.of(user), temporary_password=temporary, tokens_revoked=revoked
    )


@router.get("/users/{user_id}/events")
def list_user_events(
    session: SessionDep,
    principal: AdminDep,
    user_id: Id,
    page: Page = 1,
    per_page: PerPage = DEFAULT_PER_PAGE,
) -> PageOf[AccountEventPublic]:
    """The account's audit trail, oldest first: who changed what, when and from where."""
    events = life_cycle.list_events(session=session, user_id=user_id)
    return paged(events, page, per_page)


@router.get("/users")
def list_users(
    session: SessionDep, principal: AdminDep, page: Page = 1, per_page: PerPage = DEFAULT_PER_PAGE
) -> PageOf[UserAccountPublic]:
    users = service.list_users(session=session)
    return paged([UserAccountPublic.of(u) for u in users], page, per_page)
