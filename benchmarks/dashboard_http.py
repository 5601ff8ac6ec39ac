"""Benchmark: the lead's dashboard and backlog pages of a large triage over HTTP.

For each backend (PostgreSQL, SQLite), on a fresh database: one lead and --reviewers reviewer
accounts (made in-process with the project's services), then a triage of exactly --misses
misses built in-process through the services (a generated qrels file of misses/4 queries with
four relevant documents each; a run returning three unrelated documents per query, so every
relevant document is a miss at depth 50). The labelling is then written with bulk SQL
(SQLAlchemy Core on the app's own tables, so types are the app's on both databases), the way
the work queue would have left it:

* the first 80% of the misses in queue order are labelled (state 'labelled', version 2, one of
  the named causes or 'other' with a note, a reviewer, labelled_at spread over the last 8
  hours), each with one 'label' event;
* 10% of those were relabelled by the lead afterwards (version 3, a 'relabel' event);
* 'skip', 'release' and 'conflict' events make up the rest of --events (default 2 x misses),
  with ``before``/``after`` snapshots like the queue service writes;
* the first --leases open misses carry a live lease (a reviewer, now + 10 minutes).

PostgreSQL gets a VACUUM ANALYZE after the load (what autovacuum does soon after it);
SQLite gets none (the app never runs it). Then the real server (`misstriage serve --workers
1`) answers, to one keep-alive httpx client, the dashboard ``GET /triages/{id}``, the first
backlog page ``GET /triages/{id}/backlog``, ``GET /triages/{id}/backlog?cause=other`` (HTML,
logged in as the lead with the browser session cookie of ``POST /login``) and the JSON summary
``GET /api/v1/triages/{id}`` (the lead's bearer token): 3 warm-up requests, then --requests
timed requests per page, one after the other. Every answer must be 200; the dashboard must
carry the closure sentence ("does not close") and the live leases, the backlog pages 50 rows,
the JSON summary the counts written.

Prints p50/p95/p99/max per page and backend, the answer size, the target "p95 < 150 ms", the
setup times, and the service functions behind the pages timed in-process on the same database
(statement by statement); for a page over the target, the plan (EXPLAIN) of its slowest
statements. --extra-index "CREATE INDEX ..." (repeatable) creates indexes in the bench
database after the first measurement and measures every page again, to test a fix without
touching the app. Loopback only; the script stops itself after --timeout seconds; servers,
temporary folders and the misstriage_bench_* databases it creates are removed even on failure.

Usage: python benchmarks/dashboard_http.py [--misses 100000] [--events N] [--requests 50]
       [--backends postgresql,sqlite] [--extra-index SQL ...] [--timeout 1800]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import bindparam, event, insert, select, text, update
from sqlalchemy.engine import Engine
from sqlmodel import Session
from starlette.testclient import TestClient
from support import (
    MISSTRIAGE,
    PG_URL,
    bench_database,
    free_port,
    log_problems,
    print_log_problems,
    random_secret,
    run_bounded,
    stop_server,
    tail,
    wait_healthy,
)

from app.db import make_engine
from app.main import create_app
from app.migrate import upgrade
from app.models import DEFAULT_CAUSES, OTHER, LabelEvent, Miss, MissState, Role
from app.services import dashboard, golden_sets, runs, triages, users
from app.settings import Settings

BACKENDS = ("postgresql", "sqlite")
LEAD_EMAIL = "lead@example.com"
PASSWORD = "benchpass1"
DEPTH = 50
K = 10
RELEVANT_PER_QUERY = 4
RETURNED_PER_QUERY = 3
LABELLED_SHARE = 0.8
RELABEL_SHARE = 0.1  # of the labelled misses
#: The other events (skip, release, conflict) share what --events leaves after label/relabel.
OTHER_EVENTS = (("skip", 0.5), ("release", 0.3), ("conflict", 0.2))
#: Causes of a label and their weights ('other' always with a note).
CATEGORY_WEIGHTS = (
    ("not-indexed", 0.35),
    ("vocabulary-mismatch", 0.30),
    ("chunk-boundary", 0.25),
    (OTHER, 0.10),
)
LABEL_WINDOW = timedelta(hours=8)
LEASE = timedelta(minutes=10)
BATCH = 5000
SEED = 20261130
WARMUP = 3
PER_PAGE = 50
P95_TARGET_MS = 150.0
CLOSURE_TEXT = "does not close"
REQUEST_TIMEOUT = 60.0
SERVICE_REPEATS = 5
PROFILE_REQUESTS = 10
EXPLAIN_STATEMENTS = 3
PAGES = (
    ("dashboard", "/triages/{id}"),
    ("backlog", "/triages/{id}/backlog"),
    ("backlog cause=other", "/triages/{id}/backlog?cause=other"),
    ("API summary", "/api/v1/triages/{id}"),
)
#: The service functions behind each page (timed in-process), by page name.
PAGE_SERVICES = {
    "dashboard": ("summarise", "residue", "throughput", "live_leases"),
    "backlog": ("backlog", "reviewers"),
    "backlog cause=other": ("backlog cause=other", "reviewers"),
    "API summary": ("summarise",),
}
QUERY = re.compile(r"\bFROM\b", re.IGNORECASE)
BACKLOG_ROW = re.compile(r'<tr data-miss="\d+">')
BACKLOG_TOTAL = re.compile(r'id="paging">(\d+) misses')


@dataclass
class Data:
    """What the setup wrote, to check the pages against."""

    triage_id: int = 0
    lead_token: str = ""
    misses: int = 0
    labelled: int = 0
    other: int = 0
    leases: int = 0
    events: Counter[str] = field(default_factory=Counter)
    phases: dict[str, float] = field(default_factory=dict)  # seconds


@dataclass
class PageResult:
    """One page's timings (seconds) and what was wrong with its answers."""

    name: str
    path: str
    times: list[float] = field(default_factory=list)
    size: int = 0
    problems: Counter[str] = field(default_factory=Counter)


@dataclass
class Statement:
    """One SQL statement a service function ran, with its parameters and duration."""

    sql: str
    parameters: Any
    seconds: float


@dataclass
class ServiceTiming:
    """A service function timed in-process: median seconds and its statements (last run)."""

    name: str
    median: float
    statements: list[Statement]


@dataclass
class PageProfile:
    """One page served in-process (no HTTP): medians of the whole request and of its SQL,
    and the number of queries per request."""

    name: str
    total: float
    sql: float
    queries: int


@dataclass
class BackendResult:
    """What one backend's run measured (or why it failed)."""

    backend: str
    data: Data | None = None
    pages: list[PageResult] = field(default_factory=list)
    indexed_pages: list[PageResult] = field(default_factory=list)
    services: list[ServiceTiming] = field(default_factory=list)
    indexed_services: list[ServiceTiming] = field(default_factory=list)
    profiles: list[PageProfile] = field(default_factory=list)
    indexed_profiles: list[PageProfile] = field(default_factory=list)
    plans: list[tuple[str, float, str, list[str]]] = field(default_factory=list)
    error: str | None = None
    log_problems: list[str] = field(default_factory=list)


def write_files(tmp: Path, n_misses: int) -> tuple[Path, Path]:
    """TREC qrels (misses/4 queries x 4 relevant documents) and a TREC run returning 3
    unrelated documents per query: every relevant document is a miss."""
    qrels, run = tmp / "bench.qrels", tmp / "run.trec"
    queries = range(n_misses // RELEVANT_PER_QUERY)
    qrels.write_text(
        "".join(f"q{i} 0 d{i}-{j} 1\n" for i in queries for j in range(RELEVANT_PER_QUERY))
    )
    run.write_text(
        "".join(
            f"q{i} Q0 x{i}-{r} {r + 1} {10 - r} t\n"
            for i in queries
            for r in range(RETURNED_PER_QUERY)
        )
    )
    return qrels, run


def snapshot(state: str, category: str | None, note: str, version: int) -> dict[str, Any]:
    """A miss as the queue service records it in an event's ``before``/``after``."""
    return {"state": state, "category": category, "note": note, "version": version}


def label_rows(
    misses: list[int], reviewers: list[int], lead_id: int, n_events: int, n_leases: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], Data]:
    """The miss updates, the events and the leases (dicts for executemany) for the miss ids
    in queue order; and the counts they add up to."""
    rng = random.Random(SEED)
    now = datetime.now(UTC)
    start = now - LABEL_WINDOW
    n_labelled = round(len(misses) * LABELLED_SHARE)
    n_relabel = round(n_labelled * RELABEL_SHARE)
    categories = [c for c, _ in CATEGORY_WEIGHTS]
    weights = [w for _, w in CATEGORY_WEIGHTS]
    facts = Data(misses=len(misses), labelled=n_labelled)
    updates: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    #: miss id -> category, note, time of the first label
    labelled: dict[int, tuple[str, str, datetime]] = {}

    def add_event(
        miss_id: int, user: int, at: datetime, action: str, before: Any, after: Any, note: str
    ) -> None:
        events.append(
            {
                "miss_id": miss_id,
                "triage_id": 0,  # set by the caller
                "user_id": user,
                "at": min(max(at, start), now),
                "action": action,
                "before": before,
                "after": after,
                "note": note,
            }
        )
        facts.events[action] += 1

    opened = snapshot(MissState.OPEN.value, None, "", 1)
    for index, miss_id in enumerate(misses[:n_labelled]):
        category = rng.choices(categories, weights)[0]
        note = f"duplicate of a judged document ({index % 7})" if category == OTHER else ""
        at = start + LABEL_WINDOW * ((index + rng.random()) / n_labelled) * 0.98
        reviewer = reviewers[rng.randrange(len(reviewers))]
        labelled[miss_id] = (category, note, at)
        after = snapshot(MissState.LABELLED.value, category, note, 2)
        updates.append(
            {
                "b_id": miss_id,
                "state": MissState.LABELLED.value,
                "category": category,
                "note": note,
                "version": 2,
                "labelled_by_id": reviewer,
                "labelled_at": at,
            }
        )
        add_event(miss_id, reviewer, at, "label", opened, after, note)

    for row in rng.sample(updates, n_relabel):
        miss_id = row["b_id"]
        old_category, old_note, at = labelled[miss_id]
        category = rng.choice([c for c in categories if c != old_category])
        note = "relabelled by the lead" if category == OTHER else ""
        # After the conflicts on the first label (below: at most 60 s after it).
        relabelled_at = min(now, at + timedelta(minutes=2) + (now - at) * rng.random())
        before = snapshot(MissState.LABELLED.value, old_category, old_note, 2)
        after = snapshot(MissState.LABELLED.value, category, note, 3)
        row |= {
            "category": category,
            "note": note,
            "version": 3,
            "labelled_by_id": lead_id,
            "labelled_at": relabelled_at,
        }
        add_event(miss_id, lead_id, relabelled_at, "relabel", before, after, note)
    facts.other = sum(1 for row in updates if row["category"] == OTHER)

    rest = max(0, n_events - n_labelled - n_relabel)
    counts = [round(rest * share) for _, share in OTHER_EVENTS]
    counts[0] += rest - sum(counts)
    first_label = snapshot(MissState.LABELLED.value, None, "", 2)
    for (action, _), count in zip(OTHER_EVENTS, counts, strict=True):
        for _ in range(count):
            miss_id = misses[rng.randrange(len(misses))]
            user = reviewers[rng.randrange(len(reviewers))]
            known = labelled.get(miss_id)
            if action == "conflict":
                # A stale label attempt (version 1) on a miss labelled meanwhile.
                miss_id = misses[rng.randrange(n_labelled)]
                category, note, at = labelled[miss_id]
                before = first_label | {"category": category, "note": note}
                attempt = snapshot(MissState.LABELLED.value, rng.choice(categories), "", 1)
                if attempt["category"] == OTHER:
                    attempt["note"] = "stale attempt"
                at += timedelta(seconds=rng.uniform(1, 60))
                add_event(miss_id, user, at, action, before, attempt, "")
                continue
            # Skips and releases happen while the miss is open (before its label, if any).
            latest = known[2] if known else now
            at = latest - (latest - start) * rng.random() * 0.2 - timedelta(seconds=1)
            if action == "skip":
                add_event(miss_id, user, at, action, opened, opened, "not sure, skipping")
            else:
                add_event(miss_id, user, at, action, opened | {"lease_holder": user}, opened, "")

    leases = [
        {
            "b_id": miss_id,
            "lease_holder_id": reviewers[i % len(reviewers)],
            "lease_expires_at": now + LEASE,
        }
        for i, miss_id in enumerate(misses[n_labelled : n_labelled + n_leases])
    ]
    facts.leases = len(leases)
    events.sort(key=lambda e: e["at"])  # ids in time order, as the app appends them
    return updates, events, leases, facts


def build_data(
    settings: Settings, tmp: Path, n_misses: int, n_events: int, n_reviewers: int, n_leases: int
) -> Data:
    """Migrate; accounts; golden set, run and triage through the services; then the labels,
    events and leases with bulk SQL (see the module docstring)."""
    began = time.perf_counter()
    upgrade(settings)
    engine = make_engine(settings)
    try:
        with Session(engine, expire_on_commit=False) as session:
            lead = users.create_user(
                session=session, email=LEAD_EMAIL, password=PASSWORD, role=Role.LEAD
            )
            lead_token = users.create_token(session=session, user=lead, name="bench").secret
            reviewers = []
            for index in range(n_reviewers):
                user = users.create_user(
                    session=session,
                    email=f"reviewer{index:02d}@example.com",
                    password=PASSWORD,
                    role=Role.REVIEWER,
                )
                assert user.id is not None
                reviewers.append(user.id)
            assert lead.id is not None
            accounts = time.perf_counter()

            qrels, run_path = write_files(tmp, n_misses)
            golden = golden_sets.import_golden_set(session=session, name="bench", qrels=qrels)
            stored = runs.import_run(
                session=session, golden=golden, name="run", path=run_path, source_name="run.trec"
            )
            triage = triages.create_triage(
                session=session, run=stored, golden=golden, depth=DEPTH, k=K, user=None
            )
            if triage.misses != n_misses:
                raise RuntimeError(f"the triage has {triage.misses} misses, expected {n_misses}")
            assert triage.id is not None
            built = time.perf_counter()

            table = Miss.__table__  # type: ignore[attr-defined]
            connection = session.connection()
            misses = list(
                connection.execute(
                    select(table.c.id)
                    .where(table.c.triage_id == triage.id)
                    .order_by(table.c.position)
                ).scalars()
            )
            updates, events, leases, data = label_rows(
                misses, reviewers, lead.id, n_events, n_leases
            )
            labels = (
                update(table)
                .where(table.c.id == bindparam("b_id"))
                .values(
                    state=bindparam("state"),
                    category=bindparam("category"),
                    note=bindparam("note"),
                    version=bindparam("version"),
                    labelled_by_id=bindparam("labelled_by_id"),
                    labelled_at=bindparam("labelled_at"),
                )
            )
            for offset in range(0, len(updates), BATCH):
                connection.execute(labels, updates[offset : offset + BATCH])
            for row in events:
                row["triage_id"] = triage.id
            event_table = LabelEvent.__table__  # type: ignore[attr-defined]
            for offset in range(0, len(events), BATCH):
                connection.execute(insert(event_table), events[offset : offset + BATCH])
            now = datetime.now(UTC)
            for row in leases:  # fresh expiry: the server's clock is the real one
                row["lease_expires_at"] = now + LEASE
            if leases:
                connection.execute(
                    update(table)
                    .where(table.c.id == bindparam("b_id"))
                    .values(
                        lease_holder_id=bindparam("lease_holder_id"),
                        lease_expires_at=bindparam("lease_expires_at"),
                    ),
                    leases,
                )
            session.commit()
            labelled = time.perf_counter()
            if engine.dialect.name == "postgresql":
                vacuum_analyze(engine)
            data.triage_id, data.lead_token = triage.id, lead_token
            data.phases = {
                "schema + accounts": accounts - began,
                "golden set + run + triage (services)": built - accounts,
                "labels + events + leases (bulk SQL)": labelled - built,
                "VACUUM ANALYZE": time.perf_counter() - labelled,
                "total": time.perf_counter() - began,
            }
    finally:
        engine.dispose()
    return data


def vacuum_analyze(engine: Engine) -> None:
    """VACUUM ANALYZE the PostgreSQL database: what autovacuum does soon after a bulk load
    (statistics, and the visibility map that index-only scans need)."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE"))


def check_answer(name: str, answer: httpx.Response, data: Data) -> str | None:
    """What is wrong with one answer (None: nothing)."""
    if answer.status_code != 200:
        return f"status {answer.status_code}"
    if name == "API summary":
        body = answer.json()
        if (body.get("misses"), body.get("other"), body.get("unlabelled")) != (
            data.misses,
            data.other,
            data.misses - data.labelled,
        ):
            return "JSON counts differ from the data written"
        return None
    page = answer.text
    if name == "dashboard":
        if CLOSURE_TEXT not in page:
            return "no closure sentence"
        if page.count("/leases/") != data.leases:
            return f"{page.count('/leases/')} live leases shown, expected {data.leases}"
        return None
    rows = len(BACKLOG_ROW.findall(page))
    total = BACKLOG_TOTAL.search(page)
    expected = data.other if name == "backlog cause=other" else data.misses
    if rows != PER_PAGE:
        return f"{rows} rows, expected {PER_PAGE}"
    if total is None or int(total[1]) != expected:
        return f"total {total[1] if total else '?'}, expected {expected}"
    if name == "backlog cause=other" and page.count(f"<td>{OTHER}</td>") != PER_PAGE:
        return "rows of other causes"
    return None


def login(client: httpx.Client | TestClient, base: str, triage_id: int) -> None:
    """Log the client in as the lead (POST /login, Origin header for the CSRF check)."""
    answer = client.post(
        "/login",
        data={"email": LEAD_EMAIL, "password": PASSWORD, "next": f"/triages/{triage_id}"},
        headers={"Origin": base},
        follow_redirects=False,
    )
    if answer.status_code not in (302, 303) or not client.cookies:
        raise RuntimeError(f"login: {answer.status_code}, cookies {list(client.cookies)}")


def time_pages(base: str, data: Data, n_requests: int) -> list[PageResult]:
    """Each page: warm-up requests, then ``n_requests`` timed ones, one after the other, on
    one keep-alive client (HTML with the session cookie, the JSON API with the token)."""
    results = []
    bearer = {"Authorization": f"Bearer {data.lead_token}"}
    with httpx.Client(base_url=base, timeout=REQUEST_TIMEOUT) as client:
        login(client, base, data.triage_id)
        for name, pattern in PAGES:
            result = PageResult(name, pattern.format(id=data.triage_id))
            headers = bearer if name == "API summary" else None
            for _ in range(WARMUP):
                answer = client.get(result.path, headers=headers)
                if problem := check_answer(name, answer, data):
                    result.problems[f"warm-up: {problem}"] += 1
            for _ in range(n_requests):
                sent = time.perf_counter()
                answer = client.get(result.path, headers=headers)
                result.times.append(time.perf_counter() - sent)
                result.size = len(answer.content)
                if problem := check_answer(name, answer, data):
                    result.problems[problem] += 1
            results.append(result)
    return results


@contextmanager
def statement_log(engine: Engine) -> Iterator[list[Statement]]:
    """Every statement the engine runs meanwhile, with its parameters and duration."""
    found: list[Statement] = []
    started: dict[int, float] = {}

    def before(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        started[id(cursor)] = time.perf_counter()

    def after(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        elapsed = time.perf_counter() - started.pop(id(cursor), time.perf_counter())
        found.append(Statement(statement, parameters, elapsed))

    event.listen(engine, "before_cursor_execute", before)
    event.listen(engine, "after_cursor_execute", after)
    try:
        yield found
    finally:
        event.remove(engine, "before_cursor_execute", before)
        event.remove(engine, "after_cursor_execute", after)


def service_calls(session: Session, triage_id: int) -> dict[str, Callable[[], object]]:
    """The service functions behind the pages, ready to call on ``session``."""
    triage = triages.get_triage(session=session, triage_id=triage_id)
    causes = list(DEFAULT_CAUSES)
    now = datetime.now(UTC)
    return {
        "summarise": lambda: triages.summarise(session=session, triage=triage, causes=causes),
        "residue": lambda: dashboard.residue(session=session, triage=triage),
        "throughput": lambda: dashboard.throughput(session=session, triage=triage),
        "live_leases": lambda: dashboard.live_leases(session=session, triage=triage, now=now),
        "backlog": lambda: dashboard.backlog(session=session, triage=triage),
        "backlog cause=other": lambda: dashboard.backlog(
            session=session, triage=triage, cause=OTHER
        ),
        "reviewers": lambda: dashboard.reviewers(session=session, triage=triage),
    }


def time_services(settings: Settings, triage_id: int) -> list[ServiceTiming]:
    """Each service function: one warm-up call, then the median of SERVICE_REPEATS calls;
    the statements of the last call with their durations."""
    engine = make_engine(settings)
    timings = []
    try:
        with Session(engine, expire_on_commit=False) as session:
            for name, call in service_calls(session, triage_id).items():
                call()
                session.rollback()
                seconds = []
                for _ in range(SERVICE_REPEATS):
                    with statement_log(engine) as statements:
                        started = time.perf_counter()
                        call()
                        seconds.append(time.perf_counter() - started)
                    session.rollback()
                # Only the queries: not BEGIN, pragmas or the pool's ping.
                queries = [s for s in statements if QUERY.search(s.sql)]
                timings.append(ServiceTiming(name, statistics.median(seconds), queries))
    finally:
        engine.dispose()
    return timings


def profile_pages(settings: Settings, data: Data) -> list[PageProfile]:
    """Each page served in-process by the app (starlette's TestClient, no server, no
    socket), the lead logged in: warm-up requests, then PROFILE_REQUESTS timed ones with
    every statement timed; tells the time in SQL from the rest (auth, ORM, templates)."""
    engine = make_engine(settings)
    profiles = []
    base = "http://testserver"
    bearer = {"Authorization": f"Bearer {data.lead_token}"}
    try:
        with TestClient(create_app(settings, engine=engine), base_url=base) as client:
            login(client, base, data.triage_id)
            for name, pattern in PAGES:
                path = pattern.format(id=data.triage_id)
                headers = bearer if name == "API summary" else None
                for _ in range(WARMUP):
                    client.get(path, headers=headers)
                totals, sqls, queries = [], [], 0
                for _ in range(PROFILE_REQUESTS):
                    with statement_log(engine) as statements:
                        started = time.perf_counter()
                        answer = client.get(path, headers=headers)
                        totals.append(time.perf_counter() - started)
                    if answer.status_code != 200:
                        raise RuntimeError(f"in-process {path}: {answer.status_code}")
                    sqls.append(sum(s.seconds for s in statements))
                    queries = sum(1 for s in statements if QUERY.search(s.sql))
                profiles.append(
                    PageProfile(name, statistics.median(totals), statistics.median(sqls), queries)
                )
    finally:
        engine.dispose()
    return profiles


def explain(settings: Settings, statement: Statement) -> list[str]:
    """The plan of one statement with its parameters: EXPLAIN ANALYZE on PostgreSQL,
    EXPLAIN QUERY PLAN on SQLite."""
    engine = make_engine(settings)
    try:
        with engine.connect() as connection:
            if engine.dialect.name == "postgresql":
                prefix = "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "
            else:
                prefix = "EXPLAIN QUERY PLAN "
            rows = connection.exec_driver_sql(prefix + statement.sql, statement.parameters)
            if engine.dialect.name == "postgresql":
                return [row[0] for row in rows]
            return [f"{row[0]}<-{row[1]} {row[3]}" for row in rows]
    finally:
        engine.dispose()


def slow_statements(
    result: BackendResult, timings: list[ServiceTiming]
) -> list[tuple[str, Statement]]:
    """The slowest statements of the services behind the pages over the target."""
    by_name = {t.name: t for t in timings}
    chosen: dict[str, tuple[str, Statement]] = {}
    for page in result.pages:
        if (percentile(page.times, 95) or 0) < P95_TARGET_MS:
            continue
        for service in PAGE_SERVICES[page.name]:
            for statement in by_name[service].statements:
                known = chosen.get(statement.sql)
                if known is None or known[1].seconds < statement.seconds:
                    chosen[statement.sql] = (service, statement)
    return sorted(chosen.values(), key=lambda item: -item[1].seconds)[:EXPLAIN_STATEMENTS]


def serve(
    env: dict[str, str], tmp: Path, log: Path, processes: list[subprocess.Popen[bytes]]
) -> tuple[subprocess.Popen[bytes], str]:
    """Start `misstriage serve --workers 1` on a free port; the process and its base URL."""
    port = free_port()
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                str(MISSTRIAGE),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "1",
            ],
            env=env,
            cwd=tmp,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    processes.append(process)
    base = f"http://127.0.0.1:{port}"
    wait_healthy(base, process, log)
    return process, base


def bench_backend(
    backend: str, args: argparse.Namespace, processes: list[subprocess.Popen[bytes]]
) -> BackendResult:
    """Fresh database of ``backend``: build the data, time the pages, time the services,
    explain what is slow, optionally add indexes and time again; clean up."""
    result = BackendResult(backend)
    with tempfile.TemporaryDirectory(prefix="misstriage-bench-") as tmp_name:
        tmp = Path(tmp_name)
        log = tmp / "server.log"
        with bench_database() if backend == "postgresql" else nullcontext() as pg_name:
            if backend == "postgresql":
                url = PG_URL.format(name=pg_name)
            else:
                url = f"sqlite:///{tmp / 'bench.db'}"
            secret = random_secret()
            env = {
                **os.environ,
                "DATABASE_URL": url,
                "MISSTRIAGE_ENVIRONMENT": "test",
                "MISSTRIAGE_SECRET_KEY": secret,
            }
            settings = Settings(DATABASE_URL=url, environment="test", secret_key=secret)
            process: subprocess.Popen[bytes] | None = None
            try:
                data = build_data(
                    settings, tmp, args.misses, args.events, args.reviewers, args.leases
                )
                result.data = data
                print(
                    f"  triage {data.triage_id}: {data.misses:,} misses, "
                    f"{sum(data.events.values()):,} events, ready in "
                    f"{data.phases['total']:.1f} s; timing the pages ...",
                    flush=True,
                )
                process, base = serve(env, tmp, log, processes)
                result.pages = time_pages(base, data, args.requests)
                result.services = time_services(settings, data.triage_id)
                result.profiles = profile_pages(settings, data)
                for service, statement in slow_statements(result, result.services):
                    plan = explain(settings, statement)
                    result.plans.append((service, statement.seconds, statement.sql, plan))
                if args.extra_index:
                    stop_server(process)
                    processes.remove(process)
                    process = None
                    engine = make_engine(settings)
                    try:
                        with engine.begin() as connection:
                            for statement in args.extra_index:
                                connection.exec_driver_sql(statement)
                        if backend == "postgresql":
                            vacuum_analyze(engine)
                    finally:
                        engine.dispose()
                    print(f"  {len(args.extra_index)} extra index(es); timing again ...")
                    process, base = serve(env, tmp, log, processes)
                    result.indexed_pages = time_pages(base, data, args.requests)
                    result.indexed_services = time_services(settings, data.triage_id)
                    result.indexed_profiles = profile_pages(settings, data)
            except Exception as error:
                result.error = f"{type(error).__name__}: {error}"
                print(f"  {backend} failed: {result.error}\n{tail(log)}", flush=True)
            finally:
                if process is not None:
                    stop_server(process)
                    processes.remove(process)
                result.log_problems = log_problems(log)
    return result


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (nearest rank) of ``values`` in ms, or None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1] * 1000


def number(value: float | None) -> str:
    """A figure with one decimal (milliseconds, seconds), or a dash."""
    return "-" if value is None else f"{value:.1f}"


def page_table(title: str, rows: list[tuple[str, PageResult]]) -> bool:
    """Print one table of page timings; True when every page met the target, answered
    correctly and was measured."""
    print(
        f"\n{title}\n\n| backend | page | p50 ms | p95 ms | p99 ms | max ms | size KB "
        f"| p95 < {P95_TARGET_MS:g} ms | answers wrong |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ok = True
    for backend, page in rows:
        p95 = percentile(page.times, 95)
        met = p95 is not None and p95 < P95_TARGET_MS and not page.problems
        ok = ok and met
        wrong = ", ".join(f"{k}: {n}" for k, n in sorted(page.problems.items())) or "0"
        print(
            f"| {backend} | `{page.path}` | {number(percentile(page.times, 50))} "
            f"| {number(p95)} | {number(percentile(page.times, 99))} "
            f"| {number(percentile(page.times, 100))} | {page.size / 1024:.1f} "
            f"| {'met' if p95 is not None and p95 < P95_TARGET_MS else 'NOT met'} | {wrong} |"
        )
    return ok


def service_table(title: str, rows: list[tuple[str, ServiceTiming]]) -> None:
    """Print the in-process service timings, statement by statement."""
    print(
        f"\n{title}\n\n| backend | service function | median ms | statements (ms each, last call) |"
    )
    print("|---|---|---|---|")
    for backend, timing in rows:
        parts = [f"{s.seconds * 1000:.1f}" for s in timing.statements]
        print(f"| {backend} | {timing.name} | {timing.median * 1000:.1f} | {', '.join(parts)} |")


def profile_table(title: str, rows: list[tuple[str, PageProfile]]) -> None:
    """Print the in-process page profiles."""
    print(
        f"\n{title}\n\n| backend | page | request ms (median) | of which SQL ms "
        "| other ms (auth, ORM, template) | queries per request |"
    )
    print("|---|---|---|---|---|---|")
    for backend, p in rows:
        print(
            f"| {backend} | {p.name} | {p.total * 1000:.1f} | {p.sql * 1000:.1f} "
            f"| {(p.total - p.sql) * 1000:.1f} | {p.queries} |"
        )


def one_line(statement: str, limit: int = 400) -> str:
    """A SQL statement on one line, shortened."""
    flat = " ".join(statement.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def report(results: list[BackendResult], extra: list[str]) -> bool:
    """Print the tables and the targets; True when every page met the target everywhere."""
    print(
        "\n| backend | misses | labelled | other | open | live leases | events by action "
        "| setup s: schema+accounts / golden+run+triage / labels+events / VACUUM ANALYZE / total |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        d = r.data
        if d is None:
            print(f"| {r.backend} | FAILED: {r.error} | | | | | | |")
            continue
        events = ", ".join(f"{a}: {n:,}" for a, n in d.events.most_common())
        phases = " / ".join(f"{s:.1f}" for s in d.phases.values())
        print(
            f"| {r.backend} | {d.misses:,} | {d.labelled:,} | {d.other:,} "
            f"| {d.misses - d.labelled:,} | {d.leases} | {events} "
            f"(total {sum(d.events.values()):,}) | {phases} |"
        )

    ok = page_table(
        "Pages (HTML with the lead's session cookie; the API with the lead's bearer token)",
        [(r.backend, p) for r in results for p in r.pages],
    )
    ok = ok and all(r.error is None and r.pages for r in results)
    profile_table(
        f"Pages in-process (TestClient, no HTTP server), median of {PROFILE_REQUESTS}",
        [(r.backend, p) for r in results for p in r.profiles],
    )
    service_table(
        "Service functions in-process on the same database",
        [(r.backend, t) for r in results for t in r.services],
    )
    for r in results:
        for service, seconds, statement, plan in r.plans:
            print(f"\n{r.backend}: slow statement of {service} ({seconds * 1000:.1f} ms):")
            print(f"  {one_line(statement)}")
            for line in plan[:25]:
                print(f"    {line}")
    if extra:
        print("\nExtra indexes created in the bench databases:")
        for statement in extra:
            print(f"  {statement}")
        page_table(
            "Pages again, with the extra indexes",
            [(r.backend, p) for r in results for p in r.indexed_pages],
        )
        profile_table(
            "Pages in-process again, with the extra indexes",
            [(r.backend, p) for r in results for p in r.indexed_profiles],
        )
        service_table(
            "Service functions again, with the extra indexes",
            [(r.backend, t) for r in results for t in r.indexed_services],
        )
    for r in results:
        print_log_problems(r.backend, r.log_problems)
        if r.error:
            print(f"\n{r.backend} FAILED: {r.error}")
    return ok


def main() -> None:
    """Parse arguments, arm the time limit, run every backend, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", type=int, default=100_000, help="a multiple of 4")
    parser.add_argument("--events", type=int, default=None, help="default: 2 x misses")
    parser.add_argument("--reviewers", type=int, default=20)
    parser.add_argument("--leases", type=int, default=30, help="open misses with a live lease")
    parser.add_argument("--requests", type=int, default=50, help="timed requests per page")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument(
        "--extra-index",
        action="append",
        default=[],
        metavar="SQL",
        help="a CREATE INDEX statement to try after the first measurement (repeatable)",
    )
    parser.add_argument("--timeout", type=int, default=1800, help="seconds for everything")
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if unknown := set(backends) - set(BACKENDS):
        parser.error(f"unknown backends {sorted(unknown)}; choose from {BACKENDS}")
    if args.misses < 100 or args.misses % RELEVANT_PER_QUERY:
        parser.error(f"--misses must be a multiple of {RELEVANT_PER_QUERY}, at least 100")
    if args.events is None:
        args.events = 2 * args.misses
    if args.reviewers < 1 or args.requests < 1 or args.leases < 0:
        parser.error("--reviewers and --requests must be >= 1, --leases >= 0")
    if args.leases > args.misses - round(args.misses * LABELLED_SHARE):
        parser.error("--leases must not exceed the open misses (20%)")

    def body(processes: list[subprocess.Popen[bytes]]) -> bool:
        results = []
        for backend in backends:
            print(
                f"{backend}: {args.misses:,} misses, {args.events:,} events, "
                f"{args.requests} requests per page ...",
                flush=True,
            )
            results.append(bench_backend(backend, args, processes))
        return report(results, args.extra_index)

    run_bounded(args.timeout, body, name="dashboard")


if __name__ == "__main__":
    main()
