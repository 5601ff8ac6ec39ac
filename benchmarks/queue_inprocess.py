"""Benchmark: the queue's hot path in one process, without HTTP sockets (for profiling).

One reviewer drains a triage of --misses misses through the app (FastAPI's TestClient, so
routing, dependencies, auth and the services run as in a server): ``claim`` then ``label``
per miss (--mode separate), or ``claim`` once then ``label?next=1`` (--mode next). Prints the
process CPU and wall time per labelled miss and the SQL statements per labelled miss
(counted with a ``before_cursor_execute`` listener: BEGIN/COMMIT issued by the driver are not
statements, the pre-ping's ``SELECT 1`` is). --profile FILE writes a cProfile of the loop.

The CPU figure includes the test client's own work (the same in both modes and versions), so
compare runs of this script with each other, never with server-side figures. Timings on a
shared machine are noisy: interleave A/B runs and take medians.

Usage: python benchmarks/queue_inprocess.py [--backend sqlite|postgresql] [--misses 400]
       [--mode separate|next] [--profile out.prof]
"""

from __future__ import annotations

import argparse
import cProfile
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import event
from sqlmodel import Session
from support import PG_URL, bench_database

from app.db import make_engine
from app.main import create_app
from app.migrate import upgrade
from app.models import Role
from app.services.accounts import users
from tests.support.service import PASSWORD, make_settings
from tests.support.triage import make_triage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--misses", type=int, default=400, help="an even number")
    parser.add_argument("--mode", choices=["separate", "next"], default="separate")
    parser.add_argument("--profile", type=Path, default=None)
    args = parser.parse_args()
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="misstriage-hot-")))
        if args.backend == "sqlite":
            url = f"sqlite:///{tmp / 'bench.db'}"
        else:
            url = PG_URL.format(name=stack.enter_context(bench_database()))
        settings = make_settings(url)
        upgrade(settings)
        engine = make_engine(settings)
        stack.callback(engine.dispose)
        make_triage(engine, tmp, queries=args.misses // 2, per_query=2)
        with Session(engine, expire_on_commit=False) as session:
            user = users.create_user(
                session=session, email="r@example.com", password=PASSWORD, role=Role.REVIEWER
            )
            token = users.create_token(session=session, user=user, name="t").secret
        headers = {"Authorization": f"Bearer {token}"}
        client = stack.enter_context(TestClient(create_app(settings, engine)))
        statements = [0]

        def count(*_: Any) -> None:
            statements[0] += 1

        event.listen(engine, "before_cursor_execute", count)
        profiler = cProfile.Profile() if args.profile else None
        labelled = 0
        cpu0, wall0 = time.process_time(), time.perf_counter()
        if profiler:
            profiler.enable()
        claim_url = "/api/v1/triages/1/claim"
        answer = client.post(claim_url, headers=headers)
        miss = answer.json() if answer.status_code == 200 else None
        while miss is not None:
            body = {"category": "not-indexed", "version": miss["version"]}
            if args.mode == "next":
                done = client.post(
                    f"/api/v1/misses/{miss['id']}/label?next=1", headers=headers, json=body
                )
                assert done.status_code == 200, done.text
                labelled += 1
                miss = done.json()["next"]
            else:
                done = client.post(f"/api/v1/misses/{miss['id']}/label", headers=headers, json=body)
                assert done.status_code == 200, done.text
                labelled += 1
                answer = client.post(claim_url, headers=headers)
                miss = answer.json() if answer.status_code == 200 else None
        if profiler:
            profiler.disable()
            profiler.dump_stats(args.profile)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        assert labelled == args.misses, (labelled, args.misses)
        print(
            f"{args.backend} {args.mode}: {labelled} labelled; per labelled miss "
            f"CPU {cpu / labelled * 1000:.2f} ms, wall {wall / labelled * 1000:.2f} ms, "
            f"SQL statements {statements[0] / labelled:.1f}"
        )


if __name__ == "__main__":
    main()
