"""Benchmark: how fast a gzip decompression bomb is refused, and how fast a long legitimate
JSON line is read.

A 1 GiB stream of zeros gzip-compressed to about 1 MB goes through every path that reads an
upload: ``misstriage evaluate`` (qrels, run, corpus), ``import-golden-set`` (qrels, queries,
corpus), ``import-run`` and a real server's ``POST /api/v1/golden-sets``. Each path is timed
--runs times (a whole process for the commands, the request for the server); the median is
compared with the bound of issue 13: refused in under 10 s. The long line is one JSONL ranking of
300,000 documents, whose bracket scan must stay linear. Exits 1 when a median misses its bound.

    python benchmarks/bomb_refusal.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import httpx
from support import MISSTRIAGE, free_port, random_secret, stop_server, wait_healthy

BOUND_SECONDS = 10.0
MIB = 1 << 20
QRELS = "q1 0 d1 1\nq1 0 d2 2\nq2 0 d3 1\n"
RUN = "q1 Q0 d1 1 2.0 r\nq1 Q0 d9 2 1.0 r\nq2 Q0 d3 1 1.0 r\n"


def make_bomb(path: Path) -> None:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(MIB)
    with path.open("wb") as out:
        for _ in range(1024):
            out.write(packer.compress(zeros))
        out.write(packer.flush())


def timed_command(args: list[str], env: dict[str, str]) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [str(MISSTRIAGE), *args], env=env, capture_output=True, text=True, check=False
    )
    seconds = time.monotonic() - started
    if done.returncode != 2 or "decompression bomb" not in done.stderr:
        raise SystemExit(f"not refused as a bomb: {args}: {done.returncode} {done.stderr[:300]}")
    return seconds


def server_times(work: Path, bomb: Path, env: dict[str, str], runs: int) -> list[float]:
    """POST /api/v1/golden-sets with the bomb as qrels, on a real server, ``runs`` times."""
    port = free_port()
    password = random_secret()
    subprocess.run(
        [str(MISSTRIAGE), "create-user", "--email", "lead@example.com", "--password", password,
         "--role", "lead"],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    token = subprocess.run(
        [str(MISSTRIAGE), "create-token", "--email", "lead@example.com"],
        env=env, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    log_path = work / "server.log"
    log = log_path.open("wb")
    server = subprocess.Popen(
        [str(MISSTRIAGE), "serve", "--port", str(port)], env=env, stdout=log, stderr=log
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, server, log_path)
        data = bomb.read_bytes()
        times = []
        with httpx.Client(base_url=url, timeout=120) as client:
            for number in range(runs):
                started = time.monotonic()
                answer = client.post(
                    "/api/v1/golden-sets",
                    headers={"Authorization": f"Bearer {token}"},
                    data={"name": f"bomb-{number}"},
                    files={"qrels": (bomb.name, data)},
                )
                times.append(time.monotonic() - started)
                if answer.status_code != 400 or "decompression bomb" not in answer.text:
                    raise SystemExit(f"server did not refuse: {answer.status_code}")
        return times
    finally:
        stop_server(server)
        log.close()


def long_line_times(work: Path, runs: int) -> list[float]:
    entries = [{"doc_id": f"d{i}", "score": 1.0 / (i + 1)} for i in range(300_000)]
    path = work / "long.jsonl"
    path.write_text(json.dumps({"qid": "q1", "docs": entries}) + "\n")
    code = (
        "import sys, time; from pathlib import Path; from app.eval.jsonl import read_jsonl_run;"
        "t = time.monotonic(); frame, _ = read_jsonl_run(Path(sys.argv[1]));"
        "assert frame.height == 300_000; print(time.monotonic() - t)"
    )
    times = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
        )
        times.append(float(done.stdout))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="misstriage-bomb-") as tmp:
        work = Path(tmp)
        bomb = work / "bomb.qrels.gz"
        make_bomb(bomb)
        q, r = str(work / "q.qrels"), str(work / "r.trec")
        Path(q).write_text(QRELS)
        Path(r).write_text(RUN)
        env = {
            **os.environ,
            "MISSTRIAGE_ENVIRONMENT": "test",
            "MISSTRIAGE_SECRET_KEY": random_secret(),
            "DATABASE_URL": f"sqlite:///{work / 'bench.db'}",
        }
        golden = ["import-golden-set", "--name", "g", "--qrels", q]
        subprocess.run([str(MISSTRIAGE), *golden], env=env, check=True, capture_output=True)
        paths = {
            "evaluate --qrels BOMB": ["evaluate", "--qrels", str(bomb), "--run", f"r={r}"],
            "evaluate --run BOMB": ["evaluate", "--qrels", q, "--run", f"r={bomb}"],
            "evaluate --corpus BOMB": ["evaluate", "--qrels", q, "--run", f"r={r}",
                                       "--corpus", str(bomb)],
            "import-golden-set --qrels BOMB": ["import-golden-set", "--name", "b1",
                                               "--qrels", str(bomb)],
            "import-golden-set --queries BOMB": ["import-golden-set", "--name", "b2",
                                                 "--qrels", q, "--queries", str(bomb)],
            "import-golden-set --corpus BOMB": ["import-golden-set", "--name", "b3",
                                                "--qrels", q, "--corpus", str(bomb)],
            "import-run --run BOMB": ["import-run", "--golden-set", "g", "--name", "r",
                                      "--run", str(bomb)],
        }  # fmt: skip
        rows = {
            label: [timed_command(command, env) for _ in range(args.runs)]
            for label, command in paths.items()
        }
        rows["server POST /api/v1/golden-sets qrels=BOMB"] = server_times(
            work, bomb, env, args.runs
        )
        rows["read a 300,000-document JSONL line"] = long_line_times(work, args.runs)
    missed = False
    print(f"{'path':<46} {'runs (s)':<24} {'median':>8}  bound {BOUND_SECONDS:.0f} s")
    for label, times in rows.items():
        median = statistics.median(times)
        verdict = "ok" if median < BOUND_SECONDS else "MISSED"
        missed |= median >= BOUND_SECONDS
        shown = ", ".join(f"{t:.2f}" for t in times)
        print(f"{label:<46} {shown:<24} {median:>8.2f}  {verdict}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
