"""The gate of a stored run: ``misstriage gate`` on the service's own rankings.

The run against a baseline of its golden set (by default the run imported before it in its
series): R@depth and nDCG@k before and after with the paired randomisation test, and the
relevant documents that left or entered the top depth. Computed by the CLI's pure core
(app.eval.gate) from the stored ranks of the judged documents, which is all it reads; the
answer's shared fields are ``GateResult.as_dict()``, the CLI's JSON, so the two cannot drift.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field
from sqlmodel import Session

from app.eval.conventions import DEFAULT_DEPTH, DEFAULT_K, Gain
from app.eval.gate import DEFAULT_MAX_DROP, gate
from app.models import GoldenSet, Run
from app.readmodel import ReadModel, absent_when_none
from app.services.errors import Conflict, Invalid, NotFound
from app.services.imports.golden_sets import eval_golden_set
from app.services.imports.runs import evaluate_stored_run, stored_ranking
from app.services.imports.series import previous_run


class GateRun(ReadModel):
    """A run the gate compared."""

    id: int
    name: str


class GateDocument(ReadModel):
    """A relevant document that left (or entered) the top depth; a rank is null where the run
    did not return it (a rank may be deeper than depth)."""

    model_config = ConfigDict(extra="forbid")

    qid: str
    doc_id: str
    grade: int
    rank_before: int | None
    rank_after: int | None
    #: the query's text, absent when the golden set has none
    text: str | None = Field(default=None, exclude_if=absent_when_none)


class GateMeasure(ReadModel):
    """A macro mean before and after, its change (after - before) and the p-value of the
    paired randomisation test over the per-query values."""

    model_config = ConfigDict(extra="forbid")

    before: float
    after: float
    delta: float
    p_value: float


class GateAnswer(ReadModel):
    """``misstriage gate --format json`` for a stored run, with the two runs and the limits
    it was judged by. Extra fields are refused: a field the core adds fails here first."""

    model_config = ConfigDict(extra="forbid")

    run: GateRun
    baseline: GateRun
    left: list[GateDocument]
    entered: list[GateDocument]
    #: ``R@depth`` and ``nDCG@k``
    measures: dict[str, GateMeasure]
    permutations: int
    seed: int
    passed: bool
    #: why it failed, one sentence each (empty when it passed)
    reasons: list[str]
    depth: int
    k: int
    #: the queries averaged
    queries: int
    max_drop: float
    max_new_misses: int | None


def gate_baseline(*, session: Session, run: Run, baseline_id: int | None) -> Run:
    """The baseline of ``run``: run ``baseline_id`` of the same golden set (404
    ``baseline_not_found``, 422 ``baseline_other_golden_set`` or ``baseline_is_run``), or by
    default the run imported before it in its series (409 ``no_baseline`` when there is none)."""
    if baseline_id is None:
        previous = previous_run(session=session, run=run)
        if previous is None:
            where = (
                f"is the first run of series {run.series!r}"
                if run.series is not None
                else "is in no series"
            )
            raise Conflict(
                f"run {run.id} {where}, so it has no previous run to compare with: "
                "pass ?baseline=<run id> (a run of the same golden set)",
                code="no_baseline",
            )
        return previous
    baseline = session.get(Run, baseline_id)
    if baseline is None:
        raise NotFound(f"no run {baseline_id} to use as the baseline", code="baseline_not_found")
    if baseline.golden_set_id != run.golden_set_id:
        raise Invalid(
            f"run {baseline_id} belongs to another golden set than run {run.id}: the gate "
            "compares two runs of the same judgments",
            code="baseline_other_golden_set",
        )
    if baseline.id == run.id:
        raise Invalid(f"run {run.id} cannot be its own baseline", code="baseline_is_run")
    return baseline


def run_gate(
    *,
    session: Session,
    run: Run,
    golden: GoldenSet,
    baseline: Run,
    k: int = DEFAULT_K,
    depth: int = DEFAULT_DEPTH,
    max_drop: float = DEFAULT_MAX_DROP,
    max_new_misses: int | None = None,
    gain: Gain = Gain.EXP,
    all_judged_queries: bool = False,
) -> GateAnswer:
    """Gate ``run`` against ``baseline`` (same golden set) at k and depth: each run measured
    as its metrics are (``evaluate_stored_run``: the same numbers as its run page), the
    comparison by app.eval.gate with the core's permutations and seed."""
    if not 0 <= max_drop <= 1:
        raise Invalid("max_drop must be between 0 and 1", code="invalid_max_drop")
    if max_new_misses is not None and max_new_misses < 0:
        raise Invalid("max_new_misses must be >= 0", code="invalid_max_new_misses")
    assert run.id is not None
    assert baseline.id is not None
    gold = eval_golden_set(session=session, golden=golden)
    ranked = [stored_ranking(session=session, run=r, gold=gold) for r in (baseline, run)]
    before, after = (
        evaluate_stored_run(
            session=session,
            run=r,
            golden=golden,
            k=k,
            depth=depth,
            gain=gain,
            all_judged_queries=all_judged_queries,
            gold=gold,
            ranked=ranking,
        )
        for r, ranking in zip((baseline, run), ranked, strict=True)
    )
    result = gate(
        gold,
        ranked[0],
        ranked[1],
        before,
        after,
        max_drop=max_drop,
        max_new_misses=max_new_misses,
    )
    return GateAnswer.model_validate(
        {
            **result.as_dict(),
            "run": GateRun(id=run.id, name=run.name),
            "baseline": GateRun(id=baseline.id, name=baseline.name),
            "max_drop": max_drop,
            "max_new_misses": max_new_misses,
        }
    )
