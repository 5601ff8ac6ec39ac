"""From the lines of a run to rankings, under the conventions.

Only two things about a run are needed for every measure at every cutoff: the rank of each
judged document, and how many results each query got. ``rank_run`` computes exactly those,
without sorting the whole run: the rank of a judged document is one plus the number of results
of its query that precede it in the chosen order. ``top_candidates`` sorts, for callers that
keep the head of each ranking.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

import polars as pl

from app.eval.cluster_profile import ClusterTraces, CorpusSource, trace_ranking
from app.eval.cluster_ranks import judged_cluster_ranks, no_cluster_ranks
from app.eval.conventions import Order
from app.eval.errors import InputError, shorten
from app.eval.golden import Judgments, count
from app.eval.jsonl import LIST_FORMAT
from app.eval.judged import joined_ranks
from app.eval.ordering import rank_all
from app.eval.ordering import top_of_results as top_of_results  # re-exported (streaming)
from app.eval.repeats import dropped_per_query as count_dropped
from app.eval.repeats import exact_repeats, repeated_lines
from app.eval.stretches import judged_ranks, stretches

_STREAMING: Final[Literal["streaming"]] = "streaming"
_ABSENT_IDS_SHOWN = 50
#: A part this small (lines, and lines times the most judgments of a query: the rows of the
#: join of ``joined_ranks``) is ranked by polars alone: numpy's sorts and arrays pay for
#: themselves on large runs, and importing numpy (and numpy.ma, which polars loads to read
#: an array) costs more than ranking a small run (0.1-0.15 s of a 0.5 s ``evaluate``).
SMALL_PART_LINES = 50_000
SMALL_PART_JOINED = 2_000_000


@dataclass(frozen=True, slots=True)
class RunReport:
    """What importing a run found, counted (never silently dropped)."""

    source: str
    format: str
    order: str
    lines: int
    queries: int
    duplicates_dropped: int
    unknown_queries: int
    unknown_query_lines: int
    golden_queries_absent: int
    golden_queries_absent_ids: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "format": self.format,
            "order": self.order,
            "lines": self.lines,
            "queries": self.queries,
            "duplicates_dropped": self.duplicates_dropped,
            "unknown_queries": self.unknown_queries,
            "unknown_query_lines": self.unknown_query_lines,
            "golden_queries_absent": self.golden_queries_absent,
            "golden_queries_absent_ids": self.golden_queries_absent_ids[:_ABSENT_IDS_SHOWN],
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class RankedRun:
    """A run reduced to what evaluation needs.

    ``judged``: qid, doc_id, grade, rank (1-based) of every judged document the run returned.
    ``retrieved``: the number of results per query of the golden set (absent queries: none).
    ``results``: a lazy view of the deduplicated lines of the golden set's queries (qid,
    doc_id, score, rank, pos), kept only when asked for, for ``top_candidates``.
    """

    name: str
    order: Order
    judged: pl.DataFrame
    retrieved: dict[str, int]
    report: RunReport
    results: pl.LazyFrame | None = None
    #: the cluster traces of every query the run answers, judged or not (when asked for)
    traces: ClusterTraces | None = None


def effective_order(order: Order, fmt: str) -> Order:
    """JSON lists carry their ranking in list order, whatever order was asked for."""
    return Order.FILE if fmt == LIST_FORMAT else order


def rank_run(
    frame: pl.DataFrame,
    golden: Judgments,
    *,
    order: Order,
    name: str,
    source: str,
    fmt: str,
    keep_results: bool = False,
    corpus: CorpusSource | None = None,
) -> RankedRun:
    """Apply the conventions to parsed run lines (qid, doc_id, score, rank, line).

    Lines of unknown queries and repeated documents are not copied out of the frame: they are
    excluded by a filter inside each (streaming) query, which keeps memory flat on large runs.
    With a ``corpus``, the cluster traces of every query of the run, golden or not.
    """
    order = effective_order(order, fmt)
    check_order_columns(frame, order, source)
    frame = _with_positions(frame, fmt)
    part = rank_part(frame, golden, order)
    ranked = finish_ranking(
        [part], golden, order=order, name=name, source=source, fmt=fmt, lines=frame.height
    )
    traces = None
    if corpus is not None:
        traces = _traces(
            frame,
            part.per_query,
            part.dropped,
            part.dropped_per_query,
            order,
            corpus,
            judged=golden.judgments.select("qid", "doc_id"),
        )
    return replace(ranked, results=part.results if keep_results else None, traces=traces)


@dataclass(frozen=True)
class RankedPart:
    """What ranking needs from some whole queries of a run (all of a query's lines in one
    part): the conventions are per query, so parts rank independently and add up."""

    #: qid, n: the lines of every query of the part, known or not
    per_query: pl.DataFrame
    #: ``pos`` of the repeated lines dropped
    dropped: pl.Series
    dropped_per_query: dict[str, int]
    unknown_queries: int
    unknown_lines: int
    #: qid, doc_id, grade, rank of the judged documents returned
    judged: pl.DataFrame
    #: the kept lines (qid, doc_id, score, rank, pos), lazily
    results: pl.LazyFrame


def rank_part(frame: pl.DataFrame, golden: Judgments, order: Order) -> RankedPart:
    """Rank the lines of some whole queries (with ``pos``, their order in the part)."""
    small = _is_small(frame, golden)
    groups = None if small else stretches(frame)
    if groups is not None:
        per_query = groups.per_query()
    else:
        per_query = frame.lazy().group_by("qid").agg(pl.len().alias("n")).collect(engine=_STREAMING)
    known = golden.known_qids
    is_known = pl.col("qid").is_in(known.implode())
    unknown = per_query.filter(~is_known)
    dropped = repeated_lines_small(frame) if small else repeated_lines(frame)
    keep: list[pl.Expr] = []
    if unknown.height:
        keep.append(is_known)
    if dropped.len():
        keep.append(~pl.col("pos").is_in(dropped.implode()))
    kept = frame.lazy().filter(*keep) if keep else frame.lazy()
    dropped_per_query = count_dropped(frame, dropped)
    return RankedPart(
        per_query=per_query,
        dropped=dropped,
        dropped_per_query=dropped_per_query,
        unknown_queries=unknown.height,
        unknown_lines=int(unknown.get_column("n").sum()),
        judged=(
            joined_ranks(kept, golden.judgments, order)
            if groups is None
            else judged_ranks(frame, groups, golden.judgments, dropped, order)
        ),
        results=kept,
    )


def _is_small(frame: pl.DataFrame, golden: Judgments) -> bool:
    """Whether ``frame`` is ranked by polars alone (see ``SMALL_PART_LINES``)."""
    if frame.height > SMALL_PART_LINES:
        return False
    per_query = golden.judgments.group_by("qid").len().get_column("len")
    most = int(per_query.max() or 0) if per_query.len() else 0  # type: ignore[arg-type]
    return frame.height * most <= SMALL_PART_JOINED


def repeated_lines_small(frame: pl.DataFrame) -> pl.Series:
    """What ``repeated_lines`` gives (the ``pos`` of the lines that repeat an earlier (qid,
    doc_id), the first wins), by polars alone: for small parts."""
    lines = frame.select("qid", "doc_id", "pos").sort("pos")
    return exact_repeats(lines, pl.struct(pl.col("qid").hash(), pl.col("doc_id").hash()).hash())


def finish_ranking(
    parts: list[RankedPart],
    golden: Judgments,
    *,
    order: Order,
    name: str,
    source: str,
    fmt: str,
    lines: int,
) -> RankedRun:
    """The run of its ranked ``parts`` (disjoint queries) and its report (``lines`` read);
    an InputError when it answers none of the golden queries."""
    judged = pl.concat([p.judged for p in parts]) if len(parts) > 1 else parts[0].judged
    return ranked_run(
        RankCounts(
            per_query=pl.concat([p.per_query for p in parts]),
            dropped_per_query={q: n for p in parts for q, n in p.dropped_per_query.items()},
            unknown_queries=sum(p.unknown_queries for p in parts),
            unknown_lines=sum(p.unknown_lines for p in parts),
            judged=judged.sort("qid", "rank") if len(parts) > 1 else judged,
        ),
        golden,
        order=order,
        name=name,
        source=source,
        fmt=fmt,
        lines=lines,
    )


@dataclass(frozen=True)
class RankCounts:
    """What a run's report and ranking are made of, however the run was read."""

    #: qid, n: the lines of every query of the run, known or not
    per_query: pl.DataFrame
    #: the repeated lines dropped, per query that has some
    dropped_per_query: dict[str, int]
    unknown_queries: int
    unknown_lines: int
    #: qid, doc_id, grade, rank of the judged documents returned, sorted by qid and rank
    judged: pl.DataFrame


def ranked_run(
    counts: RankCounts,
    golden: Judgments,
    *,
    order: Order,
    name: str,
    source: str,
    fmt: str,
    lines: int,
) -> RankedRun:
    """The run of its ``counts`` and its report (``lines`` read); an InputError when it
    answers none of the golden queries."""
    per_query = counts.per_query
    known = golden.known_qids
    dropped_per_query = counts.dropped_per_query
    retrieved = {
        qid: n - dropped_per_query.get(qid, 0)
        for qid, n in per_query.filter(pl.col("qid").is_in(known.implode())).iter_rows()
    }
    evaluated = golden.evaluated_qids
    absent = [qid for qid in evaluated if qid not in retrieved]
    if lines and evaluated and len(absent) == len(evaluated):
        raise InputError(source, None, _no_match(per_query.get_column("qid"), evaluated))
    duplicates = sum(dropped_per_query.values())
    report = RunReport(
        source=source,
        format=fmt,
        order=order.value,
        lines=lines,
        queries=per_query.height,
        duplicates_dropped=duplicates,
        unknown_queries=counts.unknown_queries,
        unknown_query_lines=counts.unknown_lines,
        golden_queries_absent=len(absent),
        golden_queries_absent_ids=absent,
        warnings=_warnings(len(absent), counts.unknown_queries, counts.unknown_lines, duplicates),
    )
    return RankedRun(
        name=name, order=order, judged=counts.judged, retrieved=retrieved, report=report
    )


def answered_per_query(parts: list[RankedPart]) -> dict[str, int]:
    """Results per query of every query the run answers, repeated documents dropped."""
    return {
        qid: n - p.dropped_per_query.get(qid, 0)
        for p in parts
        for qid, n in p.per_query.iter_rows()
    }


def _traces(
    frame: pl.DataFrame,
    per_query: pl.DataFrame,
    dropped: pl.Series,
    dropped_per_query: dict[str, int],
    order: Order,
    corpus: CorpusSource,
    judged: pl.DataFrame | None = None,
) -> ClusterTraces:
    """Every query's cluster trace and, given the ``judged`` documents (qid, doc_id), their
    cluster ranks (app.eval.cluster_ranks); the whole run is sorted only when a corpus makes
    the documents' places matter (clusters or text), and the corpus is asked once, only for
    the documents the run returned and the judged ones."""
    answered = {qid: n - dropped_per_query.get(qid, 0) for qid, n in per_query.iter_rows()}
    if not corpus.matters:
        traces = trace_ranking(None, answered)
        # No clusters: every judged document's cluster rank is its own rank.
        return traces if judged is None else replace(traces, cluster_ranks=no_cluster_ranks())
    ranked = rank_all(frame, dropped, order)
    wanted = ranked.get_column("doc_id")
    if judged is not None:
        wanted = pl.concat([wanted, judged.get_column("doc_id")])
    found = corpus.lookup(wanted.unique().to_list())
    traces = trace_ranking(ranked, answered, found)
    if judged is None:
        return traces
    return replace(traces, cluster_ranks=judged_cluster_ranks(ranked, judged, found.documents))


def rank_log_run(
    frame: pl.DataFrame, *, order: Order, source: str, fmt: str, corpus: CorpusSource
) -> tuple[RunReport, ClusterTraces]:
    """A run of production query-log results, no judgments: every query is kept; what is
    stored is its import report and the cluster traces of every query."""
    order = effective_order(order, fmt)
    check_order_columns(frame, order, source)
    frame = _with_positions(frame, fmt)
    per_query = frame.lazy().group_by("qid").agg(pl.len().alias("n")).collect(engine=_STREAMING)
    dropped = repeated_lines(frame)
    dropped_per_query = count_dropped(frame, dropped)
    report = RunReport(
        source=source,
        format=fmt,
        order=order.value,
        lines=frame.height,
        queries=per_query.height,
        duplicates_dropped=dropped.len(),
        unknown_queries=0,
        unknown_query_lines=0,
        golden_queries_absent=0,
        warnings=_warnings(0, 0, 0, dropped.len()),
    )
    traces = _traces(frame, per_query, dropped, dropped_per_query, order, corpus)
    return report, traces


def _with_positions(frame: pl.DataFrame, fmt: str) -> pl.DataFrame:
    """``pos``: the order of the results in the file (ties under order ``rank``, repeats, order
    ``file``). A TREC run holds one result a line, so its line numbers are that order already
    and are shared, not copied (a column of seven million numbers); a JSON list holds many
    results a line, and they are numbered."""
    if fmt == "trec":
        return frame.with_columns(pl.col("line").alias("pos"))
    return frame.with_row_index("pos")


def _no_match(run_qids: pl.Series, evaluated: list[str]) -> str:
    """A run that answers none of the golden queries is the wrong file (or the wrong ids)."""

    def some(ids: list[str]) -> str:
        shown = ", ".join(shorten(i, 60) for i in ids[:3])
        return shown + (", ..." if len(ids) > 3 else "")

    return (
        f"none of the run's {count(run_qids.len(), 'query', 'queries')} is a golden query with "
        f"a relevant document (run: {some(run_qids.sort().to_list())}; golden set: "
        f"{some(evaluated)}): do both files use the same query ids?"
    )


def repeat_warnings(duplicates: int) -> list[str]:
    """The report's warnings of a run without judgments (a log run)."""
    return _warnings(0, 0, 0, duplicates)


def _warnings(absent: int, unknown: int, unknown_lines: int, duplicates: int) -> list[str]:
    warnings: list[str] = []
    if absent:
        warnings.append(
            f"{count(absent, 'golden query is', 'golden queries are')} absent from the run: "
            "counted 0, and every relevant document is a miss (not retrieved)"
        )
    if unknown:
        warnings.append(
            f"{count(unknown, 'run query is', 'run queries are')} not in the golden set "
            f"({count(unknown_lines, 'line', 'lines')} ignored)"
        )
    if duplicates:
        warnings.append(
            f"{count(duplicates, 'repeated document', 'repeated documents')} within a query "
            "dropped (the first occurrence is kept)"
        )
    return warnings


def check_order_columns(frame: pl.DataFrame, order: Order, source: str) -> None:
    """An InputError naming the first line without the value ``order`` sorts by."""
    needed = {Order.TREC_EVAL: "score", Order.RANK: "rank"}.get(order)
    if needed is None:
        return
    missing = frame.filter(pl.col(needed).is_null())
    if missing.height:
        line = int(missing.get_column("line")[0])
        raise InputError(source, line, f"order '{order.value}' needs a {needed} on every result")


def top_candidates(ranked: RankedRun, depth: int) -> pl.DataFrame:
    """The first ``depth`` results of every query: qid, rank, doc_id, score (see
    ``top_of_results``)."""
    if ranked.results is None:
        raise ValueError("rank_run(..., keep_results=True) is needed for top_candidates")
    return top_of_results(ranked.results, ranked.order, depth)


def rank_every_query(
    frame: pl.DataFrame, *, order: Order, fmt: str, source: str, depth: int | None
) -> pl.DataFrame:
    """The first ``depth`` results of every query of a run, judged or not: qid, rank, doc_id.

    For runs without a golden set (a production query log): the same conventions as
    ``rank_run`` (a repeated document keeps its first occurrence; the order decides the rank,
    ties in trec_eval order by docno descending), but no query is left out for lack of
    judgments. ``frame`` holds parsed run lines (qid, doc_id, score, rank, line); ``depth``
    None keeps every result.
    """
    if depth is not None and depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    order = effective_order(order, fmt)
    check_order_columns(frame, order, source)
    frame = _with_positions(frame, fmt)
    ranked = rank_all(frame, repeated_lines(frame), order)
    if depth is not None:
        ranked = ranked.filter(pl.col("rank") <= depth)
    return ranked.sort("qid", "rank")
