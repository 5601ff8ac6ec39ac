"""Plain-text rendering of evaluation results for the terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.eval import RunEvaluation, formatting
from app.eval.clusters import FEW, ClusterEvaluation
from app.eval.depth_cost import DepthAdvice
from app.eval.diagnosis import DIAGNOSIS_MEANING, Diagnosis


def format_number(value: float | None) -> str:
    return formatting.measure(value, missing="-")


format_ms = formatting.ms


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-align the first column, right-align the rest."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            str(cell).ljust(width) if i == 0 else str(cell).rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def summary_header(k: int, depth: int) -> list[str]:
    return ["run", f"R@{k}", f"R@{depth}", f"nDCG@{k}", f"micro R@{depth}", f"misses@{depth}"]


def summary_row(result: RunEvaluation) -> list[str]:
    k, depth = result.k, result.depth
    return [
        result.name,
        format_number(result.measures[f"R@{k}"]),
        format_number(result.measures[f"R@{depth}"]),
        format_number(result.measures[f"nDCG@{k}"]),
        format_number(result.micro[f"R@{depth}"]),
        f"{result.misses}/{result.relevant}",
    ]


def render_summary(results: Sequence[RunEvaluation]) -> str:
    first = results[0]
    conv = first.conventions
    lines = [
        render_table(summary_header(first.k, first.depth), [summary_row(r) for r in results]),
        "",
        f"{len(first.queries)} queries averaged (macro); micro pools relevant documents; "
        f"order={conv.order.value}, gain={conv.gain.value}, ideal=strict, "
        f"relevant: grade >= {conv.min_grade}.",
    ]
    curve_depths = list(first.depth_curve)
    curve_rows = [
        [r.name, *(format_number(r.depth_curve[d]) for d in curve_depths)] for r in results
    ]
    lines += [
        "",
        "depth curve (macro recall):",
        render_table(["run", *(f"R@{d}" for d in curve_depths)], curve_rows),
    ]
    diag_rows = [[r.name, *(str(r.diagnosis_counts[d.value]) for d in Diagnosis)] for r in results]
    lines += [
        "",
        f"diagnosis per query (R@{first.depth} >= {first.thresholds.recall}, "
        f"nDCG_cand@{first.k} >= {first.thresholds.ndcg}; "
        + (
            "ingestion: every miss outside the --corpus"
            if first.index_evidence
            else "ingestion is a guess: no --corpus says what the index holds"
        )
        + "):",
        render_table(["run", *(d.value for d in Diagnosis)], diag_rows),
    ]
    lines += [f"  {DIAGNOSIS_MEANING[d]}" for d in Diagnosis]
    warnings = [(r.name, w) for r in results for w in r.report.warnings]
    if warnings:
        lines += ["", "warnings:"] + [f"  {name}: {text}" for name, text in warnings]
    return "\n".join(lines)


def render_clusters(clusters: Mapping[str, ClusterEvaluation]) -> str:
    """Duplicate clusters: how many distinct documents the top k holds, and recall when
    copies count once."""
    k = next(iter(clusters.values())).k
    rows = [
        [
            name,
            f"{c.median_unique:g}",
            formatting.share(c.share_few),
            format_number(c.cluster_recall),
            format_number(c.cluster_recall_micro),
        ]
        for name, c in clusters.items()
    ]
    header = [
        "run",
        f"unique-clusters@{k} median",
        f"queries <= {FEW}",
        f"cluster-R@{k}",
        f"micro cluster-R@{k}",
    ]
    return (
        "duplicate clusters (copies of one document count once; a document without a "
        "cluster is its own):\n" + render_table(header, rows)
    )


def render_depth_cost(advice: Mapping[str, DepthAdvice]) -> str:
    """The depth advisor of each run: the depth curve with the reranking cost beside every
    depth, the recall per added ms and the step's sentence, then where depth stops paying."""
    first = next(iter(advice.values()))
    lines = [
        f"depth advisor (reranking {format_ms(first.cost_per_candidate_ms)} ms per candidate; "
        f"advised: the smallest depth within {first.tolerance:g} R of the best recall):"
    ]
    for name, runs_advice in advice.items():
        sentences = ["", *runs_advice.sentences()]
        gains: list[float | None] = [None, *(s.recall_gain for s in runs_advice.steps)]
        rows = [
            [
                str(p.depth),
                format_number(p.recall),
                format_ms(p.cost_ms),
                formatting.rate(p.gain_per_ms, gain, missing="-"),
                sentence,
            ]
            for p, gain, sentence in zip(runs_advice.points, gains, sentences, strict=True)
        ]
        header = ["depth", "R@depth", "cost (ms/query)", "recall per added second", "step"]
        lines += ["", f"run {name}:", render_table(header, rows), f"  {runs_advice.advice()}"]
    return "\n".join(lines)


def render_per_query(result: RunEvaluation) -> str:
    k, depth = result.k, result.depth
    header = [
        "qid",
        f"R@{k}",
        f"R@{depth}",
        f"nDCG@{k}",
        f"nDCG_cand@{k}",
        "misses",
        "diagnosis",
        "reason",
    ]
    rows = [
        [
            q.qid,
            format_number(q.recall_k),
            format_number(q.recall_depth),
            format_number(q.ndcg_k),
            format_number(q.ndcg_cand_k),
            str(q.misses),
            q.diagnosis.value,
            q.reason,
        ]
        for q in result.queries
    ]
    return f"run {result.name}: per query\n" + render_table(header, rows)
