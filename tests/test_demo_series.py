"""The demo's series (issue 28, part 5): its three runs are three commits of one configuration
with their provenance; commit 2's triage is labelled (each miss's hint accepted) and commit 3's
carries those labels exactly where commit 3 misses the same pairs and no copy covers them. The
carried set is recounted here from the two triages' misses, not from the carrying code."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session, col, select

from app.cli.demo import COMMITS, SERIES, seed
from app.db import make_engine
from app.migrate import resource_dir
from app.models import Miss, MissState, Run, Triage
from app.services.triage.closure import triage_detail
from app.settings import Settings


def test_the_demo_series_has_history_and_carried_labels(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    seed(url, resource_dir("examples") / "helpcentre")
    seed(url, resource_dir("examples") / "helpcentre")  # again: nothing is made twice
    engine = make_engine(Settings(DATABASE_URL=url))
    try:
        with Session(engine) as session:
            runs = list(session.exec(select(Run).order_by(col(Run.id))))
            assert [r.series for r in runs] == [SERIES] * 3
            assert [r.meta for r in runs] == [COMMITS[r.name] for r in runs]
            triages = {t.run_id: t for t in session.exec(select(Triage))}
            assert len(triages) == 3
            first, second, third = (triages[r.id] for r in runs if r.id is not None)
            assert first.carried_from_id is None
            assert third.carried_from_id == second.id

            def misses(triage: Triage) -> dict[tuple[str, str], Miss]:
                found = session.exec(select(Miss).where(Miss.triage_id == triage.id))
                return {(m.qid, m.doc_id): m for m in found}

            labelled, carried = misses(second), misses(third)
            assert all(m.state == MissState.LABELLED.value for m in labelled.values())
            expected = {
                pair: labelled[pair].category
                for pair, miss in carried.items()
                if pair in labelled and miss.covered_by is None
            }
            got = {pair: m.category for pair, m in carried.items() if m.state == MissState.CARRIED}
            assert got == expected
            assert len(got) == 9
            # the first triage is the visitor's: nothing labelled, nothing carried
            assert {m.state for m in misses(first).values()} == {"open", "covered"}
            assert third.id is not None
            detail = triage_detail(session=session, triage_id=third.id)
            assert detail.carried == 9
            assert detail.closure.startswith(
                f"0 labelled here + 9 carried from triage {second.id} = 9 of 14 misses"
            )
    finally:
        engine.dispose()
