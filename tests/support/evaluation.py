"""Build golden sets and ranked runs from inline text, for tests."""

from __future__ import annotations

from pathlib import Path

from app.eval import Conventions, Gain, Judgments, Order, RunEvaluation, evaluate_run, load_golden
from app.eval.ranking import RankedRun
from app.eval.sources import load_run


def golden(tmp: Path, qrels: str, *, min_grade: int = 1) -> Judgments:
    path = tmp / "qrels.txt"
    path.write_text(qrels)
    return load_golden(path, min_grade=min_grade)


def ranked(
    tmp: Path,
    gold: Judgments,
    run: str,
    *,
    order: Order = Order.TREC_EVAL,
    name: str = "run",
    suffix: str = ".trec",
    keep_results: bool = False,
) -> RankedRun:
    path = tmp / f"{name}{suffix}"
    path.write_text(run)
    return load_run(path, gold, name=name, order=order, keep_results=keep_results)


def evaluate(
    gold: Judgments,
    run: RankedRun,
    *,
    k: int = 10,
    depth: int = 50,
    gain: Gain = Gain.EXP,
    depths: tuple[int, ...] = (10, 20, 50, 100, 200, 1000),
) -> RunEvaluation:
    conventions = Conventions(order=run.order, gain=gain, min_grade=gold.min_grade)
    return evaluate_run(gold, run, k=k, depth=depth, depths=depths, conventions=conventions)


def ranks(run: RankedRun) -> dict[tuple[str, str], int]:
    return {(q, d): r for q, d, r in run.judged.select("qid", "doc_id", "rank").iter_rows()}
