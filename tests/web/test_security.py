"""Security of the UI and the API: CSRF on every cookie-authenticated write, session ids rotated
at login, revoked tokens refused, what a reviewer may not do, and the security headers on
every kind of answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, select

from app.http.deps import SAFE_METHODS, SESSION_COOKIE
from app.main import create_app
from app.models import Miss, Role
from app.services.accounts import users as user_service
from app.settings import Settings
from tests.support.routes import REVIEW_ACTIONS, REVIEW_FORM, concrete, routes
from tests.support.service import ORIGIN, PASSWORD, Account, login
from tests.support.triage import make_triage

SQLITE = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

CROSS_SITE = [
    {},  # no Origin, no Referer, no Sec-Fetch-Site: a form post from an old browser or a tool
    {"Origin": "https://evil.example"},
    {"Referer": "https://evil.example/page"},
    {"Origin": "http://testserver.evil.example"},
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},  # a sibling subdomain is another origin
    {"Sec-Fetch-Site": "cross-site", "Origin": "http://testserver"},  # the browser's word wins
]


def all_rows(engine: Engine) -> dict[str, int]:
    with Session(engine) as session:
        return {
            name: session.exec(select(func.count()).select_from(table)).one()
            for name, table in SQLModel.metadata.tables.items()
        }


@SQLITE
def test_every_cookie_authenticated_write_refuses_cross_site_requests(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    make_triage(engine, tmp_path, queries=2, per_query=2)
    login(client, accounts[Role.ADMIN].email)
    before = all_rows(engine)
    checked = set()
    for route in routes(client):
        if route.name in ("login", "logout"):
            continue
        for method in sorted(route.methods - SAFE_METHODS):
            for headers in CROSS_SITE:
                response = client.request(
                    method,
                    concrete(route.path),
                    headers=headers,
                    data=REVIEW_FORM if route.name in REVIEW_ACTIONS else None,
                    follow_redirects=False,
                )
                where = f"{method} {route.path} {headers}"
                assert response.status_code == 403, where
                if route.path.startswith("/api/"):
                    assert response.json()["error"]["code"] == "csrf_failed", where
                else:  # a person gets the error page, in the product's layout
                    assert response.headers["x-error-code"] == "csrf_failed", where
                    assert response.headers["content-type"].startswith("text/html"), where
            checked.add(route.name)
    assert len(checked) > 20
    assert all_rows(engine) == before
    # The session is still good: the refusals were about the requests, not the cookie.
    assert client.get("/api/v1/me").json()["role"] == "admin"


@SQLITE
def test_logout_and_login_refuse_cross_site_requests(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    login(client, accounts[Role.LEAD].email)
    response = client.post("/logout", headers={"Origin": "https://evil.example"})
    assert response.status_code == 403
    assert client.get("/api/v1/me").status_code == 200  # still logged in
    client.cookies.clear()
    response = client.post(
        "/login",
        data={"email": accounts[Role.LEAD].email, "password": PASSWORD},
        headers={"Origin": "https://evil.example"},
        follow_redirects=False,
    )
    assert response.status_code == 403
    assert response.headers["x-error-code"] == "csrf_failed"
    assert SESSION_COOKIE not in client.cookies


@SQLITE
def test_same_origin_writes_pass_and_tokens_need_no_origin(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    """The check refuses cross-site requests, not writes: our own pages and API clients pass."""
    login(client, accounts[Role.REVIEWER].email)
    for headers in (ORIGIN, {"Referer": "http://testserver/tokens"}, {"Sec-Fetch-Site": "none"}):
        response = client.post("/api/v1/tokens", headers=headers, json={"name": "mine"})
        assert response.status_code == 201, headers
    client.cookies.clear()
    response = client.post(
        "/api/v1/tokens", headers=accounts[Role.REVIEWER].headers, json={"name": "script"}
    )
    assert response.status_code == 201


@SQLITE
def test_login_rotates_the_session_id_and_ends_the_old_one(
    client: TestClient, accounts: dict[Role, Account], engine: Engine
) -> None:
    lead, reviewer = accounts[Role.LEAD].email, accounts[Role.REVIEWER].email

    def me(cookie: str) -> int:
        """The status of /api/v1/me for a browser holding only this session cookie."""
        with TestClient(client.app, cookies={SESSION_COOKIE: cookie}) as browser:
            return browser.get("/api/v1/me").status_code

    # Fixation: a session id planted in the victim's browser (here the attacker's own valid
    # session) is replaced at login, and the planted one ends.
    login(client, reviewer)
    planted = client.cookies[SESSION_COOKIE]
    assert me(planted) == 200
    login(client, lead)
    fresh = client.cookies[SESSION_COOKIE]
    assert fresh != planted
    assert client.get("/api/v1/me").json()["email"] == lead
    assert me(planted) == 401
    login(client, lead)  # the same user logging in again gets a new id too
    assert client.cookies[SESSION_COOKIE] != fresh
    assert me(fresh) == 401
    assert me(client.cookies[SESSION_COOKIE]) == 200
    # A forged cookie (not signed with our key) counts as no cookie.
    assert me("forged.value") == 401
    with Session(engine) as session:
        user = user_service.get_user_by_email(session=session, email=lead)
        active = user_service.start_session(session=session, user=user, hours=1)
    # A raw, unsigned session id is refused even when it exists.
    assert me(active) == 401


@SQLITE
def test_revoked_tokens_are_refused(client: TestClient, accounts: dict[Role, Account]) -> None:
    reviewer, admin = accounts[Role.REVIEWER], accounts[Role.ADMIN]
    created = client.post("/api/v1/tokens", headers=reviewer.headers, json={"name": "laptop"})
    token = created.json()
    bearer = {"Authorization": f"Bearer {token['token']}"}
    assert client.get("/api/v1/me", headers=bearer).status_code == 200
    revoked = client.delete(f"/api/v1/tokens/{token['id']}", headers=bearer)
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    for method, url in (("GET", "/api/v1/me"), ("POST", "/api/v1/tokens")):
        response = client.request(method, url, headers=bearer, json={"name": "again"})
        assert response.status_code == 401, url
        assert response.json()["error"]["code"] == "invalid_token"
    # A reviewer cannot revoke someone else's token (it is not even there for them) ...
    lead_tokens = client.get("/api/v1/tokens", headers=accounts[Role.LEAD].headers).json()
    lead_token = lead_tokens["items"][0]["id"]
    refused = client.delete(f"/api/v1/tokens/{lead_token}", headers=reviewer.headers)
    assert refused.status_code == 404
    assert client.get("/api/v1/me", headers=accounts[Role.LEAD].headers).status_code == 200
    # ... an admin can, and then it is refused.
    assert client.delete(f"/api/v1/tokens/{lead_token}", headers=admin.headers).status_code == 200
    assert client.get("/api/v1/me", headers=accounts[Role.LEAD].headers).status_code == 401


def second_reviewer(engine: Engine) -> Account:
    with Session(engine, expire_on_commit=False) as session:
        user = user_service.create_user(
            session=session, email="other@example.com", password=PASSWORD, role=Role.REVIEWER
        )
        secret = user_service.create_token(session=session, user=user, name="t").secret
    return Account("other@example.com", Role.REVIEWER, secret)


@SQLITE
def test_a_reviewer_cannot_relabel_or_release_anothers_work(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=3)
    first, other = accounts[Role.REVIEWER], second_reviewer(engine)
    claim = f"/api/v1/triages/{triage.id}/claim"
    labelled = client.post(claim, headers=first.headers).json()
    body = {"category": "not-indexed", "note": "", "version": 1}
    label = f"/api/v1/misses/{labelled['id']}/label"
    assert client.post(label, headers=first.headers, json=body).status_code == 200
    held = client.post(claim, headers=first.headers).json()  # leased to the first reviewer

    label_v1 = {"category": "chunk-boundary", "note": "", "version": 1}
    label_v2 = {"category": "chunk-boundary", "note": "", "version": 2}
    attempts = [
        (labelled, "label", label_v2, 403, "lead_required"),
        (labelled, "label", label_v1, 409, "stale_version"),
        (labelled, "release", None, 403, "lease_not_held"),
        (labelled, "skip", {"reason": "mine now"}, 403, "lease_not_held"),
        (held, "label", label_v1, 403, "lease_not_held"),
        (held, "release", None, 403, "lease_not_held"),
        (held, "skip", {"reason": "mine now"}, 403, "lease_not_held"),
        (held, "renew", None, 403, "lease_not_held"),
    ]
    for miss, action, payload, status, code in attempts:
        response = client.post(
            f"/api/v1/misses/{miss['id']}/{action}", headers=other.headers, json=payload
        )
        assert response.status_code == status, (action, response.text)
        assert response.json()["error"]["code"] == code, action
    # Through the pages: the lead's relabel form, and the review form with someone else's miss.
    login(client, other.email)
    relabel = client.post(
        f"/misses/{labelled['id']}/relabel",
        headers=ORIGIN,
        data={"category": "chunk-boundary", "version": "2"},
    )
    assert relabel.status_code == 403
    review = client.post(
        f"/triages/{triage.id}/review/label",
        headers={"HX-Request": "true", **ORIGIN},
        data={"miss_id": str(held["id"]), "version": "1", "category": "chunk-boundary"},
    )
    assert review.status_code == 403
    assert "NOT saved" in review.text
    with Session(engine) as session:
        saved = session.get(Miss, labelled["id"])
        kept = session.get(Miss, held["id"])
        assert saved is not None
        assert kept is not None
        assert (saved.category, saved.version) == ("not-indexed", 2)
        assert (kept.category, kept.lease_holder_id) == (None, saved.labelled_by_id)


@SQLITE
def test_a_reviewer_cannot_export_or_see_admin_pages(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1)
    reviewer, lead = accounts[Role.REVIEWER], accounts[Role.LEAD]
    export = {"tracker": "github", "target": "acme/search", "dry_run": True}
    admin = {"email": "x@y.z", "password": "p" * 9, "role": "admin"}
    refused = [
        ("POST", f"/api/v1/triages/{triage.id}/exports", reviewer, export),
        ("GET", "/api/v1/users", reviewer, None),
        (
            "POST",
            "/api/v1/users",
            reviewer,
            {"email": "x@y.z", "password": "p" * 9, "role": "admin"},
        ),
        ("GET", "/api/v1/users", lead, None),
        ("POST", "/api/v1/users", lead, admin),
    ]
    for method, url, who, body in refused:
        response = client.request(method, url, headers=who.headers, json=body)
        assert response.status_code == 403, (who.role, method, url)
        assert response.json()["error"]["code"] == "forbidden"
    login(client, reviewer.email)
    page = client.post(
        f"/triages/{triage.id}/exports",
        headers=ORIGIN,
        data={"tracker": "github", "target": "acme/search", "action": "preview"},
    )
    assert page.status_code == 403
    assert (
        BeautifulSoup(client.get(f"/triages/{triage.id}").text, "html.parser").select(
            "#export form"
        )
        == []
    )
    login(client, lead.email)
    assert BeautifulSoup(client.get(f"/triages/{triage.id}").text, "html.parser").select(
        "#export form"
    )
    with Session(engine) as session:
        assert [u.email for u in user_service.list_users(session=session)] == [
            "reviewer@example.com",
            "lead@example.com",
            "admin@example.com",
        ]


SCRIPT_SRC_FORBIDDEN = ("'unsafe-inline'", "'unsafe-eval'", "*", "data:", "http:", "https:")


def check_headers(headers: object, where: str) -> None:
    get = headers.get  # type: ignore[attr-defined]
    policy = {
        part.split()[0]: part.split()[1:]
        for part in get("content-security-policy", "").split(";")
        if part.strip()
    }
    scripts = policy.get("script-src", policy.get("default-src"))
    assert scripts, where
    assert not set(scripts) & set(SCRIPT_SRC_FORBIDDEN), where
    assert policy.get("frame-ancestors") == ["'none'"], where
    assert policy.get("object-src") == ["'none'"], where
    assert policy.get("base-uri") == ["'none'"], where
    assert get("x-content-type-options") == "nosniff", where
    assert get("x-frame-options") == "DENY", where
    assert get("referrer-policy") in ("no-referrer", "same-origin", "strict-origin"), where


@SQLITE
def test_security_headers_on_every_kind_of_answer(
    client: TestClient, accounts: dict[Role, Account], settings: Settings, engine: Engine
) -> None:
    lead = accounts[Role.LEAD]
    answers = {
        "login page": client.get("/login"),
        "redirect to login": client.get("/golden-sets", follow_redirects=False),
        "static file": client.get("/static/app.js"),
        "api 401": client.get("/api/v1/me"),
        "api 200": client.get("/api/v1/me", headers=lead.headers),
        "api 404": client.get("/api/v1/runs/999", headers=lead.headers),
        "api 422": client.get("/api/v1/runs/x", headers=lead.headers),
        "openapi": client.get("/openapi.json", headers=lead.headers),
        "healthz": client.get("/healthz"),
        "no such path": client.get("/nope"),
    }
    login(client, lead.email)
    answers["html page"] = client.get("/golden-sets")
    answers["htmx fragment"] = client.get("/golden-sets", headers={"HX-Request": "true"})
    small = create_app(settings.model_copy(update={"upload_max_bytes": 100}), engine)
    with TestClient(small) as limited:
        answers["413"] = limited.post(
            "/api/v1/golden-sets", headers=lead.headers, content=b"x" * 1000
        )
    assert answers["413"].status_code == 413
    for where, response in answers.items():
        check_headers(response.headers, where)


def test_templates_hold_no_inline_script_or_handler() -> None:
    """What the policy forbids is not in our own markup either (it would be blocked)."""
    import re

    from app.migrate import resource_dir

    for template in Path(resource_dir("templates")).glob("*.html"):
        text = template.read_text()
        for tag in re.findall(r"<script\b[^>]*>", text):
            assert "src=" in tag, template.name
        assert re.search(r"\son[a-z]+\s*=", text) is None, template.name
        assert "javascript:" not in text, template.name
