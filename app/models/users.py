"""Accounts: users with a role, their API tokens and browser sessions, and the audit trail of
what admins (and the users themselves) changed about an account."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import Boolean, Column, ForeignKey, Index, Integer, String, false
from sqlmodel import Field, SQLModel

from app.models.base import UTCDateTime, utcnow
from app.readmodel import IsoDateTime, ReadModel


class Role(StrEnum):
    REVIEWER = "reviewer"
    LEAD = "lead"
    ADMIN = "admin"

    @property
    def level(self) -> int:
        return {Role.REVIEWER: 1, Role.LEAD: 2, Role.ADMIN: 3}[self]

    def allows(self, needed: Role) -> bool:
        """A role can do what every lower role can."""
        return self.level >= needed.level

    @property
    def allows_lead(self) -> bool:
        return self.allows(Role.LEAD)


class User(SQLModel, table=True):
    __tablename__ = "user_account"

    id: int | None = Field(default=None, primary_key=True)
    email: str = Field(sa_column=Column(String(320), unique=True, nullable=False))
    password_hash: str = Field(sa_column=Column(String(255), nullable=False))
    role: str = Field(sa_column=Column(String(16), nullable=False))
    is_active: bool = True
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    #: A reviewer who may also give disputed overlap misses their final label (leads may).
    adjudicator: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    #: Set by an admin's password reset: a browser session must choose a new password before
    #: anything else (the user's API tokens keep working).
    must_change_password: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    #: Moved by every password change or reset: a browser session started with another
    #: generation is refused on use (``UserSession.credential_generation``).
    credential_generation: int = Field(
        default=0, sa_column=Column(Integer, nullable=False, server_default="0")
    )

    @property
    def adjudicates(self) -> bool:
        """Whether the user may claim and decide disputed misses: a lead, or a reviewer
        with the adjudicator flag."""
        return self.adjudicator or Role(self.role).allows(Role.LEAD)


class ApiToken(SQLModel, table=True):
    """A bearer token: only its sha256 is stored; ``prefix`` identifies it in lists."""

    __tablename__ = "api_token"

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(
        sa_column=Column(
            Integer, ForeignKey("user_account.id", ondelete="CASCADE"), nullable=False, index=True
        )
    )
    name: str = Field(sa_column=Column(String(100), nullable=False))
    prefix: str = Field(sa_column=Column(String(16), nullable=False))
    token_hash: str = Field(sa_column=Column(String(64), unique=True, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    last_used_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class UserSession(SQLModel, table=True):
    """A browser session; the cookie carries a signed random id whose sha256 is stored."""

    __tablename__ = "user_session"

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(
        sa_column=Column(
            Integer, ForeignKey("user_account.id", ondelete="CASCADE"), nullable=False, index=True
        )
    )
    token_hash: str = Field(sa_column=Column(String(64), unique=True, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime)
    #: The user's credential generation whose password started the session: live only while
    #: it is the user's (a password change or reset since ends it, logins in flight included).
    credential_generation: int = Field(
        default=0, sa_column=Column(Integer, nullable=False, server_default="0")
    )


class LoginAttempt(SQLModel, table=True):
    """A failed login, kept for the rate limit's window: counted per email and per client
    address, in the database so that every app process sees the same count."""

    __tablename__ = "login_attempt"
    __table_args__ = (
        Index("ix_login_attempt_email", "email", "attempted_at"),
        Index("ix_login_attempt_address", "address", "attempted_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    email: str = Field(sa_column=Column(String(320), nullable=False))
    address: str = Field(sa_column=Column(String(64), nullable=False))
    attempted_at: datetime = Field(sa_type=UTCDateTime)


class UserPublic(ReadModel):
    """A user as the API answers it: never the password hash."""

    id: int
    email: str
    role: Role
    is_active: bool
    adjudicator: bool

    @classmethod
    def of(cls, user: User) -> UserPublic:
        return cls.model_validate(user)


class UserAccountPublic(UserPublic):
    """A user as the admins' answers show it: also whether a reset waits for the user's
    new password."""

    #: True after an admin reset the password, until the user has chosen a new one.
    must_change_password: bool

    @classmethod
    def of(cls, user: User) -> UserAccountPublic:
        return cls.model_validate(user)


class TokenPublic(ReadModel):
    """An API token as lists show it: its prefix, never the secret or its hash."""

    id: int
    name: str
    prefix: str
    created_at: IsoDateTime
    last_used_at: IsoDateTime | None
    revoked_at: IsoDateTime | None

    @classmethod
    def of(cls, token: ApiToken) -> TokenPublic:
        return cls.model_validate(token)


class TokenCreated(TokenPublic):
    """A new token: ``token``, the secret, is in this answer only."""

    token: str

    @classmethod
    def of_secret(cls, token: ApiToken, secret: str) -> TokenCreated:
        return cls.model_validate({**TokenPublic.of(token).model_dump(), "token": secret})


class AuthGeneration(SQLModel, table=True):
    """One row, whose ``generation`` goes up in the transaction of every change that can
    withdraw or change a credential (a token revoked, a user changed; by the app, or by hand
    in SQL through the database's triggers): app processes cache token look-ups and drop
    their cache when they see it change (read at most once a second;
    app/services/accounts/auth_cache.py)."""

    __tablename__ = "auth_generation"

    id: int | None = Field(default=None, primary_key=True)
    generation: int = Field(default=0, sa_column=Column(Integer, nullable=False))


class AccountAction(StrEnum):
    """What an account event records."""

    CREATED = "created"
    ROLE_CHANGED = "role_changed"
    DEACTIVATED = "deactivated"
    REACTIVATED = "reactivated"
    ADJUDICATOR_CHANGED = "adjudicator_changed"
    PASSWORD_RESET = "password_reset"
    PASSWORD_CHANGED = "password_changed"


class AccountVia(StrEnum):
    """Where an account change was made."""

    API = "api"
    PAGE = "page"
    CLI = "cli"


class AccountEvent(SQLModel, table=True):
    """One change to an account (append-only: written, never updated or deleted by the app).
    ``before`` and ``after`` are the changed value (a role, ``active``/``inactive``, the
    adjudicator flag); never a password, a hash or a temporary password."""

    __tablename__ = "account_event"
    __table_args__ = (Index("ix_account_event_user", "user_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    #: The admin (or the user) who made the change; None from the command line.
    actor_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("user_account.id", ondelete="SET NULL")),
    )
    #: The account changed; None once it is deleted (by hand: the app deactivates), when
    #: ``email`` still says whose it was: the trail outlives the account.
    user_id: int | None = Field(
        default=None,
        sa_column=Column(Integer, ForeignKey("user_account.id", ondelete="SET NULL")),
    )
    email: str = Field(sa_column=Column(String(320), nullable=False, server_default=""))
    action: str = Field(sa_column=Column(String(32), nullable=False))
    via: str = Field(sa_column=Column(String(8), nullable=False))
    before: str | None = Field(default=None, sa_column=Column(String(32)))
    after: str | None = Field(default=None, sa_column=Column(String(32)))
    #: How many browser sessions of the user the change ended.
    sessions_ended: int = Field(
        default=0, sa_column=Column(Integer, nullable=False, server_default="0")
    )
    #: How many API tokens of the user the change revoked (a reset that revokes them).
    tokens_revoked: int = Field(
        default=0, sa_column=Column(Integer, nullable=False, server_default="0")
    )


class AccountEventPublic(ReadModel):
    """An account event as the API answers it."""

    id: int
    at: IsoDateTime
    #: None once the account is deleted; ``email`` is the account's at the time of the change.
    user_id: int | None
    email: str
    actor_id: int | None
    #: The actor's email (None from the command line, or when the actor's account is gone).
    actor_email: str | None
    action: AccountAction
    via: AccountVia
    before: str | None
    after: str | None
    sessions_ended: int
    #: The API tokens the change revoked (a reset asked to revoke them; else 0).
    tokens_revoked: int


class PasswordReset(ReadModel):
    """An admin's password reset: ``temporary_password`` is in this answer only."""

    user: UserAccountPublic
    temporary_password: str
    #: How many of the user's API tokens the reset revoked (0 unless ``revoke_tokens``).
    tokens_revoked: int


class PasswordChanged(ReadModel):
    """A user's own password change."""

    user: UserPublic
    #: The user's browser sessions that ended (all but the caller's own cookie session).
    sessions_ended: int
