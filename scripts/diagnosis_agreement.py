"""How far the per-query diagnosis agrees with a triage's causes, at the triage's depth and k.

For each query with misses on the triage's queue (a miss covered by a duplicate is left out:
the run delivered its evidence), the reviewers' causes say what the quadrant should have said:
every miss ``not-indexed`` -> ingestion; any ``vocabulary-mismatch`` or ``chunk-boundary`` ->
candidate generation (a miss inside the index was there to be found, the diagnosis's own rule).
A miss not labelled yet reads its hint's suggestion instead, as a stand-in (counted and
printed); a query whose causes say neither (``other``, no label and no hint) is not compared.
The quadrant speaks of the misses only for low-recall queries: queries it calls ranking or fine
are counted apart, not compared.

Printed beside the diagnosis: the rule before issue 15 (strict nDCG@k, ingestion always a
guess), recomputed from the same numbers, so the change can be read off.

Run from the repository root::

    python scripts/diagnosis_agreement.py --demo                   # the demo's bm25 triage
    python scripts/diagnosis_agreement.py --golden DIR --run bm25=FILE [--run ...]
    python scripts/diagnosis_agreement.py --database-url URL --triage ID

``--demo`` and ``--golden`` import into a temporary SQLite database and make the triage
(depth 50, k 10) there; its misses are unlabelled, so the hints stand in for the labels (the
demo's browser test labels every miss by accepting the hint, so on the demo the two agree).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sqlmodel import Session, select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.db import make_engine  # noqa: E402
from app.eval.diagnosis import Diagnosis, Thresholds  # noqa: E402
from app.eval.evaluate import QueryEvaluation  # noqa: E402
from app.eval.hints import CHUNK_BOUNDARY, NOT_INDEXED, VOCABULARY_MISMATCH  # noqa: E402
from app.models import Miss, MissState  # noqa: E402
from app.services.imports import runs as run_service  # noqa: E402
from app.services.triage import triages as triage_service  # noqa: E402
from app.settings import Settings  # noqa: E402

DEPTH, K = 50, 10


@dataclass(frozen=True)
class Agreement:
    """One run's figures."""

    run: str
    compared: int
    agree: int
    agree_before: int
    by_pair: Counter[tuple[str, str]]
    by_pair_before: Counter[tuple[str, str]]
    not_compared: Counter[str]
    stand_in: int
    labelled: int


def expected(causes: list[str]) -> Diagnosis | None:
    """The diagnosis a query's causes call for; None when they call for none."""
    if causes and all(c == NOT_INDEXED for c in causes):
        return Diagnosis.INGESTION
    if any(c in (VOCABULARY_MISMATCH, CHUNK_BOUNDARY) for c in causes):
        return Diagnosis.CANDIDATE_GENERATION
    return None


def before(query: QueryEvaluation, thresholds: Thresholds) -> Diagnosis:
    """The quadrant before issue 15: strict nDCG@k, both low = ingestion, no evidence."""
    high_recall = query.recall_depth >= thresholds.recall
    high_ndcg = query.ndcg_k >= thresholds.ndcg
    if high_recall:
        return Diagnosis.FINE if high_ndcg else Diagnosis.RANKING
    return Diagnosis.CANDIDATE_GENERATION if high_ndcg else Diagnosis.INGESTION


def agreement(*, session: Session, triage_id: int) -> Agreement:
    """Compare the diagnosis of the triage's run, at its depth and k, with its causes."""
    context = triage_service.triage_context(session=session, triage_id=triage_id)
    triage = context.triage
    run = run_service.get_run(session=session, run_id=triage.run_id)
    thresholds = Thresholds()
    evaluation = run_service.evaluate_stored_run(
        session=session,
        run=run,
        golden=context.golden,
        k=triage.k,
        depth=triage.depth,
        depths=(triage.k, triage.depth),
        thresholds=thresholds,
    )
    causes: dict[str, list[str]] = {}
    stand_in = labelled = 0
    misses = session.exec(select(Miss).where(Miss.triage_id == triage_id)).all()
    for miss in misses:
        if miss.state == MissState.COVERED.value or miss.covered_by:
            continue
        if miss.category:
            labelled += 1
            causes.setdefault(miss.qid, []).append(miss.category)
        elif miss.hint:
            stand_in += 1
            causes.setdefault(miss.qid, []).append(miss.hint)
        else:
            causes.setdefault(miss.qid, []).append("unlabelled")
    by_pair: Counter[tuple[str, str]] = Counter()
    by_pair_before: Counter[tuple[str, str]] = Counter()
    not_compared: Counter[str] = Counter()
    for query in evaluation.queries:
        if query.qid not in causes:
            if query.misses and query.diagnosis not in (Diagnosis.RANKING, Diagnosis.FINE):
                not_compared["every miss covered by a duplicate"] += 1
            continue
        want = expected(causes[query.qid])
        if want is None:
            not_compared["causes call for no diagnosis"] += 1
            continue
        if query.diagnosis in (Diagnosis.RANKING, Diagnosis.FINE):
            not_compared[f"high recall ({query.diagnosis.value})"] += 1
            continue
        by_pair[(want.value, query.diagnosis.value)] += 1
        by_pair_before[(want.value, before(query, thresholds).value)] += 1
    compared = sum(by_pair.values())
    return Agreement(
        run=run.name,
        compared=compared,
        agree=sum(n for (want, got), n in by_pair.items() if want == got),
        agree_before=sum(n for (want, got), n in by_pair_before.items() if want == got),
        by_pair=by_pair,
        by_pair_before=by_pair_before,
        not_compared=not_compared,
        stand_in=stand_in,
        labelled=labelled,
    )


def report(result: Agreement, counts: dict[str, int]) -> str:
    lines = [
        f"run {result.run}: diagnosis counts {counts}",
        f"  misses read: {result.labelled} labelled, {result.stand_in} by their hint "
        "(stand-in for a label)",
        f"  agreement: {result.agree} of {result.compared} queries "
        f"(before issue 15: {result.agree_before} of {result.compared})",
    ]
    for (want, got), n in sorted(result.by_pair.items()):
        lines.append(f"    causes say {want:<20} diagnosis {got:<20} {n}")
    for (want, got), n in sorted(result.by_pair_before.items()):
        lines.append(f"    before: causes say {want:<20} diagnosis {got:<20} {n}")
    for why, n in sorted(result.not_compared.items()):
        lines.append(f"  not compared: {why}: {n}")
    return "\n".join(lines)


def _seed(url: str, golden_dir: Path, runs: list[tuple[str, Path]]) -> list[int]:
    """Import a BEIR-style folder and runs into ``url``; a triage per run; their ids."""
    from app.migrate import upgrade
    from app.services.imports import golden_sets

    settings = Settings(DATABASE_URL=url)
    upgrade(settings)
    engine = make_engine(settings)
    ids: list[int] = []
    with Session(engine, expire_on_commit=False) as session:
        manifest = golden_dir / "manifest.txt"
        corpus = golden_dir / "corpus.jsonl"
        golden = golden_sets.import_golden_set(
            session=session,
            name=golden_dir.name,
            qrels=golden_dir / "qrels.tsv",
            queries=golden_dir / "queries.jsonl",
            corpus=corpus if corpus.exists() else None,
            manifest=manifest if manifest.exists() else None,
            description="",
        )
        for name, path in runs:
            run = run_service.import_run(
                session=session, golden=golden, name=name, path=path, source_name=path.name
            )
            triage = triage_service.create_triage(
                session=session, run=run, golden=golden, depth=DEPTH, k=K, user=None
            )
            assert triage.id is not None
            ids.append(triage.id)
    engine.dispose()
    return ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo", action="store_true", help="examples/helpcentre, bm25")
    parser.add_argument("--golden", type=Path, help="a folder: qrels.tsv, queries.jsonl, ...")
    parser.add_argument("--run", action="append", default=[], help="NAME=FILE (with --golden)")
    parser.add_argument("--database-url")
    parser.add_argument("--triage", type=int, action="append", default=[])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{tmp}/agreement.db"
        triage_ids: list[int] = list(args.triage)
        if args.demo:
            from app.cli.demo import seed

            triage_ids = [seed(url, ROOT / "examples" / "helpcentre")[1]]
        elif args.golden is not None:
            runs = [(spec.split("=", 1)[0], Path(spec.split("=", 1)[1])) for spec in args.run]
            triage_ids = _seed(url, args.golden, runs)
        if not triage_ids:
            parser.error("say --demo, --golden with --run, or --database-url with --triage")
        engine = make_engine(Settings(DATABASE_URL=url))
        with Session(engine) as session:
            for triage_id in triage_ids:
                result = agreement(session=session, triage_id=triage_id)
                context = triage_service.triage_context(session=session, triage_id=triage_id)
                evaluation = run_service.evaluate_stored_run(
                    session=session,
                    run=context.run,
                    golden=context.golden,
                    k=context.triage.k,
                    depth=context.triage.depth,
                    depths=(context.triage.k, context.triage.depth),
                )
                print(report(result, evaluation.diagnosis_counts))
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
