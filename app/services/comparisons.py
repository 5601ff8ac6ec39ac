"""Comparing runs of one golden set: same candidates (a reranker check), misses fixed and
introduced, broken down by the causes reviewers gave them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from sqlmodel import Session, col, select

from app.eval import misses_frame
from app.models import UNLABELLED, GoldenSet, Miss, Run, RunHead, Triage
from app.services.errors import Invalid
from app.services.golden_sets import eval_golden_set
from app.services.runs import stored_ranking


def top_sets(*, session: Session, run: Run, depth: int) -> dict[str, frozenset[str]] | None:
    """Each query's top-``depth`` documents, or None when the run kept fewer than ``depth``."""
    if depth > run.keep_depth:
        return None
    rows = session.exec(select(RunHead.qid, RunHead.ranking).where(RunHead.run_id == run.id))
    return {qid: frozenset(ranking["doc_ids"][:depth]) for qid, ranking in rows}


def same_candidates(*, session: Session, a: Run, b: Run, depth: int) -> bool | None:
    """True when both runs put the same documents in their top ``depth`` for every query
    (a reranker over the same first stage); None when the stored heads are too short to say."""
    first, second = (
        top_sets(session=session, run=a, depth=depth),
        top_sets(session=session, run=b, depth=depth),
    )
    if first is None or second is None:
        return None
    return first == second


def latest_labels(*, session: Session, golden: GoldenSet) -> dict[tuple[str, str], str]:
    """The most recent cause of every (qid, doc_id) labelled in any triage of the golden set."""
    rows = session.exec(
        select(Miss.qid, Miss.doc_id, Miss.category)
        .join(Triage, col(Triage.id) == col(Miss.triage_id))
        .join(Run, col(Run.id) == col(Triage.run_id))
        .where(Run.golden_set_id == golden.id, col(Miss.category).is_not(None))
        .order_by(col(Miss.labelled_at))
    )
    return {(qid, doc): category for qid, doc, category in rows if category is not None}


@dataclass
class Comparison:
    a: Run
    b: Run
    depth: int
    misses_a: int
    misses_b: int
    fixed: list[tuple[str, str, str]]  # (qid, doc_id, cause or "unlabelled")
    introduced: list[tuple[str, str, str]]
    by_cause_a: Counter[str] = field(default_factory=Counter)
    fixed_by_cause: Counter[str] = field(default_factory=Counter)
    introduced_by_cause: Counter[str] = field(default_factory=Counter)

    def sentences(self) -> list[str]:
        """ "hybrid fixes 9 of 9 vocabulary-mismatch misses of bm25; introduces 2 unlabelled"."""
        parts = [
            f"{self.fixed_by_cause[c]} of {self.by_cause_a[c]} {c}"
            for c in sorted(self.by_cause_a, key=lambda c: (c == UNLABELLED, c))
        ]
        fixes = f"{self.b.name} fixes " + ", ".join(parts) + f" misses of {self.a.name}"
        if not self.introduced:
            return [fixes + "; introduces none"]
        new = ", ".join(f"{n} {c}" for c, n in sorted(self.introduced_by_cause.items()))
        return [f"{fixes}; introduces {new}"]


def compare(*, session: Session, golden: GoldenSet, a: Run, b: Run, depth: int) -> Comparison:
    if a.golden_set_id != golden.id or b.golden_set_id != golden.id:
        raise Invalid("both runs must belong to the golden set", code="different_golden_sets")
    gold = eval_golden_set(session=session, golden=golden)

    def misses(run: Run) -> set[tuple[str, str]]:
        frame = misses_frame(gold, stored_ranking(session=session, run=run, gold=gold), depth)
        return set(frame.select("qid", "doc_id").iter_rows())

    missed_a, missed_b = misses(a), misses(b)
    labels = latest_labels(session=session, golden=golden)

    def tag(pairs: set[tuple[str, str]]) -> list[tuple[str, str, str]]:
        return sorted((q, d, labels.get((q, d), UNLABELLED)) for q, d in pairs)

    fixed, introduced = tag(missed_a - missed_b), tag(missed_b - missed_a)
    return Comparison(
        a=a,
        b=b,
        depth=depth,
        misses_a=len(missed_a),
        misses_b=len(missed_b),
        fixed=fixed,
        introduced=introduced,
        by_cause_a=Counter(c for _, _, c in tag(missed_a)),
        fixed_by_cause=Counter(c for _, _, c in fixed),
        introduced_by_cause=Counter(c for _, _, c in introduced),
    )
