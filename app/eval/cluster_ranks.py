"""cluster-recall@k at any k, from numbers stored at import.

cluster-recall@k (definitions: app/eval/clusters.py) asks whether any member of a relevant
document's duplicate cluster is in the top k. The member may be an unjudged document deeper
than the kept head of the ranking, so the head alone answers only up to ``keep_depth``. What
every k needs is one number per judged document, its **cluster rank**: the first rank at which
any document of its cluster appears in the query's ranking (a document without a
``cluster_id``, or absent from the corpus, is its own cluster, so its cluster rank is its own
rank; none when no member was retrieved). Then, per query,

    cluster-recall@k = |{relevant clusters whose cluster rank <= k}| / |relevant clusters|

(all members of a cluster share one cluster rank), macro over the evaluated queries (a query
the run does not answer counts 0), micro = pooled found / pooled relevant clusters; and
unique-clusters@k of the evaluated queries comes from their traces
(app.eval.cluster_profile.QueryTrace).

Only the judged documents whose cluster rank differs from their own rank are kept
(``judged_cluster_ranks``: a cluster-mate comes first, or the document itself was not
returned); the others' cluster rank is their rank among the judged ranks already stored.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from app.eval.cluster_profile import QueryTrace
from app.eval.clusters import ClusterEvaluation, cluster_keys
from app.eval.golden import Judgments

#: The columns of the cluster ranks.
CLUSTER_RANKS_SCHEMA = {"qid": pl.String, "doc_id": pl.String, "cluster_rank": pl.Int64}


def no_cluster_ranks() -> pl.DataFrame:
    """Cluster ranks where none differs from its document's own rank (no clustered corpus)."""
    return pl.DataFrame(schema=CLUSTER_RANKS_SCHEMA)


def judged_cluster_ranks(
    ranked: pl.DataFrame, judged: pl.DataFrame, documents: pl.DataFrame
) -> pl.DataFrame:
    """The judged documents whose cluster rank differs from their own rank (qid, doc_id,
    cluster_rank): a member of their cluster is ranked before them, or they were not
    returned while a member was.

    ``ranked``: qid, rank (1-based, after the conventions), doc_id of every result of the run.
    ``judged``: qid, doc_id of the judged documents. ``documents``: doc_id, cluster_id (null
    for none) of the corpus documents, at least those of ``ranked`` and ``judged``.
    """
    clustered = documents.filter(pl.col("cluster_id").is_not_null()).select("doc_id", "cluster_id")
    # Only a document with a cluster can have a cluster rank other than its own.
    judged_clustered = judged.select("qid", "doc_id").unique().join(clustered, on="doc_id")
    if not judged_clustered.height:
        return no_cluster_ranks()
    # The members of each judged document's cluster, per query: a small frame, so that the
    # run's results (millions of rows) are only probed, never copied or joined whole.
    members = (
        judged_clustered.select("qid", "cluster_id")
        .unique()
        .join(clustered, on="cluster_id")
        .select("qid", "doc_id", "cluster_id")
    )
    met = ranked.select("qid", "doc_id", "rank").join(members, on=["qid", "doc_id"])
    first = met.group_by("qid", "cluster_id").agg(
        pl.col("rank").min().cast(pl.Int64).alias("cluster_rank")
    )
    return (
        judged_clustered.join(first, on=["qid", "cluster_id"])
        .join(met.select("qid", "doc_id", "rank"), on=["qid", "doc_id"], how="left")
        .filter(pl.col("rank").is_null() | (pl.col("cluster_rank") < pl.col("rank")))
        .select("qid", "doc_id", "cluster_rank")
        .sort("qid", "doc_id")
    )


def evaluate_cluster_ranks(
    golden: Judgments,
    traces: Mapping[str, QueryTrace],
    judged_ranks: pl.DataFrame,
    cluster_ranks: pl.DataFrame,
    clusters: pl.DataFrame,
    k: int,
) -> ClusterEvaluation:
    """Cluster measures at any ``k`` for the evaluated queries of ``golden`` (the module's
    definitions; the same figures as ``evaluate_clusters`` on the full rankings).

    ``traces``: the cluster trace of every query the run answers (at least the evaluated ones).
    ``judged_ranks``: qid, doc_id, rank of the judged documents the run returned.
    ``cluster_ranks``: as ``judged_cluster_ranks`` answers. ``clusters``: doc_id, cluster_id
    of the clustered documents (as ``evaluate_clusters`` takes).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    qids = golden.evaluated_qids
    unique = {q: traces[q].distinct(k) if q in traces else 0 for q in qids}
    ranked = (
        golden.relevant.select("qid", "doc_id")
        .join(
            judged_ranks.select("qid", "doc_id", pl.col("rank").cast(pl.Int64)),
            on=["qid", "doc_id"],
            how="left",
        )
        .join(
            cluster_ranks.select("qid", "doc_id", pl.col("cluster_rank").cast(pl.Int64)),
            on=["qid", "doc_id"],
            how="left",
        )
        .select("qid", "doc_id", pl.coalesce("cluster_rank", "rank").alias("first"))
    )
    # One row a relevant cluster of a query: its first rank (null: no member retrieved).
    per_cluster = (
        cluster_keys(ranked, clusters)
        .group_by("qid", "cluster")
        .agg(pl.col("first").min())
        .with_columns((pl.col("first") <= k).fill_null(False).alias("found"))
    )
    per_query = per_cluster.group_by("qid").agg(
        pl.len().alias("relevant"), pl.col("found").sum().alias("found")
    )
    recall = {q: f / r for q, r, f in per_query.select("qid", "relevant", "found").iter_rows()}
    return ClusterEvaluation(
        k=k,
        unique={q: int(unique[q]) for q in qids},
        recall={q: recall.get(q, 0.0) for q in qids},
        relevant_clusters=per_cluster.height,
        found_clusters=int(per_cluster.get_column("found").sum()),
    )
