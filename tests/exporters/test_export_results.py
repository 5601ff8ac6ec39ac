"""Every export answers with its result in view: for HTMX the export panel alone (swapped in
place), without JavaScript the dashboard at ``#export``; the panel says what happened in a
sentence and the form keeps the tracker and target entered. A webhook preview to a local
address is refused as its push is, and a webhook delivery is never linked to its endpoint."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.exporters import Tracker as TrackerName
from app.models import Export, GoldenSet, Role, Run, Triage, User
from app.settings import Settings
from tests.support.fake_tracker import Tracker
from tests.support.service import HTMX, ORIGIN, Account, login
from tests.support.triage import make_triage


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def export(client: TestClient, triage_id: int, mode: str, **form: str) -> httpx.Response:
    """Post the export form as a browser would: with HTMX (the panel), or without JavaScript
    (a push's redirect followed, as the browser does)."""
    headers = HTMX if mode == "fragment" else ORIGIN
    return client.post(f"/triages/{triage_id}/exports", data=form, headers=headers)


def panel_of(response: httpx.Response, mode: str) -> BeautifulSoup:
    """The export panel of an answer: the whole answer for HTMX, else a part of the page."""
    soup = BeautifulSoup(response.text, "html.parser")
    assert (soup.find("html") is not None) == (mode == "page")
    if mode == "fragment":
        # the answer is the panel itself, ready to replace the one on the page
        roots = [tag for tag in soup.find_all(recursive=False) if tag.name]
        assert [(t.name, t.get("id")) for t in roots] == [("section", "export")]
    panel = soup.select_one("section#export")
    assert panel is not None
    return panel


def entered(panel: BeautifulSoup) -> tuple[str, str]:
    """The tracker and target the panel's form holds."""
    selected = panel.select_one('select[name="tracker"] option[selected]')
    return (selected["value"] if selected else ""), panel.select_one('input[name="target"]')[
        "value"
    ]


def use(client: TestClient, settings: Settings) -> None:
    client.app.state.settings = settings  # type: ignore[attr-defined]


def test_the_form_posts_into_the_panel_and_scrolls_there_without_js(
    client: TestClient,
    accounts: dict[Role, Account],
    labelled: tuple[GoldenSet, Run, Triage, User],
) -> None:
    triage_id = labelled[2].id
    login(client, accounts[Role.LEAD].email)
    soup = BeautifulSoup(client.get(f"/triages/{triage_id}").text, "html.parser")
    form = soup.select_one("#export form")
    assert form["hx-post"] == f"/triages/{triage_id}/exports"
    assert form["hx-target"] == "#export"
    assert form["hx-swap"].startswith("outerHTML")
    # without JavaScript the answers land on the panel: a preview redirects to its GET,
    # a push to the dashboard (a target never goes into an address from the form itself)
    assert (form["method"], form["action"]) == ("post", f"/triages/{triage_id}/exports#export")
    assert form.select_one('button[value="push"]')["name"] == "action"
    preview = form.select_one('button[value="preview"]')
    assert preview["name"] == "action"  # HTMX sends the button clicked


def test_a_push_says_what_it_did_in_the_panel_and_keeps_the_form(
    client: TestClient,
    accounts: dict[Role, Account],
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
    mode: str,
) -> None:
    use(client, tracker_settings)
    triage_id = labelled[2].id
    assert triage_id is not None
    login(client, accounts[Role.LEAD].email)
    pushed = export(client, triage_id, mode, tracker="gitlab", target="acme/search", action="push")
    assert pushed.status_code == 200, pushed.text[:500]
    if mode == "page":
        assert [r.status_code for r in pushed.history] == [303]
        assert pushed.history[0].headers["location"] == f"/triages/{triage_id}#export"
    else:
        assert pushed.headers["hx-replace-url"] == f"/triages/{triage_id}#export"
    panel = panel_of(pushed, mode)
    message = panel.select_one("#export-message")
    assert message.get_text() == "Created 2 issues on GitLab acme/search, updated 0, 0 unchanged."
    assert "ok" in message["class"]
    assert entered(panel) == ("gitlab", "acme/search")
    assert len(panel.select("#exports tbody tr")) == 2
    assert len(fake[1].issues) == 2
    # the same push again: nothing changed, and the sentence says so
    again = panel_of(
        export(client, triage_id, mode, tracker="gitlab", target="acme/search", action="push"),
        mode,
    )
    assert again.select_one("#export-message").get_text() == (
        "Created 0 issues on GitLab acme/search, updated 0, 2 unchanged."
    )
    assert len(fake[1].issues) == 2


def test_a_refused_push_shows_the_reason_in_the_panel_and_keeps_the_form(
    client: TestClient,
    accounts: dict[Role, Account],
    labelled: tuple[GoldenSet, Run, Triage, User],
    mode: str,
) -> None:
    triage_id = labelled[2].id
    assert triage_id is not None
    login(client, accounts[Role.LEAD].email)
    pushed = export(client, triage_id, mode, tracker="linear", target="TEAM", action="push")
    assert pushed.status_code == 400
    assert pushed.headers["x-error-code"] == "credentials_missing"
    panel = panel_of(pushed, mode)
    assert (
        panel.select_one("#export-error")
        .get_text()
        .startswith("Nothing was sent: a push to Linear needs MISSTRIAGE_LINEAR_TOKEN")
    )
    assert entered(panel) == ("linear", "TEAM")
    assert panel.select_one("#export-message") is None


def test_a_preview_answers_in_the_panel(
    client: TestClient,
    accounts: dict[Role, Account],
    labelled: tuple[GoldenSet, Run, Triage, User],
    mode: str,
) -> None:
    triage_id = labelled[2].id
    assert triage_id is not None
    login(client, accounts[Role.LEAD].email)
    shown = export(client, triage_id, mode, tracker="jira", target="SEARCH", action="preview")
    assert shown.status_code == 200
    if mode == "page":
        assert shown.history[0].headers["location"] == (
            f"/triages/{triage_id}/export-preview?tracker=jira&target=SEARCH#export"
        )
    else:
        assert shown.headers["hx-replace-url"] == (
            f"/triages/{triage_id}/export-preview?tracker=jira&target=SEARCH#export"
        )
    panel = panel_of(shown, mode)
    assert panel.select_one("#export-results caption").get_text() == "Preview: nothing was sent"
    creates = len(panel.select("#export-results tbody tr"))
    assert creates > 0
    plural = "issue" if creates == 1 else "issues"
    assert panel.select_one("#export-message").get_text() == (
        f"Nothing was sent. A push would create {creates} {plural} on Jira SEARCH."
    )
    assert entered(panel) == ("jira", "SEARCH")


def test_a_webhook_preview_keeps_its_url_out_of_the_address(
    client: TestClient,
    accounts: dict[Role, Account],
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
    mode: str,
) -> None:
    """A webhook's URL may carry its secret: its preview answers in place (no redirect to a
    GET carrying it) and the address stays the dashboard's; the panel shows its host."""
    use(client, tracker_settings)
    triage_id = labelled[2].id
    login(client, accounts[Role.LEAD].email)
    hook = f"{fake[0]}/hook?token=receiver-secret"
    shown = export(client, triage_id, mode, tracker="webhook", target=hook, action="preview")
    assert shown.status_code == 200
    assert shown.history == []
    if mode == "fragment":
        assert shown.headers["hx-replace-url"] == f"/triages/{triage_id}#export"
    panel = panel_of(shown, mode)
    assert (
        panel.select_one("#export-message")
        .get_text()
        .startswith("Nothing was sent. A push would create ")
    )
    assert entered(panel) == ("webhook", hook)
    panel.select_one('input[name="target"]').decompose()
    assert "receiver-secret" not in str(panel)


def test_a_preview_with_no_final_label_says_there_is_nothing_to_write(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    tmp_path: Path,
    mode: str,
) -> None:
    triage_id = make_triage(engine, tmp_path, queries=2, per_query=2)[2].id
    login(client, accounts[Role.LEAD].email)
    shown = export(
        client, triage_id, mode, tracker="github", target="acme/search", action="preview"
    )
    panel = panel_of(shown, mode)
    assert panel.select_one("#export-message").get_text() == (
        "Nothing was sent: no miss of this triage has a final label yet, so there is no "
        "issue to write."
    )


@pytest.mark.parametrize(
    "target",
    ["http://127.0.0.1:9/hook", "http://localhost/hook", "http://10.1.2.3/hook"],
)
def test_a_webhook_preview_to_a_local_address_is_refused_like_its_push(
    client: TestClient,
    accounts: dict[Role, Account],
    settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    mode: str,
    target: str,
) -> None:
    refusing = {"allow_local_network": False, "webhook_secret": SecretStr("s" * 32)}
    use(client, settings.model_copy(update=refusing))
    triage_id = labelled[2].id
    assert triage_id is not None
    login(client, accounts[Role.LEAD].email)
    headers = {"HX-Request": "true"} if mode == "fragment" else {}
    preview = client.get(
        f"/triages/{triage_id}/export-preview",
        params={"tracker": "webhook", "target": target},
        headers=headers,
    )
    assert preview.status_code == 422
    assert preview.headers["x-error-code"] == "url_refused"
    # its push is refused the same way (and sends nothing)
    pushed = export(client, triage_id, mode, tracker="webhook", target=target, action="push")
    assert (pushed.status_code, pushed.headers["x-error-code"]) == (422, "url_refused")
    panel = panel_of(preview, mode)
    assert "MISSTRIAGE_ALLOW_LOCAL_NETWORK" in panel.select_one("#export-error").get_text()
    assert panel.select_one("#export-results") is None
    assert entered(panel) == ("webhook", target)


def test_a_webhook_delivery_is_not_linked_to_its_endpoint(
    client: TestClient,
    accounts: dict[Role, Account],
    tracker_settings: Settings,
    labelled: tuple[GoldenSet, Run, Triage, User],
    fake: tuple[str, Tracker],
    engine: Engine,
    mode: str,
) -> None:
    use(client, tracker_settings)
    triage = labelled[2]
    assert triage.id is not None
    login(client, accounts[Role.LEAD].email)
    hook = f"{fake[0]}/hook?token=receiver-secret"
    pushed = export(client, triage.id, mode, tracker="webhook", target=hook, action="push")
    assert pushed.status_code == 200, pushed.text[:500]
    panel = panel_of(pushed, mode)
    assert panel.select_one("#export-message").get_text().startswith("Created 2 deliveries on")
    assert len(panel.select("#exports tbody tr")) == 2
    assert panel.select("#exports a") == []
    assert panel.select("#export-results a") == []
    # the endpoint's path and query may be its secret: the panel shows its host alone (the
    # form keeps what the lead typed, for the next push)
    panel.select_one('input[name="target"]').decompose()
    assert "receiver-secret" not in str(panel)
    host = fake[0].split("://", 1)[1]
    assert [td.get_text() for td in panel.select("#exports tbody tr td:nth-of-type(2)")] == [
        f"http://{host}/\N{HORIZONTAL ELLIPSIS}"
    ] * 2
    # a delivery recorded before: its stored URL (the endpoint) is not shown either
    with Session(engine) as session:
        session.add(
            Export(
                triage_id=triage.id,
                tracker=TrackerName.WEBHOOK,
                target="https://hooks.example.com/old?token=s",
                category="not-indexed",
                external_id=f"{triage.id}:not-indexed",
                url="https://hooks.example.com/old?token=s",
                payload_hash="x",
            )
        )
        session.commit()
    page = BeautifulSoup(client.get(f"/triages/{triage.id}").text, "html.parser")
    assert len(page.select("#exports tbody tr")) == 3
    assert [a["href"] for a in page.select("#exports a")] == []
    assert "token=s" not in str(page.select_one("#exports"))
