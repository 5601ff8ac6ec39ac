"""An account's life cycle after its creation: an admin changes a user's role, activity or
adjudicator flag or resets their password; a user changes their own password. Every change
writes an ``account_event`` (the append-only audit trail) in the change's own transaction.

The rules, kept here for the API, the pages and the command line alike:
- nobody demotes or deactivates the last active admin (409 ``last_admin``), and no admin
  deactivates themselves (409 ``cannot_deactivate_self``);
- a deactivated user's browser sessions are deleted and their API tokens refused at once (the
  change goes through the ORM, whose flush moves the auth generation: auth_cache); the tokens
  are not revoked, so a reactivated user's tokens work again;
- a reset sets a temporary password (shown once, never stored but as its hash), ends the
  user's sessions and makes their next browser session choose a new password before anything
  else (``users.PasswordChangeRequired``); API tokens keep working;
- a password change ends every other browser session of the user (the caller's stays).

Changes that touch admins are serialised (SQLite: the write transaction; PostgreSQL: a
transaction-scoped advisory lock), so two admins demoting each other at once cannot leave the
service without one. Never touches golden sets, runs or triages.
"""

from __future__ import annotations

import secrets
from datetime import datetime

from sqlalchemy import func, text
from sqlalchemy.orm import aliased
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
    utcnow,
)
from app.models.users import AccountEventPublic
from app.services.accounts import auth_cache, logins, users
from app.services.accounts.passwords import check_new_password
from app.services.errors import BadInput, Conflict, Forbidden, Invalid, ServiceError

#: Random bytes of a temporary password (20 URL-safe characters).
TEMPORARY_PASSWORD_BYTES = 15
#: The PostgreSQL advisory lock key that serialises account changes ("accounts" in ASCII).
_ACCOUNTS_LOCK = 0x6163636F756E7473


class TooManyWrongPasswords(ServiceError):
    """429 ``too_many_attempts``: the login limit reached by wrong current passwords (and
    failed logins); ``headers`` carry Retry-After."""

    status = 429
    code = "too_many_attempts"

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            f"too many wrong passwords: try again in {retry_after} s",
            details={"retry_after": retry_after},
        )
        self.headers = {"Retry-After": str(retry_after)}


def _serialise(session: Session, actor: User | None) -> None:
    """Inside ``writing``: wait for any other account change to commit (SQLite's write
    transaction already does: BEGIN IMMEDIATE); then the acting admin must still be one (a
    change committed meanwhile may have demoted or deactivated them: 403 ``forbidden``).
    ``actor`` None: the command line, run by whoever runs the server."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _ACCOUNTS_LOCK})
    if actor is not None:
        assert actor.id is not None
        now = session.exec(
            select(User.role, User.is_active).where(col(User.id) == actor.id)
        ).first()
        if now is None or now[0] != Role.ADMIN.value or not now[1]:
            raise Forbidden("this needs the admin role", code="forbidden")


def _fresh_user(session: Session, user_id: int) -> User:
    """The user as the database has it now (never the session's earlier copy)."""
    return users.get_user(session=session, user_id=user_id)


def _other_active_admins(session: Session, user_id: int) -> int:
    return session.exec(
        select(func.count())
        .select_from(User)
        .where(
            col(User.role) == Role.ADMIN.value,
            col(User.is_active).is_(True),
            col(User.id) != user_id,
        )
    ).one()


def end_sessions(session: Session, user_id: int, *, keep: str | None = None) -> int:
    """Inside ``writing``: delete the user's browser sessions but the one whose id is
    ``keep``; how many were deleted."""
    where = [col(UserSession.user_id) == user_id]
    if keep is not None:
        where.append(col(UserSession.token_hash) != security.digest(keep))
    ended = len(session.exec(select(UserSession.id).where(*where)).all())
    session.exec(delete(UserSession).where(*where))
    return ended


def _new_credentials(session: Session, user: User, password_hash: str, *, keep: str | None) -> int:
    """Inside ``writing``, the change serialised: the user's new password hash and the next
    credential generation. Every browser session of the user ends but ``keep`` (moved to
    the new generation); a session a login in flight starts with the old password later
    carries the old generation and is refused on use (``users.session_user``). How many
    sessions ended."""
    user.password_hash = password_hash
    user.credential_generation += 1
    session.add(user)
    ended = end_sessions(session, user.id or 0, keep=keep)
    if keep is not None:
        session.exec(
            update(UserSession)
            .where(col(UserSession.token_hash) == security.digest(keep))
            .values(credential_generation=user.credential_generation)
        )
    return ended


def _revoke_tokens(session: Session, user_id: int) -> int:
    """Inside ``writing``: revoke every live API token of the user; how many."""
    live = [col(ApiToken.user_id) == user_id, col(ApiToken.revoked_at).is_(None)]
    # counted by the UPDATE itself: a token committed meanwhile is revoked and counted
    revoked = int(session.exec(update(ApiToken).where(*live).values(revoked_at=utcnow())).rowcount)
    if revoked:
        auth_cache.bump(session)
        auth_cache.cache_for(session).expire()
    return revoked


def _event(
    session: Session,
    *,
    actor: User | None,
    user: User,
    action: AccountAction,
    via: AccountVia,
    before: str | None = None,
    after: str | None = None,
    sessions_ended: int = 0,
) -> None:
    assert user.id is not None
    session.add(
        AccountEvent(
            actor_id=actor.id if actor is not None else None,
            user_id=user.id,
            email=user.email,
            action=action.value,
            via=via.value,
            before=before,
            after=after,
            sessions_ended=sessions_ended,
        )
    )


def _active(value: bool) -> str:
    return "active" if value else "inactive"


def update_user(
    *,
    session: Session,
    actor: User | None,
    user_id: int,
    via: AccountVia,
    role: Role | None = None,
    active: bool | None = None,
    adjudicator: bool | None = None,
) -> User:
    """Change a user's role, activity or adjudicator flag (None: unchanged); each change an
    event. ``actor`` is the admin (None from the command line). 404 ``user_not_found``; 409
    ``last_admin`` when no active admin would be left, ``cannot_deactivate_self``."""
    with writing(session):
        _serialise(session, actor)
        user = _fresh_user(session, user_id)
        was_role, was_active = Role(user.role), user.is_active
        new_role = was_role if role is None else role
        new_active = was_active if active is None else active
        if was_active and not new_active and actor is not None and actor.id == user.id:
            raise Conflict(
                "you cannot deactivate your own account: another admin can",
                code="cannot_deactivate_self",
            )
        stays_admin = new_role is Role.ADMIN and new_active
        if (
            was_role is Role.ADMIN
            and was_active
            and not stays_admin
            and _other_active_admins(session, user_id) == 0
        ):
            raise Conflict(
                f"{user.email} is the last active admin: make another user admin first",
                code="last_admin",
            )
        if new_role is not was_role:
            user.role = new_role.value
            _event(
                session,
                actor=actor,
                user=user,
                action=AccountAction.ROLE_CHANGED,
                via=via,
                before=was_role.value,
                after=new_role.value,
            )
        if adjudicator is not None and adjudicator != user.adjudicator:
            _event(
                session,
                actor=actor,
                user=user,
                action=AccountAction.ADJUDICATOR_CHANGED,
                via=via,
                before=str(user.adjudicator).lower(),
                after=str(adjudicator).lower(),
            )
            user.adjudicator = adjudicator
        if new_active != was_active:
            user.is_active = new_active
            ended = 0 if new_active else end_sessions(session, user_id)
            _event(
                session,
                actor=actor,
                user=user,
                action=AccountAction.REACTIVATED if new_active else AccountAction.DEACTIVATED,
                via=via,
                before=_active(was_active),
                after=_active(new_active),
                sessions_ended=ended,
            )
        session.add(user)
    return user


def reset_password(
    *,
    session: Session,
    actor: User | None,
    user_id: int,
    via: AccountVia,
    revoke_tokens: bool = False,
) -> tuple[User, str, int]:
    """Give the user a temporary password (returned, to be shown once), end their browser
    sessions (logins in flight with the old password included) and make their next one
    choose a new password; with ``revoke_tokens`` also revoke their API tokens (the
    password leaked). Returns the user, the temporary password and how many tokens were
    revoked. 404 ``user_not_found``."""
    temporary = secrets.token_urlsafe(TEMPORARY_PASSWORD_BYTES)
    password_hash = security.hash_password(temporary)  # slow: before the write lock
    with writing(session):
        _serialise(session, actor)
        user = _fresh_user(session, user_id)
        user.must_change_password = True
        ended = _new_credentials(session, user, password_hash, keep=None)
        revoked = _revoke_tokens(session, user_id) if revoke_tokens else 0
        session.add(
            AccountEvent(
                actor_id=actor.id if actor is not None else None,
                user_id=user_id,
                email=user.email,
                action=AccountAction.PASSWORD_RESET.value,
                via=via.value,
                sessions_ended=ended,
                tokens_revoked=revoked,
            )
        )
    return user, temporary, revoked


def _live_session(session: Session, user: User, session_id: str) -> bool:
    """Inside ``writing``: whether the browser session is still one of the user's, of their
    current credential generation (a reset committed since the request began ended it)."""
    found = session.exec(
        select(UserSession.id).where(
            col(UserSession.token_hash) == security.digest(session_id),
            col(UserSession.user_id) == user.id,
            col(UserSession.credential_generation) == user.credential_generation,
        )
    ).first()
    return found is not None


def _set_password(
    session: Session,
    user_id: int,
    new: str,
    *,
    keep: str | None,
    via: AccountVia,
    pending: bool = False,
) -> int:
    """The new password, re-checked inside the serialised change: the caller's browser
    session (``keep``) must still be live (409 ``credentials_changed`` when a reset ended it
    meanwhile) and, for the set-password page (``pending``), a reset must still wait."""
    password_hash = security.hash_password(new)  # slow: before the write lock
    with writing(session):
        _serialise(session, None)  # after a reset committed meanwhile, never before it
        user = _fresh_user(session, user_id)
        if keep is not None and not _live_session(session, user, keep):
            raise users.CredentialsChanged(
                "this session ended: the password was changed or reset meanwhile; log in again"
            )
        if pending and not user.must_change_password:
            raise Conflict("no password change is pending", code="no_password_change_pending")
        user.must_change_password = False
        ended = _new_credentials(session, user, password_hash, keep=keep)
        _event(
            session,
            actor=user,
            user=user,
            action=AccountAction.PASSWORD_CHANGED,
            via=via,
            sessions_ended=ended,
        )
    return ended


def change_password(
    *,
    session: Session,
    user_id: int,
    current: str,
    new: str,
    keep_session: str | None,
    via: AccountVia,
    address: str,
    now: datetime,
    policy: logins.LoginPolicy,
) -> int:
    """The user changes their own password; every browser session of theirs but
    ``keep_session`` ends (how many is returned). A wrong ``current`` counts as a failed
    login of the user's email from ``address``: 400 ``wrong_password``, and once the login
    limit is reached 429 ``too_many_attempts``. A new password that the policy refuses or
    that is the current one: 422 ``weak_password`` / ``same_password``."""
    user = _fresh_user(session, user_id)
    wait = logins.retry_after(
        session=session, email=user.email, address=address, now=now, policy=policy
    )
    if wait is not None:
        raise TooManyWrongPasswords(wait)
    if not security.verify_password(user.password_hash, current):
        logins.record_failure(
            session=session, email=user.email, address=address, now=now, policy=policy
        )
        raise BadInput("the current password is not right", code="wrong_password")
    logins.clear_failures(session=session, email=user.email, address=address)
    check_new_password(new)
    if new == current:
        raise Invalid("the new password is the current one", code="same_password")
    return _set_password(session, user_id, new, keep=keep_session, via=via)


def set_required_password(
    *, session: Session, user_id: int, new: str, keep_session: str | None
) -> int:
    """After an admin's reset: the user's new password, in place of the temporary one (the
    session that asks proved it with its login). 409 ``no_password_change_pending`` when
    no reset waits; 422 ``weak_password`` / ``same_password``."""
    user = _fresh_user(session, user_id)
    if not user.must_change_password:
        raise Conflict("no password change is pending", code="no_password_change_pending")
    check_new_password(new)
    if security.verify_password(user.password_hash, new):
        raise Invalid("choose a password of your own, not the temporary one", code="same_password")
    return _set_password(
        session, user_id, new, keep=keep_session, via=AccountVia.PAGE, pending=True
    )


def list_events(
    *, session: Session, user_id: int | None = None, limit: int | None = None
) -> list[AccountEventPublic]:
    """The audit trail: of one user oldest first (404 ``user_not_found``), or of everyone
    newest first (``limit`` events at most)."""
    if user_id is not None:
        _fresh_user(session, user_id)
    actor = aliased(User)
    query = select(AccountEvent, actor.email).outerjoin(
        actor, col(actor.id) == col(AccountEvent.actor_id)
    )
    if user_id is not None:
        query = query.where(col(AccountEvent.user_id) == user_id).order_by(col(AccountEvent.id))
    else:
        query = query.order_by(col(AccountEvent.id).desc())
    if limit is not None:
        query = query.limit(limit)
    return [
        AccountEventPublic.model_validate(
            {
                "id": event.id,
                "at": event.at,
                "user_id": event.user_id,
                "email": event.email,
                "actor_id": event.actor_id,
                "actor_email": actor_email,
                "action": event.action,
                "via": event.via,
                "before": event.before,
                "after": event.after,
                "sessions_ended": event.sessions_ended,
                "tokens_revoked": event.tokens_revoked,
            }
        )
        for event, actor_email in session.exec(query)
    ]
