"""An account's life cycle through the API, on both databases: an admin changes a role, an
activity or the adjudicator flag (PATCH /users/{id}), resets a password
(POST /users/{id}/password-reset); a user changes their own (POST /me/password). A
deactivated user's tokens and sessions are refused at once; the last active admin cannot be
demoted or deactivated, nor an admin deactivate themselves; every change is in the account's
audit trail (GET /users/{id}/events), never a secret. Changes made by hand in SQL reach the
token cache through the database's triggers."""

from __future__ import annotations

import json
import threading
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.http.deps import SESSION_COOKIE
from app.main import create_app
from app.models import Role, UserSession
from app.services.accounts import users as user_service
from app.services.errors import Conflict, Forbidden
from app.settings import Settings
from tests.support.revocation import status_once_the_check_is_due
from tests.support.service import ORIGIN, PASSWORD, Account, login

#: The promise for a change made by hand in SQL: refused by every process within this long.
NEW_PASSWORD = "a brand new passphrase"


def user_id(client: TestClient, admin: Account, email: str) -> int:
    users = client.get("/api/v1/users", headers=admin.headers).json()["items"]
    return next(u["id"] for u in users if u["email"] == email)


def sessions_of(engine: Engine, uid: int) -> int:
    with Session(engine) as session:
        return session.exec(
            select(func.count()).select_from(UserSession).where(col(UserSession.user_id) == uid)
        ).one()


def browser(settings: Settings, engine: Engine, email: str, password: str = PASSWORD) -> TestClient:
    """Another browser on the same app: its own cookie jar, logged in."""
    other = TestClient(create_app(settings, engine), base_url="http://testserver")
    login(other, email, password)
    return other


def test_an_admin_changes_role_activity_and_adjudicator_in_one_patch(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    admin, reviewer = accounts[Role.ADMIN], accounts[Role.REVIEWER]
    uid = user_id(client, admin, reviewer.email)
    changed = client.patch(
        f"/api/v1/users/{uid}", headers=admin.headers, json={"role": "lead", "adjudicator": True}
    )
    assert changed.status_code == 200, changed.text
    body = changed.json()
    assert (body["role"], body["is_active"], body["adjudicator"]) == ("lead", True, True)
    assert body["must_change_password"] is False
    # the older body (the adjudicator flag alone) still works, and leaves the rest alone
    alone = client.patch(
        f"/api/v1/users/{uid}", headers=admin.headers, json={"adjudicator": False}
    ).json()
    assert (alone["role"], alone["adjudicator"]) == ("lead", False)
    off = client.patch(f"/api/v1/users/{uid}", headers=admin.headers, json={"active": False})
    assert off.json()["is_active"] is False
    events = client.get(f"/api/v1/users/{uid}/events", headers=admin.headers).json()
    assert [(e["action"], e["before"], e["after"]) for e in events["items"]] == [
        ("role_changed", "reviewer", "lead"),
        ("adjudicator_changed", "false", "true"),
        ("adjudicator_changed", "true", "false"),
        ("deactivated", "active", "inactive"),
    ]
    assert events["total"] == 4
    assert {(e["actor_email"], e["via"], e["user_id"]) for e in events["items"]} == {
        (admin.email, "api", uid)
    }
    # a lead may not
    refused = client.patch(
        f"/api/v1/users/{uid}", headers=accounts[Role.LEAD].headers, json={"active": True}
    )
    assert refused.status_code == 403
    bad = client.patch(f"/api/v1/users/{uid}", headers=admin.headers, json={"role": "owner"})
    assert bad.status_code == 422
    missing = client.patch("/api/v1/users/9999", headers=admin.headers, json={"active": True})
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "user_not_found")


def test_a_deactivated_user_is_refused_at_once_and_reactivation_restores_tokens(
    client: TestClient, accounts: dict[Role, Account], settings: Settings, engine: Engine
) -> None:
    admin, reviewer = accounts[Role.ADMIN], accounts[Role.REVIEWER]
    uid = user_id(client, admin, reviewer.email)
    other = browser(settings, engine, reviewer.email)
    try:
        assert other.get("/api/v1/me").json()["email"] == reviewer.email
        # the token is looked up and cached
        for _ in range(3):
            assert client.get("/api/v1/me", headers=reviewer.headers).status_code == 200
        assert sessions_of(engine, uid) == 1
        off = client.patch(f"/api/v1/users/{uid}", headers=admin.headers, json={"active": False})
        assert off.status_code == 200
        # at once: no wait for the cache
        refused = client.get("/api/v1/me", headers=reviewer.headers)
        assert (refused.status_code, refused.json()["error"]["code"]) == (401, "invalid_token")
        assert other.get("/api/v1/me").status_code == 401
        assert sessions_of(engine, uid) == 0
        (event,) = [
            e
            for e in client.get(f"/api/v1/users/{uid}/events", headers=admin.headers).json()[
                "items"
            ]
            if e["action"] == "deactivated"
        ]
        assert event["sessions_ended"] == 1
        # a deactivated user cannot log in either
        other.cookies.clear()
        response = other.post(
            "/login",
            data={"email": reviewer.email, "password": PASSWORD},
            headers=ORIGIN,
            follow_redirects=False,
        )
        assert response.status_code == 400
        on = client.patch(f"/api/v1/users/{uid}", headers=admin.headers, json={"active": True})
        assert on.json()["is_active"] is True
        assert client.get("/api/v1/me", headers=reviewer.headers).status_code == 200
    finally:
        other.close()


def test_the_last_active_admin_stays_and_no_admin_deactivates_themselves(
    client: TestClient, accounts: dict[Role, Account], engine: Engine
) -> None:
    admin = accounts[Role.ADMIN]
    me = user_id(client, admin, admin.email)

    def patch(uid: int, body: dict[str, object], who: Account = admin) -> tuple[int, str | None]:
        response = client.patch(f"/api/v1/users/{uid}", headers=who.headers, json=body)
        code = response.json().get("error", {}).get("code") if response.status_code >= 400 else None
        return response.status_code, code

    assert patch(me, {"role": "lead"}) == (409, "last_admin")
    assert patch(me, {"active": False}) == (409, "cannot_deactivate_self")
    assert patch(me, {"role": "admin", "active": False}) == (409, "cannot_deactivate_self")
    # nothing was changed, nothing audited
    assert client.get("/api/v1/me", headers=admin.headers).json()["role"] == "admin"
    assert client.get(f"/api/v1/users/{me}/events", headers=admin.headers).json()["total"] == 0
    # with a second admin, the first may step down; then the second is the last
    lead = accounts[Role.LEAD]
    lead_id = user_id(client, admin, lead.email)
    assert patch(lead_id, {"role": "admin"}) == (200, None)
    assert patch(me, {"role": "reviewer"}, who=lead) == (200, None)
    assert patch(lead_id, {"role": "lead"}, who=lead) == (409, "last_admin")
    assert patch(lead_id, {"active": False}, who=lead) == (409, "cannot_deactivate_self")
    # a deactivated admin does not count as one
    assert patch(me, {"role": "admin"}, who=lead) == (200, None)
    assert patch(me, {"active": False}, who=lead) == (200, None)
    assert patch(lead_id, {"role": "reviewer"}, who=lead) == (409, "last_admin")
    # an inactive admin may be demoted (they leave no admin short)
    assert patch(me, {"role": "lead"}, who=lead) == (200, None)


def test_two_admins_demoting_each_other_at_once_leave_one_admin(
    engine: Engine, accounts: dict[Role, Account]
) -> None:
    """The rule holds under concurrency: the changes are serialised, so of two admins who
    demote each other at the same moment, one succeeds and the other, an admin no more when
    its turn comes, is refused (``forbidden``: the actor is checked again in the turn)."""
    from app.models import AccountVia
    from app.services.accounts import life_cycle

    with Session(engine, expire_on_commit=False) as session:
        first = user_service.get_user_by_email(session=session, email=accounts[Role.ADMIN].email)
        second = user_service.get_user_by_email(session=session, email=accounts[Role.LEAD].email)
        assert first.id is not None
        assert second.id is not None
        life_cycle.update_user(
            session=session, actor=first, user_id=second.id, via=AccountVia.API, role=Role.ADMIN
        )

    def demote(
        start: threading.Barrier, outcomes: list[str], actor_id: int, target_id: int
    ) -> None:
        with Session(engine, expire_on_commit=False) as session:
            actor = user_service.get_user(session=session, user_id=actor_id)
            session.commit()
            start.wait()
            try:
                life_cycle.update_user(
                    session=session,
                    actor=actor,
                    user_id=target_id,
                    via=AccountVia.API,
                    role=Role.LEAD,
                )
                outcomes.append("demoted")
            except (Conflict, Forbidden) as exc:
                outcomes.append(exc.code)

    for _ in range(5):
        start = threading.Barrier(2)
        outcomes: list[str] = []
        threads = [
            threading.Thread(target=demote, args=(start, outcomes, first.id, second.id)),
            threading.Thread(target=demote, args=(start, outcomes, second.id, first.id)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(outcomes) == ["demoted", "forbidden"]
        with Session(engine) as session:
            admins = session.execute(
                text("SELECT id FROM user_account WHERE role = 'admin' AND is_active")
            ).all()
            assert len(admins) == 1
            (left,) = admins
            demoted = second.id if left[0] == first.id else first.id
            promoter = user_service.get_user(session=session, user_id=left[0])
            session.commit()
            life_cycle.update_user(
                session=session,
                actor=promoter,
                user_id=demoted,
                via=AccountVia.API,
                role=Role.ADMIN,
            )


def test_a_password_reset_forces_a_new_password_for_sessions_not_for_tokens(
    client: TestClient, accounts: dict[Role, Account], settings: Settings, engine: Engine
) -> None:
    admin, reviewer = accounts[Role.ADMIN], accounts[Role.REVIEWER]
    uid = user_id(client, admin, reviewer.email)
    before = browser(settings, engine, reviewer.email)
    try:
        reset = client.post(f"/api/v1/users/{uid}/password-reset", headers=admin.headers)
        assert reset.status_code == 200, reset.text
        assert reset.headers["cache-control"] == "no-store"
        body = reset.json()
        temporary = body["temporary_password"]
        assert len(temporary) >= 16
        assert body["user"]["must_change_password"] is True
        # the sessions ended; the old password is gone; the token still works
        assert before.get("/api/v1/me").status_code == 401
        assert sessions_of(engine, uid) == 0
        assert client.get("/api/v1/me", headers=reviewer.headers).json()["email"] == reviewer.email
        before.cookies.clear()
        old = before.post(
            "/login",
            data={"email": reviewer.email, "password": PASSWORD},
            headers=ORIGIN,
            follow_redirects=False,
        )
        assert old.status_code == 400
        # the temporary password logs in, to the set-password page only
        logged_in = before.post(
            "/login",
            data={"email": reviewer.email, "password": temporary, "next": "/golden-sets"},
            headers=ORIGIN,
            follow_redirects=False,
        )
        assert logged_in.status_code == 303
        assert logged_in.headers["location"] == "/account/set-password?next=%2Fgolden-sets"
        held = before.get("/api/v1/me")
        assert (held.status_code, held.json()["error"]["code"]) == (
            403,
            "password_change_required",
        )
        # the token, which kept working, cannot choose the password: the form is the session's
        by_token = client.post(
            "/account/set-password",
            headers=reviewer.headers,
            data={"new": "a token chose this", "confirm": "a token chose this"},
        )
        assert by_token.status_code == 403
        assert client.get("/account/set-password", headers=reviewer.headers).status_code == 403
        # the API's own password change is refused to that session too: the page sets it
        refused = before.post(
            "/api/v1/me/password",
            headers=ORIGIN,
            json={"current": temporary, "new": NEW_PASSWORD},
        )
        assert refused.json()["error"]["code"] == "password_change_required"
        done = before.post(
            "/account/set-password",
            data={"new": NEW_PASSWORD, "confirm": NEW_PASSWORD, "next": "/golden-sets"},
            headers=ORIGIN,
            follow_redirects=False,
        )
        assert (done.status_code, done.headers["location"]) == (303, "/golden-sets")
        assert before.get("/api/v1/me").json()["email"] == reviewer.email
        listed = client.get("/api/v1/users", headers=admin.headers).json()["items"]
        assert {u["email"]: u["must_change_password"] for u in listed}[reviewer.email] is False
        events = client.get(f"/api/v1/users/{uid}/events", headers=admin.headers).json()
        assert [(e["action"], e["sessions_ended"], e["via"]) for e in events["items"]] == [
            ("password_reset", 1, "api"),
            ("password_changed", 0, "page"),
        ]
        assert events["items"][1]["actor_email"] == reviewer.email
        # no secret anywhere in the trail
        trail = json.dumps(events)
        assert temporary not in trail
        assert NEW_PASSWORD not in trail
        assert "argon2" not in trail
    finally:
        before.close()
    again = client.post(f"/api/v1/users/{uid}/password-reset", headers=accounts[Role.LEAD].headers)
    assert again.status_code == 403
    missing = client.post("/api/v1/users/9999/password-reset", headers=admin.headers)
    assert missing.json()["error"]["code"] == "user_not_found"


def test_a_user_changes_their_own_password_and_their_other_sessions_end(
    client: TestClient, accounts: dict[Role, Account], settings: Settings, engine: Engine
) -> None:
    lead = accounts[Role.LEAD]
    login(client, lead.email)
    other = browser(settings, engine, lead.email)
    try:
        wrong = client.post(
            "/api/v1/me/password", headers=ORIGIN, json={"current": "not it", "new": NEW_PASSWORD}
        )
        assert (wrong.status_code, wrong.json()["error"]["code"]) == (400, "wrong_password")
        weak = client.post(
            "/api/v1/me/password", headers=ORIGIN, json={"current": PASSWORD, "new": "password1"}
        )
        assert (weak.status_code, weak.json()["error"]["code"]) == (422, "weak_password")
        same = client.post(
            "/api/v1/me/password", headers=ORIGIN, json={"current": PASSWORD, "new": PASSWORD}
        )
        assert (same.status_code, same.json()["error"]["code"]) == (422, "same_password")
        done = client.post(
            "/api/v1/me/password", headers=ORIGIN, json={"current": PASSWORD, "new": NEW_PASSWORD}
        )
        assert done.status_code == 200, done.text
        assert done.json()["sessions_ended"] == 1
        # this session stays, the other one ended, the token works
        assert client.get("/api/v1/me").json()["email"] == lead.email
        assert other.get("/api/v1/me").status_code == 401
        assert client.get("/api/v1/me", headers=lead.headers).status_code == 200
        assert SESSION_COOKIE in client.cookies
    finally:
        other.close()
    client.cookies.clear()
    login(client, lead.email, NEW_PASSWORD)
    # by token: every browser session ends (the one kept above, and this new one)
    done = client.post(
        "/api/v1/me/password",
        headers=lead.headers,
        json={"current": NEW_PASSWORD, "new": "yet another passphrase"},
    )
    assert done.json()["sessions_ended"] == 2
    assert client.get("/api/v1/me", headers={}).status_code == 401


def test_wrong_current_passwords_are_rate_limited_like_logins(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    reviewer = accounts[Role.REVIEWER]
    codes = [
        client.post(
            "/api/v1/me/password",
            headers=reviewer.headers,
            json={"current": f"guess {n}", "new": NEW_PASSWORD},
        ).json()["error"]["code"]
        for n in range(6)
    ]
    assert codes == ["wrong_password"] * 5 + ["too_many_attempts"]
    refused = client.post(
        "/api/v1/me/password",
        headers=reviewer.headers,
        json={"current": PASSWORD, "new": NEW_PASSWORD},
    )
    assert refused.status_code == 429
    assert refused.json()["error"]["details"]["retry_after"] > 0
    # the login from that address is held by the same count
    response = client.post(
        "/login",
        data={"email": reviewer.email, "password": PASSWORD},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert response.status_code == 429


def test_the_audit_trail_is_for_admins(client: TestClient, accounts: dict[Role, Account]) -> None:
    admin = accounts[Role.ADMIN]
    created = client.post(
        "/api/v1/users",
        headers=admin.headers,
        json={"email": "new@example.com", "password": NEW_PASSWORD, "role": "reviewer"},
    ).json()
    trail = client.get(f"/api/v1/users/{created['id']}/events", headers=admin.headers).json()
    assert [(e["action"], e["after"], e["actor_email"]) for e in trail["items"]] == [
        ("created", "reviewer", admin.email)
    ]
    for role in (Role.LEAD, Role.REVIEWER):
        response = client.get(
            f"/api/v1/users/{created['id']}/events", headers=accounts[role].headers
        )
        assert response.status_code == 403
    missing = client.get("/api/v1/users/9999/events", headers=admin.headers)
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "user_not_found")


def _generation(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(
            connection.execute(text("SELECT generation FROM auth_generation WHERE id = 1")).scalar()
            or 0
        )


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE user_account SET is_active = false WHERE email = :email",
        "UPDATE user_account SET password_hash = 'x', is_active = false WHERE email = :email",
        "UPDATE api_token SET revoked_at = created_at "
        "WHERE user_id = (SELECT id FROM user_account WHERE email = :email)",
        "DELETE FROM api_token WHERE user_id = (SELECT id FROM user_account WHERE email = :email)",
        "DELETE FROM user_account WHERE email = :email",
    ],
    ids=["deactivated", "password-and-activity", "token-revoked", "token-deleted", "user-deleted"],
)
def test_a_change_made_by_hand_in_sql_reaches_a_cached_token_within_the_bound(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, statement: str
) -> None:
    reviewer = accounts[Role.REVIEWER]
    for _ in range(3):
        assert client.get("/api/v1/me", headers=reviewer.headers).status_code == 200
    with engine.begin() as connection:  # by hand: no ORM, no app code
        connection.execute(text(statement), {"email": reviewer.email})
    changed_at = time.monotonic()

    def me() -> int:
        return client.get("/api/v1/me", headers=reviewer.headers).status_code

    assert status_once_the_check_is_due(me, changed_at) == 401
    # other users' tokens are not affected
    assert client.get("/api/v1/me", headers=accounts[Role.LEAD].headers).status_code == 200


def test_the_triggers_move_the_generation_on_credentials_only(
    engine: Engine, accounts: dict[Role, Account]
) -> None:
    email = accounts[Role.REVIEWER].email
    where_token = "WHERE user_id = (SELECT id FROM user_account WHERE email = :email)"
    cases = [
        # a token's last use is written once a minute per token: it must not move anything
        (f"UPDATE api_token SET last_used_at = created_at {where_token}", False),
        ("UPDATE user_account SET email = email WHERE email = :email", False),
        ("UPDATE user_account SET role = role WHERE email = :email", False),  # same value
        ("UPDATE user_account SET role = 'lead' WHERE email = :email", True),
        ("UPDATE user_account SET must_change_password = true WHERE email = :email", True),
        ("UPDATE user_account SET adjudicator = true WHERE email = :email", True),
        ("UPDATE user_account SET password_hash = 'y' WHERE email = :email", True),
        (f"UPDATE api_token SET revoked_at = created_at {where_token}", True),
    ]
    for statement, moves in cases:
        before = _generation(engine)
        with engine.begin() as connection:
            connection.execute(text(statement), {"email": email})
        assert (_generation(engine) > before) is moves, statement


def test_an_admin_demoted_meanwhile_changes_nothing(
    client: TestClient, accounts: dict[Role, Account], engine: Engine
) -> None:
    """The admin a request authenticated may have lost the role before its change runs (a
    change of another admin committed in between): the change is refused, nothing written."""
    from app.models import AccountVia
    from app.services.accounts import life_cycle

    admin, lead = accounts[Role.ADMIN], accounts[Role.LEAD]
    with Session(engine, expire_on_commit=False) as session:
        second = user_service.create_user(
            session=session, email="second@example.com", password=PASSWORD, role=Role.ADMIN
        )
        actor = user_service.get_user_by_email(session=session, email=admin.email)
    # as the request saw it: an admin; then another admin demotes them
    demoted = client.patch(
        f"/api/v1/users/{actor.id}",
        headers={"Authorization": f"Bearer {_token(engine, second.email)}"},
        json={"role": "lead"},
    )
    assert demoted.status_code == 200, demoted.text
    with Session(engine) as session:
        target = user_service.get_user_by_email(session=session, email=lead.email).id
    assert target is not None
    with Session(engine, expire_on_commit=False) as session, pytest.raises(Forbidden):
        life_cycle.update_user(
            session=session, actor=actor, user_id=target, via=AccountVia.API, active=False
        )
    with Session(engine) as session:
        assert user_service.get_user(session=session, user_id=target).is_active


def _token(engine: Engine, email: str) -> str:
    with Session(engine, expire_on_commit=False) as session:
        user = user_service.get_user_by_email(session=session, email=email)
        return user_service.create_token(session=session, user=user, name="t").secret
