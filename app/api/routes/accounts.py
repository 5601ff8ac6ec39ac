"""/api/v1/me, /api/v1/tokens (own tokens) and /api/v1/users (admin)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.http.deps import AdminDep, ReviewerDep, SessionDep
from app.http.params import Id, Page, PerPage, paged
from app.models import ApiToken, Role, User
from app.services import users as service

router = APIRouter(tags=["accounts"])


def public_user(user: User) -> dict[str, Any]:
    return {"id": user.id, "email": user.email, "role": user.role, "is_active": user.is_active}


def public_token(token: ApiToken) -> dict[str, Any]:
    return {
        "id": token.id,
        "name": token.name,
        "prefix": token.prefix,
        "created_at": token.created_at.isoformat(),
        "last_used_at": token.last_used_at.isoformat() if token.last_used_at else None,
        "revoked_at": token.revoked_at.isoformat() if token.revoked_at else None,
    }


@router.get("/me")
def me(principal: ReviewerDep) -> dict[str, Any]:
    return public_user(principal.user)


class TokenCreate(BaseModel):
    name: str = Field(default="api", max_length=100)


@router.post("/tokens", status_code=201)
def create_token(session: SessionDep, principal: ReviewerDep, body: TokenCreate) -> dict[str, Any]:
    """A new token for the caller; ``token`` is shown in this answer only."""
    issued = service.create_token(session=session, user=principal.user, name=body.name)
    return public_token(issued.token) | {"token": issued.secret}


@router.get("/tokens")
def list_tokens(
    session: SessionDep, principal: ReviewerDep, page: Page = 1, per_page: PerPage = 50
) -> dict[str, Any]:
    tokens = service.list_tokens(session=session, user=principal.user)
    return paged([public_token(t) for t in tokens], page, per_page)


@router.delete("/tokens/{token_id}")
def revoke_token(session: SessionDep, principal: ReviewerDep, token_id: Id) -> dict[str, Any]:
    return public_token(
        service.revoke_token(session=session, user=principal.user, token_id=token_id)
    )


class UserCreate(BaseModel):
    email: str = Field(max_length=320)
    password: str = Field(max_length=1000)  # the policy: services.passwords
    role: Role


@router.post("/users", status_code=201)
def create_user(session: SessionDep, principal: AdminDep, body: UserCreate) -> dict[str, Any]:
    user = service.create_user(
        session=session, email=body.email, password=body.password, role=body.role
    )
    return public_user(user)


@router.get("/users")
def list_users(
    session: SessionDep, principal: AdminDep, page: Page = 1, per_page: PerPage = 50
) -> dict[str, Any]:
    users = service.list_users(session=session)
    return paged([public_user(u) for u in users], page, per_page)
