"""Accounts: users, API tokens and browser sessions. An account's later changes (role,
activity, passwords) and their audit trail are in ``life_cycle``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from pydantic import validate_email
from pydantic_core import PydanticCustomError
from sqlmodel import Session, col, delete, select, update

from app import security
from app.db import writing
from app.models import (
    AccountAction,
    AccountEvent,
    AccountVia,
    ApiToken,
    Role,
    User,
    UserSession,
    column_width,
    utcnow,
)
from app.services.accounts import auth_cache
from app.services.accounts.passwords import check_new_password
from app.services.errors import Conflict, Forbidden, Invalid, NotFound
from app.services.names import check_name

#: A token's last use is written at most this often (a write per request would contend).
LAST_USED_RESOLUTION = timedelta(minutes=1)


class PasswordChangeRequired(Forbidden):
    """A browser session of a user whose password an admin reset: it may do nothing but
    choose a new password (the pages' set-password form) or log out. API tokens are not
    affected."""

    code = "password_change_required"


def normalise_email(email: str) -> str:
    return email.strip().lower()


def validated_email(email: str) -> str:
    """The email, normalised, if it is a valid address (email-validator through pydantic,
    without a DNS look-up); else ``Invalid`` with code ``invalid_email``."""
    email = normalise_email(email)
    shown = email[:200]
    if len(email) > column_width(User, "email"):
        raise Invalid(f"{shown!r}... is not an email address: too long", code="invalid_email")
    try:
        _, address = validate_email(email)
    except PydanticCustomError as exc:
        reason = str(exc).removeprefix("value is not a valid email address: ")
        raise Invalid(
            f"{shown!r} is not an email address: {reason}", code="invalid_email"
        ) from None
    return normalise_email(address)


def create_user(
    *,
    session: Session,
    email: str,
    password: str,
    role: Role,
    adjudicator: bool = False,
    actor: User | None = None,
    via: AccountVia | None = None,
) -> User:
    """A new account; ``adjudicator`` lets a reviewer decide disputed overlap misses. Made
    through the API or the pages (``via``), the account's audit trail starts with it."""
    email = validated_email(email)
    check_new_password(password)
    if session.exec(select(User).where(User.email == email)).first() is not None:
        raise Conflict(f"a user with email {email} exists already", code="user_exists")
    user = User(
        email=email,
        password_hash=security.hash_password(password),
        role=role.value,
        adjudicator=adjudicator,
    )
    with writing(session):
        session.add(user)
        if via is not None:
            session.flush()
            assert user.id is not None
            session.add(
                AccountEvent(
                    actor_id=actor.id if actor is not None else None,
                    user_id=user.id,
                    email=user.email,
                    action=AccountAction.CREATED.value,
                    via=via.value,
                    after=role.value,
                )
            )
    session.refresh(user)
    return user


def list_users(*, session: Session) -> list[User]:
    return list(session.exec(select(User).order_by(col(User.id))))


def get_user(*, session: Session, user_id: int) -> User:
    """The user as the database has it now; 404 ``user_not_found``."""
    user = session.exec(
        select(User).where(col(User.id) == user_id).execution_options(populate_existing=True)
    ).first()
    if user is None:
        raise NotFound(f"no user {user_id}", code="user_not_found")
    return user


def get_user_by_email(*, session: Session, email: str) -> User:
    user = session.exec(select(User).where(User.email == normalise_email(email))).first()
    if user is None:
        raise NotFound(f"no user with email {normalise_email(email)}", code="user_not_found")
    return user


@dataclass(frozen=True)
class Authenticated:
    """A user whose password was checked, and the credential generation of the password
    checked: the session the login starts carries it (``start_session``), so a password
    change or reset that commits meanwhile ends that session too."""

    user: User
    credential_generation: int


def authenticate(*, session: Session, email: str, password: str) -> Authenticated | None:
    """The active user with these credentials, or None (same answer for both mistakes).
    The hash and its generation come from one read of the row."""
    user = session.exec(
        select(User)
        .where(User.email == normalise_email(email))
        .execution_options(populate_existing=True)
    ).first()
    if user is None:
        # Spend the same time as a real check, so response time does not reveal accounts.
        security.verify_nobody(password)
        return None
    checked_hash, generation = user.password_hash, user.credential_generation
    if not user.is_active or not security.verify_password(checked_hash, password):
        return None
    if security.needs_rehash(checked_hash):
        new_hash = security.hash_password(password)
        with writing(session):
            # Only over the hash just checked: a change or reset committed meanwhile wins.
            session.exec(
                update(User)
                .where(col(User.id) == user.id, col(User.password_hash) == checked_hash)
                .values(password_hash=new_hash)
            )
    return Authenticated(user=user, credential_generation=generation)


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    secret: str


def create_token(*, session: Session, user: User, name: str) -> IssuedToken:
    """A new API token; ``secret`` is shown once and never stored."""
    name = check_name(
        name.strip() or "token", what="a token name", max_length=column_width(ApiToken, "name")
    )
    secret = security.new_token()
    assert user.id is not None
    token = ApiToken(
        user_id=user.id,
        name=name,
        prefix=secret[:10],
        token_hash=security.digest(secret),
    )
    with writing(session):
        session.add(token)
    session.refresh(token)
    return IssuedToken(token=token, secret=secret)


def list_tokens(*, session: Session, user: User) -> list[ApiToken]:
    return list(
        session.exec(select(ApiToken).where(ApiToken.user_id == user.id).order_by(col(ApiToken.id)))
    )


def revoke_token(*, session: Session, user: User, token_id: int) -> ApiToken:
    token = session.get(ApiToken, token_id)
    if token is None or (token.user_id != user.id and Role(user.role) is not Role.ADMIN):
        raise NotFound(f"no token {token_id}", code="token_not_found")
    if token.revoked_at is None:
        with writing(session):
            token.revoked_at = utcnow()
            session.add(token)
    return token


def cached_user_for_token(*, session: Session, secret: str) -> User | None:
    """The user of a bearer token from this process's cache alone, without any I/O (the
    request's event loop asks it before it hands the request to a thread): None when
    ``user_for_token`` must answer, because the token is not cached, the revocation check
    is due, or the token's last use is due to be written."""
    entry = auth_cache.cache_for(session).peek(security.digest(secret))
    if entry is None:
        return None
    last_used_at = entry.last_used_at
    if last_used_at is None or utcnow() - last_used_at > LAST_USED_RESOLUTION:
        return None
    return auth_cache.user_of(session, entry)


def user_for_token(*, session: Session, secret: str) -> User | None:
    """The active user a bearer token belongs to; records the token's last use (at most
    once a LAST_USED_RESOLUTION). Look-ups are cached per process (``auth_cache``): a
    revocation reaches every process within about a second."""
    digest = security.digest(secret)
    cache = auth_cache.cache_for(session)
    entry = cache.get(session, digest)
    if entry is None:
        found = session.exec(
            select(ApiToken, User)
            .join(User, col(User.id) == col(ApiToken.user_id))
            .where(ApiToken.token_hash == digest)
        ).first()
        if found is None:
            return None
        token, user = found
        if token.revoked_at is not None or not user.is_active:
            return None
        assert token.id is not None
        cache.put(digest, user, token.id, token.last_used_at)
        entry = cache.get(session, digest)
        token_id, last_used_at = token.id, token.last_used_at
    else:
        user = auth_cache.user_of(session, entry)
        token_id, last_used_at = entry.token_id, entry.last_used_at
    now = utcnow()
    if last_used_at is None or now - last_used_at > LAST_USED_RESOLUTION:
        with writing(session):
            session.exec(
                update(ApiToken).where(col(ApiToken.id) == token_id).values(last_used_at=now)
            )
        if entry is not None:
            entry.last_used_at = now
    return user


class CredentialsChanged(Conflict):
    """409 ``credentials_changed``: the password a login checked was changed or reset before
    its session could start (the login must be made again, with the new password)."""

    code = "credentials_changed"


def start_session(
    *, session: Session, user: User, hours: int, credential_generation: int | None = None
) -> str:
    """A new browser session (a fresh id at every login); returns the id for the cookie.
    ``credential_generation`` is the one ``authenticate`` checked (None: the user's now);
    when a password change or reset has moved it since, no session starts
    (``CredentialsChanged``). A change committed after this one's commit ends the session
    on use (``session_user``), so a login in flight never outlives a change.
    Expired sessions (everyone's) are deleted on the way, so the table holds live ones only."""
    assert user.id is not None
    session_id = security.new_session_id()
    with writing(session):
        now = session.exec(
            select(User.credential_generation).where(col(User.id) == user.id)
        ).first()
        if now is None or (credential_generation is not None and now != credential_generation):
            raise CredentialsChanged("the password was changed meanwhile: log in again")
        session.exec(delete(UserSession).where(col(UserSession.expires_at) <= utcnow()))
        session.add(
            UserSession(
                user_id=user.id,
                token_hash=security.digest(session_id),
                expires_at=utcnow() + timedelta(hours=hours),
                credential_generation=now,
            )
        )
    return session_id


def session_user(*, session: Session, session_id: str) -> User | None:
    """The active user of a live browser session, whether or not they must change their
    password first (the set-password page and logout need them; nothing else does). A
    session started with another credential generation than the user's (a password change
    or reset since) is not live."""
    found = session.exec(
        select(UserSession, User)
        .join(User, col(User.id) == col(UserSession.user_id))
        .where(UserSession.token_hash == security.digest(session_id))
        .execution_options(populate_existing=True)
    ).first()
    if found is None:
        return None
    row, user = found
    if row.expires_at <= utcnow() or row.credential_generation != user.credential_generation:
        return None
    return user if user.is_active else None


def user_for_session(*, session: Session, session_id: str) -> User | None:
    """The active user of a live browser session; ``PasswordChangeRequired`` (403) while an
    admin's reset waits for the user's new password."""
    user = session_user(session=session, session_id=session_id)
    if user is not None and user.must_change_password:
        raise PasswordChangeRequired(
            "your password was reset: choose a new password first (the set-password page), "
            "or use an API token",
        )
    return user


def end_session(*, session: Session, session_id: str) -> None:
    with writing(session):
        session.exec(
            delete(UserSession).where(col(UserSession.token_hash) == security.digest(session_id))
        )
