"""Build a golden set, a run and a triage with a known number of misses, through services."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.models import GoldenSet, Run, Triage
from app.services import golden_sets, runs, triages


def make_triage(
    engine: Engine, tmp: Path, *, queries: int = 5, per_query: int = 2, name: str = "g"
) -> tuple[GoldenSet, Run, Triage]:
    """``queries`` queries with ``per_query`` relevant documents each (grades 1..per_query),
    and a run that returns none of them: queries x per_query misses."""
    qrels = "".join(f"q{q} 0 d{q}-{i} {i + 1}\n" for q in range(queries) for i in range(per_query))
    run = "".join(
        f"q{q} Q0 noise{q}-{r} {r + 1} {100 - r} t\n" for q in range(queries) for r in range(3)
    )
    (tmp / f"{name}.qrels").write_text(qrels)
    (tmp / f"{name}.trec").write_text(run)
    with Session(engine, expire_on_commit=False) as session:
        golden = golden_sets.import_golden_set(
            session=session, name=name, qrels=tmp / f"{name}.qrels"
        )
        stored = runs.import_run(
            session=session,
            golden=golden,
            name="run",
            path=tmp / f"{name}.trec",
            source_name="run.trec",
        )
        triage = triages.create_triage(
            session=session, run=stored, golden=golden, depth=10, k=1, user=None
        )
    return golden, stored, triage
