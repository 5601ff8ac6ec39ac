"""Agreement in the service: three reviewers double-review a triage through the API, the lead
adjudicates the disagreements, and ``GET /triages/{id}/agreement``, the closure sentence and
the dashboard say how often they agreed. The figures are held to the textbook formulas
(tests/support/agreement_textbook.py, exact fractions) over the labels this test gave."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.models import Role
from app.models.triage_public import Overlap
from app.services.accounts import users
from tests.support import agreement_textbook as textbook
from tests.support.cli import service_cli
from tests.support.service import PASSWORD, Account, login
from tests.support.triage import make_triage

CAUSES = ("not-indexed", "vocabulary-mismatch", "chunk-boundary")


def _reviewers(engine: Engine, accounts: dict[Role, Account]) -> dict[str, dict[str, str]]:
    """Three reviewers by email: the suite's own and two more."""
    made = {accounts[Role.REVIEWER].email: accounts[Role.REVIEWER].headers}
    with Session(engine, expire_on_commit=False) as session:
        for name in ("bea", "cy"):
            user = users.create_user(
                session=session,
                email=f"{name}@example.com",
                password=PASSWORD,
                role=Role.REVIEWER,
            )
            secret = users.create_token(session=session, user=user, name="t").secret
            made[user.email] = {"Authorization": f"Bearer {secret}"}
    return made


def label_for(email: str, miss_id: int) -> str:
    """A deterministic label with some disagreement: every reviewer says the miss's own cause
    except "cy", who says the next cause on every third miss."""
    cause = CAUSES[miss_id % 3]
    if email.startswith("cy") and miss_id % 3 == 0:
        return CAUSES[(miss_id + 1) % 3]
    return cause


def test_agreement_figures_closure_and_dashboard(
    client: TestClient,
    accounts: dict[Role, Account],
    engine: Engine,
    tmp_path: Path,
    database_url: str,
) -> None:
    _, _, triage = make_triage(
        engine, tmp_path, queries=6, per_query=3, overlap=Overlap(reviewers=2)
    )
    base = f"/api/v1/triages/{triage.id}"
    lead = accounts[Role.LEAD].headers
    reviewers = _reviewers(engine, accounts)
    given: dict[int, dict[str, str]] = {}
    # the three reviewers take turns until the queue is empty for all of them
    for email in itertools.cycle(list(reviewers)):
        claimed = client.post(f"{base}/claim", headers=reviewers[email])
        if claimed.status_code == 204 and all(
            client.post(f"{base}/claim", headers=h).status_code == 204 for h in reviewers.values()
        ):
            break
        if claimed.status_code == 204:
            continue
        miss = claimed.json()
        label = label_for(email, miss["id"])
        answer = client.post(
            f"/api/v1/misses/{miss['id']}/label",
            headers=reviewers[email],
            json={"category": label, "version": miss["version"]},
        )
        assert answer.status_code == 200, answer.text
        given.setdefault(miss["id"], {})[email] = label
    assert len(given) == 18
    assert all(len(labels) == 2 for labels in given.values())
    disputed = [m for m, labels in given.items() if len(set(labels.values())) > 1]
    assert disputed, "the labels were meant to disagree somewhere"
    for _ in disputed:  # the lead adjudicates: the miss's own cause
        case = client.post(f"{base}/adjudication/claim", headers=lead)
        assert case.status_code == 200
        miss = case.json()
        decided = client.post(
            f"/api/v1/misses/{miss['id']}/adjudicate",
            headers=lead,
            json={"category": CAUSES[miss["id"] % 3], "version": miss["version"]},
        )
        assert decided.status_code == 200, decided.text

    answer = client.get(f"{base}/agreement", headers=lead)
    assert answer.status_code == 200, answer.text
    found = answer.json()
    units = [sorted(labels.values()) for labels in given.values()]
    assert (found["units"], found["compared_units"], found["reviewers"]) == (18, 18, 3)
    assert found["reviewers_per_miss"] == {"2": 18}
    assert found["cohen_kappa"] is None  # three reviewers: Cohen's kappa compares two
    expected = {
        "fleiss_kappa": textbook.fleiss(units),
        "krippendorff_alpha": textbook.alpha(units),
        "percent_agreement": textbook.percent(units),
    }
    for name, value in expected.items():
        assert value is not None
        assert found[name]["value"] == pytest.approx(float(value), abs=1e-9)
        low, high = found[name]["ci"]
        assert low <= found[name]["value"] <= high
    for cause in CAUSES:
        binary = textbook.one_vs_rest(units, cause)
        want = textbook.fleiss(binary)
        got = found["per_cause"][cause]["fleiss_kappa"]["value"]
        assert (got is None) if want is None else got == pytest.approx(float(want), abs=1e-9)
    pairs = textbook.confusion(units)
    for (a, b), n in pairs.items():
        assert found["confusion"][a][b] == n
    by_reviewer = {r["reviewer"]: r for r in found["per_reviewer"]}
    assert set(by_reviewer) == set(reviewers)
    finals = {m: CAUSES[m % 3] for m in given}
    for email, row in by_reviewer.items():
        mine = {m: labels[email] for m, labels in given.items() if email in labels}
        assert row["labelled"] == len(mine)
        assert row["equal"] == sum(label == finals[m] for m, label in mine.items())

    # the command line says the same
    printed = service_cli(database_url, "agreement", "--triage", str(triage.id), "--format", "json")
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == found
    table = service_cli(database_url, "agreement", "--triage", str(triage.id))
    assert f"Fleiss' kappa        {found['fleiss_kappa']['value']:.2f} [" in table.stdout
    missing = service_cli(database_url, "agreement", "--triage", "999")
    assert missing.returncode == 1
    assert "Traceback" not in missing.stderr

    # the closure sentence quotes Fleiss' kappa with its interval, on the API and the page
    kappa = found["fleiss_kappa"]
    phrase = f"Fleiss' kappa {kappa['value']:.2f} [{kappa['ci'][0]:.2f}, {kappa['ci'][1]:.2f}]"
    summary = client.get(base, headers=lead).json()
    assert summary["closes"] is True
    assert summary["closure"].endswith(f"; {len(given) - len(disputed)} agreed, "
                                       f"{len(disputed)} adjudicated; {phrase}")  # fmt: skip
    login(client, accounts[Role.LEAD].email)
    page = BeautifulSoup(client.get(f"/triages/{triage.id}").text, "html.parser")
    closure = page.select_one("#closure")
    assert closure is not None
    assert phrase in closure.get_text(" ", strip=True)
    # each reviewer's own labels count for them, each adjudication as a decision of the
    # adjudicator (never as a reviewer's label)
    counted = {
        str(tr["data-reviewer"]): (
            int(tr.select_one(".labels").get_text()),
            int(tr.select_one(".decisions").get_text()),
        )
        for tr in page.select("#throughput tbody tr[data-reviewer]")
    }
    expected = {e: (sum(e in labels for labels in given.values()), 0) for e in reviewers}
    assert counted == expected | {accounts[Role.LEAD].email: (0, len(disputed))}
    panel = page.select_one("#agreement")
    assert panel is not None
    rows = {tr["data-cause"]: tr for tr in panel.select("tr[data-cause]")}
    assert set(rows) == set(CAUSES)
    matrix = panel.select_one("#confusion")
    assert matrix is not None
    cells = {
        (td["data-row"], td["data-col"]): int(td.get_text(strip=True))
        for td in matrix.select("td[data-row]")
    }
    assert cells == {(a, b): pairs.get((a, b), 0) for a in CAUSES for b in CAUSES}

    # the backlog and the tracker issues say what each label rests on
    backlog = client.get(f"{base}/backlog?format=json", headers=lead).json()
    rests = {m["miss_id"]: m["rests_on"] for group in backlog["causes"] for m in group["misses"]}
    assert rests == {m: "adjudicated" if m in disputed else "agreed" for m in given}
    by = {m["miss_id"]: m["labelled_by"] for group in backlog["causes"] for m in group["misses"]}
    for miss_id, labels in given.items():  # an agreed label is both reviewers'
        want = accounts[Role.LEAD].email if miss_id in disputed else set(labels)
        assert (by[miss_id] if miss_id in disputed else set(by[miss_id].split(", "))) == want
    preview = client.post(
        f"{base}/exports",
        headers=lead,
        json={"tracker": "github", "target": "acme/search", "dry_run": True},
    ).json()
    bodies = {r["body"]["title"]: r["body"]["body"] for r in preview["requests"]}
    for cause in CAUSES:
        mine = [m for m in given if CAUSES[m % 3] == cause]
        agreed = sum(m not in disputed for m in mine)
        words = ", ".join(
            f"{n} {w}" for n, w in ((agreed, "agreed"), (len(mine) - agreed, "adjudicated")) if n
        )
        (body,) = [b for title, b in bodies.items() if f" {cause} " in title]
        assert f"These labels rest on: {words}." in body

    # reviewers may not read it: it names them and their disagreements
    refused = client.get(f"{base}/agreement", headers=accounts[Role.REVIEWER].headers)
    assert refused.status_code == 403


def test_a_single_review_triage_has_nothing_to_agree_on(
    client: TestClient, accounts: dict[Role, Account], engine: Engine, tmp_path: Path
) -> None:
    _, _, triage = make_triage(engine, tmp_path, queries=2, per_query=1)
    found = client.get(
        f"/api/v1/triages/{triage.id}/agreement", headers=accounts[Role.LEAD].headers
    ).json()
    assert (found["units"], found["compared_units"]) == (0, 0)
    assert found["fleiss_kappa"]["value"] is None
    assert found["fleiss_kappa"]["reason"]
    assert (
        "kappa"
        not in client.get(
            f"/api/v1/triages/{triage.id}", headers=accounts[Role.LEAD].headers
        ).json()["closure"]
    )
