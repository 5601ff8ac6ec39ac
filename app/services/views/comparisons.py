"""Comparing runs of one golden set: the golden-set page's table of runs at k and depth, same
candidates (a reranker check), misses fixed and introduced, broken down by the causes
reviewers gave them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sqlmodel import Session, col, or_, select

from app.eval import Gain, misses_frame
from app.eval.conventions import DEFAULT_DEPTHS
from app.eval.depth_cost import DEFAULT_TOLERANCE, advise_depth
from app.models import JUDGED, UNLABELLED, GoldenSet, Miss, MissState, Run, RunHead, Triage
from app.models.runs import RunPublic
from app.services.errors import Invalid
from app.services.imports.clusters import require_judged
from app.services.imports.golden_sets import eval_golden_set
from app.services.imports.metrics import DepthCost, Metrics, depth_cost
from app.services.imports.runs import evaluate_stored_run, list_runs, stored_ranking
from app.services.triage import triages as triage_service


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
    """The most recent cause of every (qid, doc_id) labelled in any triage of the golden set;
    "covered" for a pair no triage labelled whose miss was covered by a duplicate (a copy was
    in the candidates): covered is its own row, never "unlabelled"."""
    rows = session.exec(
        select(Miss.qid, Miss.doc_id, Miss.state, Miss.category)
        .join(Triage, col(Triage.id) == col(Miss.triage_id))
        .join(Run, col(Run.id) == col(Triage.run_id))
        .where(
            Run.golden_set_id == golden.id,
            or_(col(Miss.category).is_not(None), col(Miss.state) == MissState.COVERED.value),
        )
        .order_by(col(Miss.labelled_at))
    )
    labels: dict[tuple[str, str], str] = {}
    for qid, doc, state, category in rows:
        if category is not None:
            labels[(qid, doc)] = category
        elif state == MissState.COVERED.value:
            labels.setdefault((qid, doc), COVERED)
    return labels


#: The pseudo-cause of a miss covered by a duplicate.
COVERED = MissState.COVERED.value


def cause_order(causes: list[str], present: object) -> list[str]:
    """The rows of a by-cause table: the golden set's causes in their order, then any other
    cause seen (an older taxonomy's), then "other", "covered" and "unlabelled" last."""
    seen = set(present)  # type: ignore[call-overload]
    tail = ["other", COVERED, UNLABELLED]
    named = [c for c in causes if c in seen and c not in tail]
    extra = sorted(c for c in seen if c not in named and c not in tail)
    return named + extra + [c for c in tail if c in seen]


@dataclass(frozen=True)
class RunRow:
    """One run on its golden set's page: its metrics at k and depth, its triage at that
    depth and k, if one was created, and the depth advisor over its curve at the default
    depths when a reranking cost per candidate was given."""

    run: RunPublic
    metrics: Metrics
    triage_id: int | None
    cost: DepthCost | None = None

    @property
    def recall_k(self) -> float:
        return self.metrics.measures[f"R@{self.metrics.k}"]

    @property
    def recall_depth(self) -> float:
        return self.metrics.measures[f"R@{self.metrics.depth}"]

    @property
    def ndcg_k(self) -> float:
        return self.metrics.measures[f"nDCG@{self.metrics.k}"]

    @property
    def micro_depth(self) -> float:
        return self.metrics.micro[f"R@{self.metrics.depth}"]

    @property
    def curve(self) -> dict[int, float]:
        """Macro recall at the default depths (the chart's points)."""
        return {d: self.metrics.depth_curve[d] for d in DEFAULT_DEPTHS}


#: The columns of the runs table where the best value is marked, and what is best.
BEST_IS_HIGHEST = ("recall_k", "recall_depth", "ndcg_k", "micro_depth")


@dataclass(frozen=True)
class RunBoard:
    """The runs of a golden set at (k, depth): one row a run, the best value of each column
    (``best``: the highest measures, the fewest misses) and the reranker checks."""

    rows: list[RunRow]
    best: dict[str, float]
    checks: list[str]


def run_board(
    *,
    session: Session,
    golden: GoldenSet,
    k: int,
    depth: int,
    gain: Gain,
    cost_ms: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    all_judged_queries: bool = False,
    retrieval_p95: Mapping[int, float] | None = None,
) -> RunBoard:
    """Every run of ``golden`` evaluated at (k, depth) with ``gain`` (its depth curve at the
    default depths too), with the reranker checks of each pair of runs; with a reranking cost
    per candidate ``cost_ms``, each run's depth advisor over the curve at the default depths
    (the smallest depth within ``tolerance`` of its best recall). ``all_judged_queries``:
    trec_eval ``-c``'s averaging."""
    depths = tuple(sorted({*DEFAULT_DEPTHS, k, depth}))
    runs = list_runs(session=session, golden=golden, kind=JUDGED)
    rows = []
    for run in runs:
        evaluation = evaluate_stored_run(
            session=session,
            run=run,
            golden=golden,
            k=k,
            depth=depth,
            gain=gain,
            depths=depths,
            all_judged_queries=all_judged_queries,
        )
        triage = next(
            (
                t.id
                for t in triage_service.list_triages(session=session, run=run)
                if t.depth == depth and t.k == k
            ),
            None,
        )
        metrics = Metrics.of(evaluation)
        curve = {d: metrics.depth_curve[d] for d in DEFAULT_DEPTHS}
        advice = advise_depth(
            curve,
            cost_per_candidate_ms=cost_ms,
            tolerance=tolerance,
            retrieval_p95_ms=retrieval_p95 or None,
        )
        rows.append(
            RunRow(
                run=RunPublic.of(run), metrics=metrics, triage_id=triage, cost=depth_cost(advice)
            )
        )
    best: dict[str, float] = {}
    if rows:
        for key in BEST_IS_HIGHEST:
            best[key] = max(getattr(r, key) for r in rows)
        best["misses"] = min(r.metrics.misses for r in rows)
    return RunBoard(
        rows=rows, best=best, checks=reranker_checks(session=session, runs=runs, rows=rows)
    )


def reranker_checks(*, session: Session, runs: list[Run], rows: list[RunRow]) -> list[str]:
    """For each pair of runs with the same top-``depth`` documents for every query: say that
    recall@depth is the same and that the recall@k change is ordering alone."""
    notes = []
    for i, (run_a, a) in enumerate(zip(runs, rows, strict=True)):
        for run_b, b in zip(runs[i + 1 :], rows[i + 1 :], strict=True):
            k, depth = a.metrics.k, a.metrics.depth
            if same_candidates(session=session, a=run_a, b=run_b, depth=depth):
                same = f"{a.run.name} and {b.run.name} return the same top {depth} documents "
                same += f"for every query: R@{depth} is identical ({a.recall_depth:.4f}), and "
                if f"{a.recall_k:.4f}" == f"{b.recall_k:.4f}":
                    same += f"R@{k} shows no change ({a.recall_k:.4f}): the ordering differs "
                    same += f"at most inside the top {k}."
                else:
                    same += f"the R@{k} change ({a.recall_k:.4f} to {b.recall_k:.4f}) is "
                    same += "ordering alone."
                notes.append(same)
    return notes


@dataclass(frozen=True)
class Comparison:
    """Two runs' misses at one depth: those ``b`` fixes and introduces, by cause."""

    a: RunPublic
    b: RunPublic
    depth: int
    misses_a: int
    misses_b: int
    fixed: list[tuple[str, str, str]]  # (qid, doc_id, cause or "unlabelled")
    introduced: list[tuple[str, str, str]]
    by_cause_a: Counter[str] = field(default_factory=Counter)
    fixed_by_cause: Counter[str] = field(default_factory=Counter)
    introduced_by_cause: Counter[str] = field(default_factory=Counter)

    def sentences(self, name: Callable[[str], str] = str) -> list[str]:
        """ "hybrid fixes 9 of 9 vocabulary-mismatch misses of bm25; introduces 2 unlabelled";
        ``name`` gives each cause its human name (the pages pass the copy's label)."""

        def misses(n: int) -> str:
            return "miss" if n == 1 else "misses"

        def last(c: str) -> tuple[bool, str]:
            return (c in (COVERED, UNLABELLED), c)

        ordered = sorted(self.by_cause_a, key=last)
        parts = [
            f"{self.fixed_by_cause[c]} of {self.by_cause_a[c]} {name(c)} "
            f"{misses(self.by_cause_a[c])}"
            for c in ordered
        ]
        fixes = f"{self.b.name} fixes " + ", ".join(parts) + f" of {self.a.name}"
        if not self.introduced:
            return [fixes + "; introduces none"]
        new = ", ".join(
            f"{n} {name(c)}"
            for c, n in sorted(self.introduced_by_cause.items(), key=lambda i: last(i[0]))
        )
        return [f"{fixes}; introduces {new}"]


def compare(*, session: Session, golden: GoldenSet, a: Run, b: Run, depth: int) -> Comparison:
    if a.golden_set_id != golden.id or b.golden_set_id != golden.id:
        raise Invalid("both runs must belong to the golden set", code="different_golden_sets")
    for run in (a, b):
        require_judged(run)  # a log run is refused for what it is, even compared with itself
    if a.id == b.id:
        raise Invalid(
            f"run {a.name!r} was chosen twice: choose a second, different run to compare it with",
            code="same_run",
        )
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
        a=RunPublic.of(a),
        b=RunPublic.of(b),
        depth=depth,
        misses_a=len(missed_a),
        misses_b=len(missed_b),
        fixed=fixed,
        introduced=introduced,
        by_cause_a=Counter(c for _, _, c in tag(missed_a)),
        fixed_by_cause=Counter(c for _, _, c in fixed),
        introduced_by_cause=Counter(c for _, _, c in introduced),
    )
