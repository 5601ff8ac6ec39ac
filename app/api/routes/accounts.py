"""/api/v1/me, /api/v1/tokens (own tokens) and /api/v1/users (admin)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.http.deps import AdminDep, ReviewerDep, SessionDep
from app.http.params import Id, Page, PerPage
from app.models import Role
from app.models.users import TokenCreated, TokenPublic, UserPublic
from app.readmodel import PageOf, paged
from app.services.accounts import users as service
from app.services.paging import DEFAULT_PER_PAGE

router = APIRouter(tags=["accounts"])


@router.get("/me")
def me(principal: ReviewerDep) -> UserPublic:
    return UserPublic.of(principal.user)


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
def create_user(session: SessionDep, principal: AdminDep, body: UserCreate) -> UserPublic:
    user = service.create_user(
        session=session,
        email=body.email,
        password=body.password,
        role=body.role,
        adjudicator=body.adjudicator,
    )
    return UserPublic.of(user)


class UserUpdate(BaseModel):
    adjudicator: bool


@router.patch("/users/{user_id}")
def update_user(
    session: SessionDep, principal: AdminDep, user_id: Id, body: UserUpdate
) -> UserPublic:
    """Give a user the adjudicator flag, or take it away."""
    user = service.set_adjudicator(session=session, user_id=user_id, adjudicator=body.adjudicator)
    return UserPublic.of(user)


@router.get("/users")
def list_users(
    session: SessionDep, principal: AdminDep, page: Page = 1, per_page: PerPage = DEFAULT_PER_PAGE
) -> PageOf[UserPublic]:
    users = service.list_users(session=session)
    return paged([UserPublic.of(u) for u in users], page, per_page)
