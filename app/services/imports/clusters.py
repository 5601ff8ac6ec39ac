"""Duplicate clusters of stored runs: a run's cluster measures over every query it answers,
judged or not (log runs included), and over the golden queries (``cluster_evaluation``,
unique-clusters@k and cluster-recall@k in the metrics answer); which runs have judgments.

What any k needs is traced at import (``app.eval.cluster_profile.trace_ranking``) and stored
compactly: a row per query (its result count and the ranks at which a result repeats a cluster
already seen) and one row of per-rank totals per run. The figures are then computed by the same
pure code as ``misstriage clusters`` (``profile_of_tally``), at any k, from the traces read
some queries at a time (``stored_tally``: a log of millions of queries is never held whole).
For cluster-recall, the judged documents' cluster ranks (``app.eval.cluster_ranks``) are
stored beside them, where they differ from the documents' own ranks (``run_judged_cluster``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import polars as pl
from sqlalchemy import func
from sqlalchemy import null as sa_null
from sqlmodel import Session, col, select

from app.eval.cluster_profile import (
    DEFAULT_KS,
    TOKEN_ESTIMATE,
    ClusterCorpus,
    ClusterTally,
    ClusterTraces,
    CorpusSource,
    QueryTrace,
    RankTotals,
    profile_of_tally,
    tally_of_trace_rows,
    tokens_of_lengths,
)
from app.eval.cluster_ranks import CLUSTER_RANKS_SCHEMA, evaluate_cluster_ranks
from app.eval.clusters import ClusterEvaluation, evaluate_clusters
from app.eval.conventions import MAX_CUTOFF, parse_depths
from app.eval.profile_rows import unknown_ks
from app.models import (
    LOG,
    Document,
    DocumentCluster,
    GoldenSet,
    Run,
    RunClusterQuery,
    RunClusterTotals,
    RunHead,
    RunJudged,
    RunJudgedCluster,
)
from app.models.runs import RunClustersPublic
from app.provenance import DetectorRunRef
from app.services.errors import Conflict, Invalid
from app.services.imports.bulk import bulk_insert
from app.services.imports.clusterings import clustering_ids, has_clusters
from app.services.imports.detector_refs import live_ref
from app.services.imports.golden_sets import eval_golden_set

#: How many values of k one request may ask for.
MAX_KS = 20


def require_judged(run: Run) -> None:
    """Recall, nDCG, misses and triage need judgments: 409 ``log_run`` for a log run."""
    if run.kind == LOG:
        raise Conflict(
            f"run {run.name!r} is a log run (production query-log results imported without "
            "judgments): it has cluster measures only, not recall, nDCG, misses or triage",
            code="log_run",
        )


def stored_top(
    *, session: Session, run: Run, depth: int, qids: Iterable[str] | None = None
) -> pl.DataFrame:
    """The run's first ``depth`` results per query (qid, doc_id, rank), as far as stored: the
    kept head of each ranking (``keep_depth``) and, deeper, the judged documents."""
    where: list[Any] = [RunHead.run_id == run.id]
    judged_where: list[Any] = [RunJudged.run_id == run.id, RunJudged.rank <= depth]
    if qids is not None:
        wanted = sorted(set(qids))
        where.append(col(RunHead.qid).in_(wanted))
        judged_where.append(col(RunJudged.qid).in_(wanted))
    rows = [
        (qid, doc_id, rank)
        for qid, ranking in session.exec(select(RunHead.qid, RunHead.ranking).where(*where))
        for rank, doc_id in enumerate(ranking["doc_ids"][:depth], start=1)
    ]
    schema = {"qid": pl.String, "doc_id": pl.String, "rank": pl.Int64}
    head = pl.DataFrame(rows, schema=schema, orient="row")
    judged = pl.DataFrame(
        session.exec(
            select(RunJudged.qid, RunJudged.doc_id, RunJudged.rank).where(*judged_where)
        ).all(),
        schema=schema,
        orient="row",
    )
    return pl.concat([head, judged]).unique(["qid", "doc_id"]).sort("qid", "rank")


def cluster_evaluation(
    *, session: Session, run: Run, golden: GoldenSet, k: int
) -> ClusterEvaluation | None:
    """unique-clusters@k and cluster-recall@k of a stored run, at any k from the cluster
    ranks and traces stored at import (``app.eval.cluster_ranks``); for a run imported before
    they were, from the kept head of its rankings, so None when ``k`` is deeper than it (the
    unjudged results there are not stored)."""
    require_judged(run)
    totals = session.get(RunClusterTotals, run.id)
    ranked = totals is not None and totals.cluster_ranks
    if not ranked and k > run.keep_depth:
        return None
    if totals is not None and totals.traced_depth is not None and k > totals.traced_depth:
        return None  # measured again with another detector run, from the kept head
    gold = eval_golden_set(session=session, golden=golden)
    clusters = clustering_ids(session=session, clustering_id=_measured_with(totals, golden))
    if ranked:
        return evaluate_cluster_ranks(
            gold,
            _query_traces(session=session, run=run, qids=set(gold.evaluated_qids)),
            _frame(
                session.exec(
                    select(RunJudged.qid, RunJudged.doc_id, RunJudged.rank).where(
                        RunJudged.run_id == run.id
                    )
                ).all(),
                {"qid": pl.String, "doc_id": pl.String, "rank": pl.Int64},
            ),
            _frame(
                session.exec(
                    select(
                        RunJudgedCluster.qid, RunJudgedCluster.doc_id, RunJudgedCluster.cluster_rank
                    ).where(RunJudgedCluster.run_id == run.id)
                ).all(),
                CLUSTER_RANKS_SCHEMA,
            ),
            clusters,
            k,
        )
    top = stored_top(session=session, run=run, depth=k)
    return evaluate_clusters(gold, top, clusters, k)


def _measured_with(totals: RunClusterTotals | None, golden: GoldenSet) -> int | None:
    """The clustering a run's cluster figures were measured with: the one recorded; none
    when measured without clusters; the golden set's now for figures measured before the
    clustering was recorded (or a run imported before its traces were stored)."""
    if totals is None or (totals.clustering_id is None and totals.detector_run_id is not None):
        return golden.clustering_id
    return totals.clustering_id


def detector_run_of(*, session: Session, run: Run) -> DetectorRunRef | None:
    """The detector run a stored run's cluster figures rest on (None: no clusters when it
    was measured)."""
    totals = session.get(RunClusterTotals, run.id)
    if totals is None or totals.detector_run_id is None:
        return None
    return live_ref(
        session=session, detector_run_id=totals.detector_run_id, clustering=totals.clustering_id
    )


def _frame(rows: Any, schema: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema, orient="row")


def _query_traces(
    *, session: Session, run: Run, qids: set[str] | None = None
) -> dict[str, QueryTrace]:
    """The stored traces of the run's queries (of ``qids`` alone when given)."""
    return {
        qid: QueryTrace(returned, tuple(repeats))
        for qid, returned, repeats in session.exec(
            select(RunClusterQuery.qid, RunClusterQuery.returned, RunClusterQuery.repeats).where(
                RunClusterQuery.run_id == run.id
            )
        )
        if qids is None or qid in qids
    }


class ClusteringNow(NamedTuple):
    """Which clustering a golden set's corpus carries (None: no clusters) and its detector
    run. A write to the clusters makes another clustering live, never changes one: two reads
    that say the same read the same cluster ids."""

    clustering_id: int | None
    detector_run_id: int | None


def clustering_now(*, session: Session, golden_set_id: int) -> ClusteringNow:
    """The golden set's clustering as stored now (read before the clusters it names, and
    again under ``locks.golden_set_for_cluster_figures`` before figures computed from them
    are stored)."""
    found = session.exec(
        select(GoldenSet.clustering_id, GoldenSet.detector_run_id).where(
            GoldenSet.id == golden_set_id
        )
    ).first()
    return ClusteringNow(None, None) if found is None else ClusteringNow(*found)


#: Document ids per IN list (bounded, as every backend accepts).
IN_CHUNK = 5000


def corpus_source(
    *, session: Session, golden: GoldenSet, clustering_id: int | None
) -> CorpusSource:
    """The golden set's corpus as the cluster measures see it with the clustering
    ``clustering_id``, asked only for the documents a run returns: their cluster ids and,
    where any document has text, their estimated tokens (from the lengths the database
    counts: the texts themselves are not read)."""
    in_golden = Document.golden_set_id == golden.id
    clustered = golden.documents > 0 and has_clusters(session=session, clustering_id=clustering_id)
    cluster_id = col(DocumentCluster.cluster_id) if clustered else sa_null().label("cluster_id")
    has_text = golden.documents > 0 and _any(session, in_golden, func.length(Document.text) > 0)

    def lookup(doc_ids: list[str]) -> ClusterCorpus:
        # A corpus smaller than the run's documents is read whole, in one query.
        wheres = (
            [[in_golden]]
            if golden.documents <= len(doc_ids)
            else [
                [in_golden, col(Document.doc_id).in_(doc_ids[i : i + IN_CHUNK])]
                for i in range(0, len(doc_ids), IN_CHUNK)
            ]
        )
        frames = [
            pl.DataFrame(
                session.exec(
                    _with_clusters(
                        select(
                            Document.doc_id,
                            cluster_id,
                            func.length(Document.title),
                            func.length(Document.text),
                        ),
                        clustering_id if clustered else None,
                    ).where(*where)
                ).all(),
                schema={
                    "doc_id": pl.String,
                    "cluster_id": pl.String,
                    "title_chars": pl.Int64,
                    "text_chars": pl.Int64,
                },
                orient="row",
            )
            for where in wheres
        ]
        documents = pl.concat(frames).select(
            "doc_id",
            pl.when(pl.col("cluster_id") != "").then(pl.col("cluster_id")).alias("cluster_id"),
            tokens_of_lengths(
                pl.col("title_chars").fill_null(0), pl.col("text_chars").fill_null(0)
            ).alias("tokens"),
        )
        return ClusterCorpus(documents=documents, has_text=has_text)

    return CorpusSource(matters=clustered or has_text, has_text=has_text, lookup=lookup)


def _with_clusters(query: Any, clustering_id: int | None) -> Any:
    """``query`` over documents, joined to their cluster ids in the clustering (if any)."""
    if clustering_id is None:
        return query
    return query.outerjoin(
        DocumentCluster,
        (col(DocumentCluster.clustering_id) == clustering_id)
        & (col(DocumentCluster.doc_id) == col(Document.doc_id)),
    )


def _any(session: Session, *where: Any) -> bool:
    return session.exec(select(Document.id).where(*where).limit(1)).first() is not None


def store_traces(
    *,
    session: Session,
    run_id: int,
    traces: ClusterTraces,
    detector_run_id: int | None,
    clustering_id: int | None = None,
    traced_depth: int | None = None,
    exact_ks: tuple[int, ...] | None = None,
) -> None:
    """Write a run's traces and, when traced, its judged documents' cluster ranks (inside the
    caller's ``writing`` block), with the detector run whose clusters they were made with
    and, when traced again from the kept head, how deep they are exact; ``exact_ks``: the
    only cutoffs they are exact at (traces made of per-query profile rows)."""
    queries = traces.queries
    store_query_traces(
        session,
        pl.DataFrame(
            {
                "run_id": [run_id] * len(queries),
                "qid": list(queries),
                "returned": [t.returned for t in queries.values()],
                # JSON text, as the column holds it on both backends
                "repeats": ["[" + ",".join(map(str, t.repeats)) + "]" for t in queries.values()],
            },
            schema={
                "run_id": pl.Int64,
                "qid": pl.String,
                "returned": pl.Int64,
                "repeats": pl.String,
            },
        ),
    )
    if traces.cluster_ranks is not None:
        bulk_insert(
            session,
            RunJudgedCluster,
            traces.cluster_ranks.select(
                pl.lit(run_id, dtype=pl.Int64).alias("run_id"), "qid", "doc_id", "cluster_rank"
            ),
        )
    store_totals(
        session=session,
        run_id=run_id,
        totals=traces.totals,
        cluster_ranks=traces.cluster_ranks is not None,
        detector_run_id=detector_run_id,
        clustering_id=clustering_id,
        traced_depth=traced_depth,
        exact_ks=exact_ks,
    )


def store_query_traces(session: Session, rows: pl.DataFrame) -> None:
    """Write some queries' traces in their stored form (run_id, qid, returned, repeats as
    JSON text), as a log run's import streams them."""
    bulk_insert(session, RunClusterQuery, rows)


def store_totals(
    *,
    session: Session,
    run_id: int,
    totals: RankTotals,
    cluster_ranks: bool,
    detector_run_id: int | None,
    clustering_id: int | None = None,
    traced_depth: int | None = None,
    exact_ks: tuple[int, ...] | None = None,
) -> None:
    """Write a run's per-rank totals: their row says the run's traces are stored, and with
    which clusters (the detector run and which of its applications)."""
    session.add(
        RunClusterTotals(
            run_id=run_id,
            totals={"clustered": totals.clustered, "known": totals.known, "tokens": totals.tokens},
            cluster_ranks=cluster_ranks,
            detector_run_id=detector_run_id,
            clustering_id=clustering_id,
            traced_depth=traced_depth,
            exact_ks=None if exact_ks is None else list(exact_ks),
        )
    )


#: Stored traces read at once to tally a run's clusters (a log of millions of queries is
#: read in pieces this size, never held whole).
TALLY_CHUNK = 50_000


def stored_tally(*, session: Session, run: Run, ks: Sequence[int]) -> tuple[ClusterTally, int]:
    """The tally of a run's stored traces at the cutoffs ``ks`` and its longest ranking,
    read some queries at a time (in qid order, by key); 409 ``clusters_not_stored`` for a run
    imported before."""
    row = _totals_row(session=session, run=run)
    stored = row.totals
    totals = RankTotals(
        clustered=list(stored.get("clustered") or []),
        known=list(stored.get("known") or []),
        tokens=None if stored.get("tokens") is None else list(stored["tokens"]),
    )
    tally = ClusterTally(ks=tuple(ks), has_text=totals.tokens is not None)
    depth = 0
    after: str | None = None
    while True:
        query = select(RunClusterQuery.qid, RunClusterQuery.returned, RunClusterQuery.repeats)
        query = query.where(RunClusterQuery.run_id == run.id)
        if after is not None:
            query = query.where(col(RunClusterQuery.qid) > after)
        rows = session.exec(query.order_by(col(RunClusterQuery.qid)).limit(TALLY_CHUNK)).all()
        if not rows:
            break
        after = rows[-1][0]
        frame = pl.DataFrame(
            {"returned": [r[1] for r in rows], "repeats": [list(r[2]) for r in rows]},
            schema={"returned": pl.Int64, "repeats": pl.List(pl.Int64)},
        )
        depth = max(depth, max(r[1] for r in rows))
        tally.add(tally_of_trace_rows(frame, ks, has_text=tally.has_text))
    tally.totals = totals
    return tally, depth


def _totals_row(*, session: Session, run: Run) -> RunClusterTotals:
    row = session.get(RunClusterTotals, run.id)
    if row is None:
        raise Conflict(
            f"run {run.name!r} was imported before cluster traces were stored: import it "
            "again to measure its clusters",
            code="clusters_not_stored",
        )
    return row


def stored_traces(*, session: Session, run: Run) -> ClusterTraces:
    """A run's traces as stored; 409 ``clusters_not_stored`` for a run imported before."""
    row = _totals_row(session=session, run=run)
    queries = _query_traces(session=session, run=run)
    totals = row.totals
    return ClusterTraces(
        queries,
        RankTotals(
            clustered=list(totals.get("clustered") or []),
            known=list(totals.get("known") or []),
            tokens=None if totals.get("tokens") is None else list(totals["tokens"]),
        ),
    )


def parse_ks(text: str | None, default: tuple[int, ...]) -> tuple[int, ...]:
    """``"10,20,30"`` as sorted distinct cutoffs; empty: ``default``. 422 ``invalid_k``."""
    if not (text or "").strip():
        return default
    try:
        ks = parse_depths(text or "")
    except ValueError as exc:
        message = str(exc).replace("depth", "k", 1)
        raise Invalid(message, code="invalid_k") from None
    if len(ks) > MAX_KS:
        raise Invalid(f"at most {MAX_KS} values of k, got {len(ks)}", code="invalid_k")
    return ks


def known_ks(*, session: Session, run: Run) -> tuple[int, ...] | None:
    """The only cutoffs a run's cluster figures are known at (a log run imported as its
    per-query profile); None: any k."""
    totals = session.get(RunClusterTotals, run.id)
    if totals is None or totals.exact_ks is None:
        return None
    return tuple(int(k) for k in totals.exact_ks)


def default_ks(*, session: Session, run: Run) -> tuple[int, ...]:
    """The cutoffs a run's clusters are shown at when none are asked for: the imported ks of
    a per-query profile, else ``DEFAULT_KS``."""
    return known_ks(session=session, run=run) or DEFAULT_KS


def run_clusters(
    *,
    session: Session,
    run: Run,
    ks: tuple[int, ...],
    threshold: int,
    price_per_mtok: float | None = None,
    queries_per_day: float | None = None,
) -> RunClustersPublic:
    """unique-clusters@k over every query the run answers at each k of ``ks`` (any k up to
    ``MAX_CUTOFF``; beyond a query's results, it counts what it returned), with the prompt
    cost where the corpus has text. No ``ks``: the run's ``default_ks``; a run imported as
    its per-query profile is measured at its imported ks alone (another: 422 ``invalid_k``)."""
    exact_ks = known_ks(session=session, run=run)
    if not ks:
        ks = exact_ks or DEFAULT_KS
    if not ks or ks[0] < 1 or ks[-1] > MAX_CUTOFF:
        raise Invalid(f"every k must be between 1 and {MAX_CUTOFF}", code="invalid_k")
    tally, run_depth = stored_tally(session=session, run=run, ks=ks)
    totals = session.get(RunClusterTotals, run.id)
    exact_to = None if totals is None else totals.traced_depth
    if exact_to is not None and ks[-1] > exact_to:
        raise Invalid(
            f"run {run.name!r} was measured again with another detector run's clusters from "
            f"its kept head ({exact_to} results per query): k goes up to {exact_to}; import "
            "the run again for deeper k",
            code="invalid_k",
        )
    refused = None if exact_ks is None else unknown_ks(ks, exact_ks)
    if refused is not None:
        raise Invalid(refused, code="invalid_k")
    profile = profile_of_tally(
        tally,
        threshold=threshold,
        price_per_million=price_per_mtok,
        queries_per_day=queries_per_day,
    )
    assert run.id is not None
    return RunClustersPublic.of(
        profile,
        run_id=run.id,
        kind=run.kind,
        depth=run_depth if exact_to is None else min(run_depth, exact_to),
        token_estimate=TOKEN_ESTIMATE if tally.has_text else None,
        detector_run=detector_run_of(session=session, run=run),
        exact_ks=None if exact_ks is None else list(exact_ks),
    )
