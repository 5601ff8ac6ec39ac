"""No server-side request forgery: webhook URLs and tracker URLs that reach the local network
(loopback in every spelling, private, link-local and the metadata address, CGNAT, unique-local,
unspecified, multicast, IPv4-mapped IPv6) are refused when configured (422 with a code) and
again right before each connection; MISSTRIAGE_ALLOW_LOCAL_NETWORK allows them. Only the fake
tracker on 127.0.0.1 is ever connected to."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.exporters import Sender
from app.exporters.outbound import AddressRefused, check_url, client
from app.main import create_app
from app.models import GoldenSet, Role, WebhookDelivery
from app.services.delivery import events
from app.settings import Settings
from tests.support.fake_tracker import SECRET, TOKEN, Fault, Tracker, serve
from tests.support.service import Account
from tests.support.triage import make_triage

#: Refused by default: every one of them reaches this machine or its private networks.
LOCAL = [
    "http://127.0.0.1/",
    "http://127.0.0.1:8000/hook",
    "http://127.1/",
    "http://2130706433/",  # decimal
    "http://0x7f.1/",  # hex
    "http://0x7f000001/",
    "http://017700000001/",  # octal
    "http://0177.0.0.1/",
    "http://0/",
    "http://0.0.0.0/",
    "http://[::1]/",
    "http://[::]/",
    "http://[::ffff:127.0.0.1]/",  # IPv4-mapped IPv6
    "http://[::ffff:7f00:1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::127.0.0.1]/",  # IPv4-compatible
    "http://localhost/",
    "http://LOCALHOST./",
    "http://api.localhost/",
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata
    "http://[fe80::1]/",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",  # CGNAT
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",  # unique local
    "http://224.0.0.1/",  # multicast
    "http://[ff02::1]/",
    "http://240.0.0.1/",  # reserved
    "http://255.255.255.255/",
    "http://198.18.0.1/",
    "https://127.0.0.1:443/",
]
#: Refused whatever the setting: not http(s), credentials, no host, spaces.
MALFORMED = [
    "ftp://93.184.216.34/",
    "file:///etc/passwd",
    "gopher://93.184.216.34/",
    "javascript:alert(1)",
    "http://user:pass@93.184.216.34/",
    "http://token@93.184.216.34/",
    "http:///path",
    "http://93.184.216.34/a b",
    "http://93.184.216.34/\r\nHost: x",
]
PUBLIC = ["http://93.184.216.34/hook", "https://[2606:2800:220:1::]/x", "https://hooks.test/x"]


@pytest.mark.parametrize("url", LOCAL)
def test_local_addresses_refused_by_default_allowed_with_the_setting(url: str) -> None:
    with pytest.raises(AddressRefused) as refused:
        check_url(url, allow_local=False)
    assert refused.value.code == "url_refused"
    assert "MISSTRIAGE_ALLOW_LOCAL_NETWORK" in refused.value.message
    check_url(url, allow_local=True)


@pytest.mark.parametrize("url", MALFORMED)
def test_malformed_urls_refused_whatever_the_setting(url: str) -> None:
    for allow in (False, True):
        with pytest.raises(AddressRefused) as refused:
            check_url(url, allow_local=allow)
        assert refused.value.code == "bad_url"
        assert "pass" not in refused.value.message  # no credential echoed


@pytest.mark.parametrize("url", PUBLIC)
def test_public_urls_pass(url: str) -> None:
    check_url(url, allow_local=False)  # no exception; nothing is connected to


@pytest.fixture
def fake() -> Iterator[tuple[str, Tracker]]:
    yield from serve()


def test_api_refuses_local_webhooks_with_a_code(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    golden, _, _ = make_triage(engine, tmp_path, queries=1, per_query=1)
    lead = accounts[Role.LEAD].headers
    for url in [*LOCAL, *MALFORMED]:
        answer = client.put(
            f"/api/v1/golden-sets/{golden.id}/webhook",
            headers=lead,
            json={"url": url, "events": ["miss.labelled"]},
        )
        assert answer.status_code == 422, (url, answer.text)
        assert answer.json()["error"]["code"] in ("url_refused", "bad_url"), url
    with Session(engine) as session:
        assert session.get(GoldenSet, golden.id).webhook_url is None  # type: ignore[union-attr]
    public = client.put(
        f"/api/v1/golden-sets/{golden.id}/webhook",
        headers=lead,
        json={"url": PUBLIC[0], "events": ["miss.labelled"]},
    )
    assert public.status_code == 200, public.text


def test_form_refuses_the_metadata_address(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    from tests.support.service import ORIGIN, login

    golden, _, _ = make_triage(engine, tmp_path, queries=1, per_query=1)
    login(client, accounts[Role.LEAD].email)
    answer = client.post(
        f"/golden-sets/{golden.id}/settings",
        headers=ORIGIN,
        data={
            "causes": ", ".join(golden.causes),
            "webhook_url": "http://169.254.169.254/latest/meta-data/",
            "webhook_events": ["miss.labelled"],
        },
        follow_redirects=False,
    )
    # post/redirect/get: the code on the redirect, the message on the page it leads to
    assert answer.status_code == 303
    assert answer.headers["x-error-code"] == "url_refused"
    page = client.get(answer.headers["location"])
    assert "local-network address" in page.text
    assert 'data-flash="error"' in page.text


def test_export_to_a_local_tracker_is_refused_before_any_request(
    settings: Settings,
    engine: Engine,
    accounts: dict[Role, Account],
    tmp_path: Path,
    fake: tuple[str, Tracker],
) -> None:
    base, tracker = fake
    _, _, triage = make_triage(engine, tmp_path, queries=1, per_query=1)
    overrides = {
        "github_api_url": base,
        "github_token": SecretStr(TOKEN),
        "webhook_secret": SecretStr(SECRET),
        "webhook_poll_seconds": 0,
    }
    refusing = settings.model_copy(update=overrides)
    with TestClient(create_app(refusing, engine)) as api:
        for tracker_name, target in (("github", "acme/search"), ("webhook", f"{base}/hook")):
            answer = api.post(
                f"/api/v1/triages/{triage.id}/exports",
                headers=accounts[Role.LEAD].headers,
                json={"tracker": tracker_name, "target": target, "dry_run": False},
            )
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["code"] == "url_refused"
    assert tracker.requests == []
    allowing = settings.model_copy(update=overrides | {"allow_local_network": True})
    with TestClient(create_app(allowing, engine)) as api:
        answer = api.post(
            f"/api/v1/triages/{triage.id}/exports",
            headers=accounts[Role.LEAD].headers,
            json={"tracker": "github", "target": "acme/search", "dry_run": False},
        )
        assert answer.status_code == 200, answer.text  # allowed (no miss labelled: no issue)


def test_send_time_check_refuses_a_url_stored_while_allowed(
    engine: Engine, tmp_path: Path, fake: tuple[str, Tracker]
) -> None:
    """The URL was accepted while the setting was on; the setting is now off: the delivery
    is refused right before connecting, and the receiver gets nothing."""
    base, tracker = fake
    golden, _, _ = make_triage(engine, tmp_path, queries=1, per_query=1)
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(GoldenSet, golden.id)
        assert row is not None
        events.configure(
            session=session,
            golden=row,
            url=f"{base}/hook",
            events=["miss.labelled"],
            allow_local=True,
        )
        session.add(WebhookDelivery(golden_set_id=row.id, event="miss.labelled", payload={}))
        session.commit()
        sender = Sender(timeout=10, attempts=3, max_wait=0.1)
        delivered = events.deliver_pending(
            session=session, secret=SECRET, sender=sender, allow_local=False
        )
        assert delivered == 0
        stored = session.exec(select(WebhookDelivery)).one()
        assert stored.delivered_at is None
        assert "refused" in (stored.last_error or "")
        assert "local-network address" in (stored.last_error or "")
    assert sender.waits == []  # refused at once, not retried
    assert tracker.requests == []
    with Session(engine, expire_on_commit=False) as session:
        assert (
            events.deliver_pending(session=session, secret=SECRET, sender=sender, allow_local=True)
            == 1
        )
    assert [r.path for r in tracker.requests] == ["/hook"]


def test_guarded_client_checks_at_connect_time(fake: tuple[str, Tracker]) -> None:
    """The connection itself is guarded (not only the configured URL): a name that passed
    a check earlier and resolves to loopback now is refused before a socket opens."""
    base, tracker = fake
    port = base.rsplit(":", 1)[1]
    for url in (f"{base}/hook", f"http://localhost:{port}/hook", f"http://2130706433:{port}/"):
        with client(allow_local=False) as guarded, pytest.raises(AddressRefused):
            guarded.post(url, content=b"{}")
    assert tracker.requests == []
    with client(allow_local=True) as open_client:
        answer = open_client.post(f"http://localhost:{port}/hook", content=b"{}")
    assert answer.status_code == 401  # it arrived (and the fake checked the signature)
    assert len(tracker.requests) == 1


def test_redirects_are_not_followed(fake: tuple[str, Tracker]) -> None:
    base, tracker = fake
    tracker.faults = [
        Fault("/hook", status=302, headers={"Location": "http://169.254.169.254/latest"})
    ]
    from app.exporters import TrackerError
    from app.exporters.webhook import signed

    request = signed(f"{base}/hook", SECRET, "miss.labelled", {}, "k")
    with client(allow_local=True) as open_client, pytest.raises(TrackerError) as failed:
        Sender(timeout=10, attempts=2, max_wait=0.1).send(open_client, request)
    assert "redirects are not followed" in str(failed.value)
    assert len(tracker.requests) == 1  # the redirect was not followed anywhere


def test_a_stored_url_with_credentials_is_refused_at_send_time(
    engine: Engine, tmp_path: Path, fake: tuple[str, Tracker]
) -> None:
    """Stored before the checks existed (written straight to the table): still refused."""
    base, tracker = fake
    golden, _, _ = make_triage(engine, tmp_path, queries=1, per_query=1)
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(GoldenSet, golden.id)
        assert row is not None
        row.webhook_url = base.replace("http://", "http://user:secret@") + "/hook"
        row.webhook_events = ["miss.labelled"]
        session.add(row)
        session.add(WebhookDelivery(golden_set_id=row.id, event="miss.labelled", payload={}))
        session.commit()
        sender = Sender(timeout=10, attempts=2, max_wait=0.1)
        assert (
            events.deliver_pending(session=session, secret=SECRET, sender=sender, allow_local=True)
            == 0
        )
        stored = session.exec(select(WebhookDelivery)).one()
        assert "credentials" in (stored.last_error or "")
        assert "secret" not in (stored.last_error or "")
    assert tracker.requests == []


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("github_api_url", "https://token-abc:x@api.github.com"),
        ("gitlab_api_url", "ftp://gitlab.example"),
        ("jira_api_url", "file:///etc/passwd"),
        ("linear_api_url", "http:///graphql"),
    ],
)
def test_tracker_urls_in_the_settings_are_checked_at_startup(variable: str, value: str) -> None:
    from pydantic import ValidationError

    from tests.support.service import make_settings

    with pytest.raises(ValidationError) as refused:
        make_settings("sqlite:///x.db", **{variable: value})
    assert variable in str(refused.value)
    assert "token-abc" not in str(refused.value)  # the refused value is not echoed
