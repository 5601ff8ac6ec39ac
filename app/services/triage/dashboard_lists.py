"""The dashboard's lists that change only when a label or a skip does: the first misses of the
residue (what keeps the categories from closing) with their queries' texts, and the skips in
force on unlabelled misses. Kept per triage under the label key (app/services/kept.py): at
100,000 misses reading them costs 10-30 ms a page (the skips: every skip in force joined to the
open misses and sorted by time), and a dashboard opened again with nothing changed need not.
The counts beside them are read fresh on every page: the residue's from the queue's tally,
the skips' with their list."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session

from app.models import GoldenSet, Triage
from app.services.imports import golden_sets as golden_service
from app.services.queue import skips as skips_service
from app.services.triage.dashboard import BacklogRow, residue_rows
from app.services.triage.kept import Kept, LabelKey, label_key, slot_of

#: Misses of the residue the dashboard lists (the backlog has them all).
RESIDUE_SHOWN = 100
#: Skips in force the dashboard lists (the backlog's "skipped" filter has them all).
SKIPS_SHOWN = 100


@dataclass(frozen=True)
class LabelLists:
    """The residue's first misses with their queries' texts, the first skips in force on
    unlabelled misses and how many skips are in force."""

    residue: list[BacklogRow]
    texts: dict[str, str]
    skipped: list[skips_service.Skip]
    skipped_total: int


_lists: Kept[LabelLists] = Kept()


def label_lists(
    *, session: Session, triage: Triage, golden: GoldenSet, key: LabelKey | None = None
) -> LabelLists:
    """The dashboard's residue and skips (see the module docstring), kept until the triage's
    labels change. ``key``: the triage's ``label_key`` when the caller has it."""
    slot = slot_of(session, triage)
    key = key if key is not None else label_key(session, triage)
    hit = _lists.get(slot, key)
    if hit is not None:
        return hit
    rows = residue_rows(session=session, triage=triage, limit=RESIDUE_SHOWN)
    skipped, skipped_total = skips_service.open_skips(
        session=session, triage=triage, limit=SKIPS_SHOWN
    )
    lists = LabelLists(
        residue=rows,
        texts=golden_service.query_texts(
            session=session, golden=golden, qids={row.miss.qid for row in rows}
        ),
        skipped=skipped,
        skipped_total=skipped_total,
    )
    _lists.put(slot, key, lists)
    return lists
