"""Runs imported while a detector run is applied, against a real server with two worker
processes, on SQLite and on PostgreSQL.

The corpus holds copies of known truth and the run ranks them, so each threshold gives the
run other cluster figures: J 0.5 clusters more copies than J 0.95. Round after round, a
judged run and a log run are imported at the moment the detector run is applied at the other
threshold (a barrier releases the three). Each import answers 201, measured on the
clustering it names, or 409 ``clusters_changed`` (the clusters changed while the file was
read: nothing of it is kept); never anything else. After the round, the clustering stored is
the apply's, and a judged run imported in it has the figures a judged run imported alone with
that clustering has: its unique-clusters@k, its cluster-recall@k and the threshold they name
(one imported before the apply committed was measured again by it). A log run keeps no
rankings to be measured again with: it has the figures of one clustering whole, and names
that clustering's threshold (not the one applied since).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from app.models import Role, Run
from app.services.accounts import users
from app.services.dedup import detector_runs
from app.services.imports import golden_sets
from tests.support.concurrency import at_once
from tests.support.dupe_corpus import make_corpus
from tests.support.live import LiveServer
from tests.support.service import TEST_SECRET

THRESHOLDS = (0.5, 0.95)
ROUNDS = 16
DEADLINE_S = 240
#: Queries of the run files the golden set holds unjudged (read, ranked, traced: a parse long
#: enough to overlap an apply; their rankings are kept, so an apply measures them again).
EXTRA_QUERIES = 3000


@dataclass(frozen=True)
class Setup:
    golden_id: int
    detector_id: int
    token: str
    judged: Path
    log: Path


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[LiveServer]:
    live = LiveServer(database_url, tmp_path, secret=TEST_SECRET, workers=2)
    yield live
    live.stop()


def _setup(engine: Engine, tmp: Path) -> Setup:
    """A golden set whose corpus has copies, a detection kept down to J 0.3, a lead's token,
    and a judged and a log run file that rank the copies."""
    corpus = make_corpus(120, copy_share=0.3, seed=11)
    groups: dict[str, list[str]] = {}
    for doc, group in corpus.truth.items():
        groups.setdefault(group, []).append(doc)
    copied = sorted((sorted(m) for m in groups.values() if len(m) > 1), key=lambda m: m[0])
    every = sorted(corpus.truth)
    qrels, ranking, queries = [], [], []
    for i, members in enumerate(copied):
        qrels.append(f"q{i}\t0\t{members[0]}\t1\n")
        queries.append(json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n")
        # the copies first (cluster-recall counts one as its relevant one), then others
        ranked = [*members[1:], *[d for d in every if d not in members][i % 7 :: 7][:12]]
        ranking.extend(f"q{i} Q0 {d} {r} {100 - r} t\n" for r, d in enumerate(ranked, 1))
    for j in range(EXTRA_QUERIES):
        ranked = every[j % 11 :: 11][:20]
        ranking.extend(f"x{j} Q0 {d} {r} {100 - r} t\n" for r, d in enumerate(ranked, 1))
        queries.append(json.dumps({"_id": f"x{j}", "text": f"unjudged {j}"}) + "\n")
    (tmp / "qrels.tsv").write_text("".join(qrels))
    (tmp / "queries.jsonl").write_text("".join(queries))
    (tmp / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus.docs))
    (tmp / "run.trec").write_text("".join(ranking))
    (tmp / "log.trec").write_text("".join(ranking))
    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(
            session=session,
            name="copies",
            qrels=tmp / "qrels.tsv",
            queries=tmp / "queries.jsonl",
            corpus=tmp / "corpus.jsonl",
        )
        detection = detector_runs.detect_duplicates(
            session=session, golden=golden, user=None, threshold=0.8, near=0.5
        )
        detection = detector_runs.apply_threshold(
            session=session, run=detection, threshold=THRESHOLDS[0], user=None,
            now=datetime.now(UTC),
        )  # fmt: skip
        lead = users.create_user(
            session=session, email="lead@example.com", password="long enough", role=Role.LEAD
        )
        token = users.create_token(session=session, user=lead, name="t").secret
    assert golden.id is not None
    assert detection.id is not None
    return Setup(golden.id, detection.id, token, tmp / "run.trec", tmp / "log.trec")


def _import(http: httpx.Client, setup: Setup, name: str, kind: str) -> httpx.Response:
    path = setup.judged if kind == "judged" else setup.log
    with path.open("rb") as handle:
        return http.post(
            f"/api/v1/golden-sets/{setup.golden_id}/runs",
            data={"name": name, "kind": kind},
            files={"run": (path.name, handle, "text/plain")},
        )


def _round(
    url: str, headers: dict[str, str], setup: Setup, threshold: float, name: str
) -> dict[str, httpx.Response]:
    """The apply at ``threshold``, a judged and a log run's import sent at the same moment,
    each from a client of its own."""

    def send(what: str) -> httpx.Response:
        with httpx.Client(base_url=url, headers=headers, timeout=120) as own:
            if what == "apply":
                return own.post(
                    f"/api/v1/detector-runs/{setup.detector_id}/apply",
                    json={"threshold": threshold},
                )
            return _import(own, setup, f"{name} {what}", what)

    kinds = ("apply", "judged", "log")
    answers = at_once([lambda what=what: send(what) for what in kinds], seconds=DEADLINE_S)
    return dict(zip(kinds, answers, strict=True))


def _figures(http: httpx.Client, run_id: int, kind: str) -> dict[str, Any]:
    """What a run says of its clusters: unique-clusters@k over every query and, for a judged
    run, cluster-recall@k; the threshold of the clustering each names."""
    clusters = http.get(f"/api/v1/runs/{run_id}/clusters")
    assert clusters.status_code == 200, clusters.text[:300]
    said = clusters.json()
    said.pop("run_id")
    figures = {"clusters": said}
    if kind == "judged":
        metrics = http.get(f"/api/v1/runs/{run_id}/metrics", params={"k": 5, "depth": 5})
        assert metrics.status_code == 200, metrics.text[:300]
        figures["metrics"] = metrics.json()["clusters"]
    return figures


def _threshold_of(figures: dict[str, Any]) -> list[float | None]:
    return [(part.get("detector_run") or {}).get("threshold") for part in figures.values()]


def _diff(a: Any, b: Any, at: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        return "".join(_diff(a.get(k), b.get(k), f"{at}.{k}") for k in sorted(set(a) | set(b)))
    return "" if a == b else f" {at}: {a!r:.80} != {b!r:.80}"


def _error_code(answer: httpx.Response) -> str:
    if not answer.is_error:
        return ""
    try:
        return str(answer.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return answer.text[:200]


def _unnamed(figures: dict[str, Any]) -> dict[str, Any]:
    """The figures without the detector run they name."""
    return {what: {**part, "detector_run": None} for what, part in figures.items()}


def test_runs_imported_during_applies_are_measured_on_the_clustering_they_name(
    engine: Engine, server: LiveServer, tmp_path: Path
) -> None:
    setup = _setup(engine, tmp_path)
    apply = f"/api/v1/detector-runs/{setup.detector_id}/apply"
    headers = {"Authorization": f"Bearer {setup.token}"}
    started = time.monotonic()
    with httpx.Client(base_url=server.url, headers=headers, timeout=120) as http:
        # what each threshold gives a run imported alone with its clusters
        expected: dict[tuple[float, str], dict[str, Any]] = {}
        for threshold in THRESHOLDS:
            assert http.post(apply, json={"threshold": threshold}).status_code == 200
            for kind in ("judged", "log"):
                alone = _import(http, setup, f"alone {threshold} {kind}", kind)
                assert alone.status_code == 201, alone.text[:300]
                figures = _figures(http, alone.json()["id"], kind)
                assert _threshold_of(figures) == [threshold] * len(figures)
                expected[threshold, kind] = figures
        for kind in ("judged", "log"):
            assert expected[THRESHOLDS[0], kind] != expected[THRESHOLDS[1], kind]

        answers: Counter[tuple[str, int, str]] = Counter()
        wrong: list[str] = []
        for round_ in range(ROUNDS):
            assert time.monotonic() - started < DEADLINE_S, f"round {round_}: out of time"
            threshold = THRESHOLDS[round_ % 2]
            got = _round(server.url, headers, setup, threshold, f"round {round_}")
            assert got["apply"].status_code == 200, got["apply"].text[:300]
            for kind in ("judged", "log"):
                answer = got[kind]
                code = _error_code(answer)
                answers[kind, answer.status_code, code] += 1
                if answer.status_code != 201:
                    continue
                figures = _figures(http, answer.json()["id"], kind)
                if kind == "judged" and figures != expected[threshold, kind]:
                    wrong.append(
                        f"round {round_}: a judged run imported while J {threshold} was applied "
                        f"names J {_threshold_of(figures)} with other figures than a run imported "
                        "alone has" + _diff(figures, expected[threshold, kind])
                    )
                named = _threshold_of(figures)[0]
                if kind == "log" and (
                    named not in THRESHOLDS or _unnamed(figures) != _unnamed(expected[named, kind])
                ):
                    wrong.append(
                        f"round {round_}: a log run named J {named} with figures of another "
                        "clustering or of a mix"
                    )
    allowed = {
        (kind, code, error)
        for kind in ("judged", "log")
        for code, error in ((201, ""), (409, "clusters_changed"))
    }
    assert set(answers) <= allowed, answers
    assert wrong == [], f"{len(wrong)} wrong: {wrong[:4]} ({answers})"
    imported = sum(n for (_, code, _), n in answers.items() if code == 201)
    assert imported >= ROUNDS // 2, f"too few imports went through: {answers}"
    # the refused imports left nothing
    with Session(engine) as session:
        stored = session.exec(
            select(func.count()).where(Run.golden_set_id == setup.golden_id)
        ).one()
    assert stored == 2 * len(THRESHOLDS) + imported
