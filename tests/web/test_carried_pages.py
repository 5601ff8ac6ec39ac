"""Carried labels on the pages (issue 28, part 3): the dashboard says how many misses carry a
label and from which triage, counts them apart in the closure, the progress and the bars; a
lead sends them back from it (by cause) or from the miss page (one); a reviewer sees no form.
Full page and fragment, both databases (tests/support/carried.py has the data)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.models import Role
from tests.support.carried import carried_series, make_triage, misses_by_pair
from tests.support.service import ORIGIN, Account, get, login


@pytest.fixture(params=["page", "fragment"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_the_dashboard_shows_the_carried_labels_and_their_origin(
    client: TestClient, accounts: dict[Role, Account], mode: str
) -> None:
    lead, reviewer = accounts[Role.LEAD], accounts[Role.REVIEWER]
    ids = carried_series(client, lead)
    second = make_triage(client, lead, ids["commit-2"])
    login(client, reviewer.email)
    page = get(client, f"/triages/{second['id']}", mode)
    closure = page.select_one("#closure")
    assert closure is not None
    assert closure.get_text(strip=True) == (
        f"0 labelled here + 1 carried from triage {ids['t1']} = 1 of 1 miss accounted for: "
        "the categories close"
    )
    carried = page.select_one("#carried")
    assert carried is not None
    origin = carried.select_one(f"a[href='/triages/{ids['t1']}']")
    assert origin is not None
    assert origin.get_text(strip=True) == f"triage #{ids['t1']}"
    assert "commit-1" in carried.get_text()
    assert carried.select_one("a[href$='backlog?state=carried']") is not None
    # a reviewer sends nothing back
    assert carried.select_one("form") is None
    progress = page.select_one("#labelled")
    assert progress is not None
    assert progress.get_text(strip=True) == "1 of 1 labelled (1 of them carried)"
    bar = page.select_one("#counts tr[data-cause='not-indexed'] .carried-part")
    assert bar is not None
    assert bar["data-carried"] == "1"
    backlog = get(client, f"/triages/{second['id']}/backlog?state=carried", mode)
    rows = backlog.select("tr[data-miss]")
    assert len(rows) == 1
    origin_link = rows[0].select_one("a.carried-from")
    assert origin_link is not None
    assert origin_link["href"] == f"/triages/{ids['t1']}"


def test_a_lead_sends_carried_misses_back_from_the_dashboard_and_the_miss_page(
    client: TestClient, accounts: dict[Role, Account], mode: str
) -> None:
    lead = accounts[Role.LEAD]
    ids = carried_series(client, lead)
    second = make_triage(client, lead, ids["commit-2"])
    login(client, lead.email)
    page = get(client, f"/triages/{second['id']}", mode)
    options = page.select("#carried-cause option")
    assert [(o["value"], o.get_text(strip=True)) for o in options] == [
        ("", "all 1 carried"),
        ("not-indexed", "Not indexed (1)"),
    ]
    miss = misses_by_pair(client, lead, second["id"])[("q3", "d")]
    miss_page = get(client, f"/misses/{miss['id']}", mode)
    link = miss_page.select_one("#carried-from")
    assert link is not None
    assert link["href"] == f"/triages/{ids['t1']}"
    assert miss_page.select_one("#relabel") is None
    form = miss_page.select_one("#requeue")
    assert form is not None
    assert form["action"] == f"/triages/{second['id']}/carried"

    # another cause: nothing moves, and the flash says so
    posted = client.post(
        f"/triages/{second['id']}/carried",
        data={"category": "chunk-boundary"},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert posted.status_code == 303
    assert misses_by_pair(client, lead, second["id"])[("q3", "d")]["state"] == "carried"
    # from the miss page: this one
    posted = client.post(
        f"/triages/{second['id']}/carried",
        data={"miss_id": str(miss["id"])},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert posted.status_code == 303
    assert posted.headers["location"] == f"/misses/{miss['id']}"
    after = get(client, f"/misses/{miss['id']}", "page")
    message = after.select_one("#flash, .flash, [role=status]")
    assert message is not None
    assert "1 carried miss sent back to the queue" in message.get_text()
    assert after.select_one("#relabel") is not None
    assert after.select_one("#requeue") is None
    actions = [td["data-action"] for td in after.select("#events td[data-action]")]
    assert actions == ["requeue"]
    dashboard = get(client, f"/triages/{second['id']}", mode)
    assert dashboard.select_one("#carried") is None


def test_a_bad_send_back_answers_the_product_page(
    client: TestClient, accounts: dict[Role, Account]
) -> None:
    lead, reviewer = accounts[Role.LEAD], accounts[Role.REVIEWER]
    ids = carried_series(client, lead)
    second = make_triage(client, lead, ids["commit-2"])
    login(client, reviewer.email)
    refused = client.post(
        f"/triages/{second['id']}/carried", data={}, headers=ORIGIN, follow_redirects=False
    )
    assert refused.status_code == 403
    assert "text/html" in refused.headers["content-type"]
    login(client, lead.email)
    unknown = client.post(
        f"/triages/{second['id']}/carried",
        data={"category": "nonsense"},
        headers=ORIGIN,
        follow_redirects=False,
    )
    assert unknown.status_code == 422
    assert "text/html" in unknown.headers["content-type"]
    assert "nonsense" in unknown.text
    # the class of bad fields: too long, not a number, a number out of range
    for data in ({"category": "x" * 5000}, {"miss_id": "one"}, {"miss_id": str(2**70)}):
        bad = client.post(
            f"/triages/{second['id']}/carried", data=data, headers=ORIGIN, follow_redirects=False
        )
        assert bad.status_code == 422, data
        assert "text/html" in bad.headers["content-type"]
        assert "x" * 200 not in bad.text  # never echoes a huge value
    # without the Origin header: the CSRF check refuses it
    forged = client.post(f"/triages/{second['id']}/carried", data={}, follow_redirects=False)
    assert forged.status_code == 403
    assert misses_by_pair(client, lead, second["id"])[("q3", "d")]["state"] == "carried"
