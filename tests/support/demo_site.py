"""`misstriage demo` prepared so that every page of the product has something to show: the
demo's own data, plus (through the JSON API, and the user service as the CLI would) a
second reviewer and a triage with two reviewers per miss whose first misses are disputed, so
the adjudication page has cards, and a miss the lead labelled with a long note (its audit trail,
the backlog and the export preview show it). Used by the accessibility, width and keyboard tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlmodel import Session

from app.db import make_engine
from app.models import Role
from app.services.accounts import users as user_service
from tests.support import tracebacks
from tests.support.live import free_port, healthy_within
from tests.support.service import make_settings

#: The second reviewer an admin adds (``misstriage create-user``) so that misses can disagree.
SECOND_REVIEWER = ("reviewer2@demo.example.com", "second-review-pass")
#: The admin the page walks log in as for the admin's pages (the demo makes none).
ADMIN = ("admin@demo.example.com", "admin-demo-pass")
#: The note of ``noted_miss_id``: long, with an address that has nowhere to break, wider than
#: a 768 px page on its own.
NOTE = (
    "The index was rebuilt on the 14th without the help-centre export; see "
    "https://tracker.example.com/search_platform/issues/4821?reindex_without_help_centre_export"
    "&and_without_the_wiki_pastes_of_the_rate_limit_articles_nor_the_pdf_exports_of_sso_setup"
)
#: How many misses of the double-review triage are left disputed (one per adjudication visit).
DISPUTED = 4


@dataclass
class Account:
    email: str
    password: str


@dataclass
class DemoSite:
    """A running demo: its URL, accounts and the ids the page table needs."""

    url: str
    printed: str
    database: Path
    lead: Account
    reviewer: Account
    golden_set_id: int
    run_id: int
    other_run_id: int
    triage_id: int
    miss_id: int
    qid: str
    doc_id: str
    double_triage_id: int = 0
    admin: Account | None = None
    #: A miss the lead labelled with a long note: its audit trail shows the note, and the
    #: dashboard's export preview has an issue to show.
    noted_miss_id: int = 0
    #: The demo's detection (its copies found by the detector, its sample to review).
    detector_run_id: int = 0
    #: The series the demo's runs belong to (three commits of one configuration).
    series: str = ""
    #: Commit 3's triage: it carries labels from commit 2's.
    carried_triage_id: int = 0


class DemoProcess:
    """``python -m app demo`` on a free port, its database under ``folder/var``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        self.log = folder / "demo.log"
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "app", "demo", "--port", str(self.port)],
                cwd=folder,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if not healthy_within(self.url, seconds=60):
            self.stop()
            raise RuntimeError(f"the demo did not start: {self.log.read_text()[-2000:]}")

    @property
    def database(self) -> Path:
        return self.folder / "var" / "demo.db"

    def stop(self) -> None:
        """Stop the demo; AssertionError when its log holds a traceback."""
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        tracebacks.check_log(self.log, what="the demo")


@contextmanager
def _session(database: Path) -> Iterator[Session]:
    engine = make_engine(make_settings(f"sqlite:///{database}"))
    try:
        with Session(engine) as session:
            yield session
    finally:
        engine.dispose()


def api(url: str, database: Path, email: str) -> httpx.Client:
    """A JSON API client with a fresh bearer token of ``email``, made in the demo's database
    as ``misstriage create-token`` would (in process: a CLI run costs a second or two)."""
    with _session(database) as session:
        user = user_service.get_user_by_email(session=session, email=email)
        token = user_service.create_token(session=session, user=user, name="tests").secret
    return httpx.Client(
        base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def create_reviewer(database: Path, email: str, password: str, role: Role = Role.REVIEWER) -> None:
    """As ``misstriage create-user --role reviewer`` (or ``role``) would."""
    with _session(database) as session:
        user_service.create_user(session=session, email=email, password=password, role=role)


def _accounts(printed: str) -> tuple[Account, Account]:
    lead = re.search(r"lead\s+(\S+)\s+password\s+(\S+)", printed)
    reviewer = re.search(r"reviewer\s+(\S+)\s+password\s+(\S+)", printed)
    if lead is None or reviewer is None:
        raise RuntimeError(f"the demo printed no accounts: {printed}")
    return Account(*lead.groups()), Account(*reviewer.groups())


def describe(demo: DemoProcess) -> DemoSite:
    """The demo's ids as its API reports them (the first golden set, run and triage)."""
    printed = demo.log.read_text()
    lead, reviewer = _accounts(printed)
    create_reviewer(demo.database, *ADMIN, role=Role.ADMIN)
    with api(demo.url, demo.database, lead.email) as client:
        golden = client.get("/golden-sets").raise_for_status().json()["items"][0]
        runs = client.get(f"/golden-sets/{golden['id']}/runs").raise_for_status().json()["items"]
        run = runs[0]
        triage = client.get(f"/runs/{run['id']}/triages").raise_for_status().json()["items"][0]
        misses = client.get(f"/triages/{triage['id']}/misses", params={"per_page": 1000})
        miss = next(m for m in misses.raise_for_status().json()["items"] if m["state"] == "open")
        latest = client.get(f"/runs/{runs[-1]['id']}/triages").raise_for_status().json()
        detections = client.get(f"/golden-sets/{golden['id']}/detector-runs")
        detector = detections.raise_for_status().json()["items"][0]
    return DemoSite(
        url=demo.url,
        printed=printed,
        database=demo.database,
        lead=lead,
        reviewer=reviewer,
        golden_set_id=golden["id"],
        run_id=run["id"],
        other_run_id=runs[1]["id"],
        triage_id=triage["id"],
        miss_id=miss["id"],
        qid=miss["qid"],
        doc_id=miss["doc_id"],
        admin=Account(*ADMIN),
        detector_run_id=detector["id"],
        series=run["series"],
        carried_triage_id=latest["items"][0]["id"],
    )


def add_noted_miss(site: DemoSite) -> None:
    """The lead labels the last open miss of the demo's triage with the long ``NOTE``: its
    audit trail and the backlog show the note, the dashboard's export preview an issue."""
    with api(site.url, site.database, site.lead.email) as lead:
        misses = lead.get(f"/triages/{site.triage_id}/misses", params={"per_page": 1000})
        opened = [m for m in misses.raise_for_status().json()["items"] if m["state"] == "open"]
        noted = opened[-1]
        if noted["id"] == site.miss_id:
            raise RuntimeError("the demo has one open miss: none to label beside site.miss_id")
        labelled = lead.post(
            f"/misses/{noted['id']}/label",
            json={"category": "not-indexed", "note": NOTE, "version": noted["version"]},
        )
        site.noted_miss_id = labelled.raise_for_status().json()["id"]


def add_disputes(site: DemoSite) -> None:
    """A triage of the demo's run with two reviewers per miss; the reviewer and a second one
    disagree on its first ``DISPUTED`` misses, which wait for the lead's adjudication."""
    email, password = SECOND_REVIEWER
    create_reviewer(site.database, email, password)
    with api(site.url, site.database, site.lead.email) as lead:
        created = lead.post(
            f"/runs/{site.run_id}/triages",
            json={"depth": 50, "k": 20, "overlap": {"reviewers": 2, "fraction": 1.0, "seed": 0}},
        )
        site.double_triage_id = created.raise_for_status().json()["id"]
    first = api(site.url, site.database, site.reviewer.email)
    second = api(site.url, site.database, email)
    with first, second:
        for _ in range(DISPUTED):
            given = []
            for client, cause in ((first, "not-indexed"), (second, "chunk-boundary")):
                miss = client.post(f"/triages/{site.double_triage_id}/claim").raise_for_status()
                body = miss.json()
                labelled = client.post(
                    f"/misses/{body['id']}/label",
                    json={"category": cause, "version": body["version"]},
                )
                given.append(labelled.raise_for_status().json())
            if given[0]["id"] != given[1]["id"] or given[1]["state"] != "disputed":
                raise RuntimeError(f"expected one disputed miss, got {given}")
