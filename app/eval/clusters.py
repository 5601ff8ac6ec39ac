"""Duplicate clusters: counting distinct evidence instead of copies.

Documents may carry a ``cluster_id`` (a help-centre article, its wiki paste and its PDF export
share one). A document without a cluster is its own cluster, so an unclustered corpus gives
unique-clusters@k = the number of results in the top k, and cluster-recall@k = recall@k.

* unique-clusters@k of a query = the number of distinct clusters among the run's top k
  results. Reported as a distribution over the evaluated queries: its median and the share of
  queries with ``FEW`` (4) or fewer at k.
* cluster-recall@k of a query = |relevant clusters with a member in the top k| / |relevant
  clusters|, where the relevant clusters are those of the query's relevant documents (the
  judgments collapsed to clusters). Macro: the mean over evaluated queries; a query the run
  does not answer counts 0, as for recall.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from statistics import median

import polars as pl

from app.eval.golden import Judgments

#: "4 or fewer distinct clusters in the top 10": a result list padded with copies.
FEW = 4


def cluster_keys(frame: pl.DataFrame, clusters: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with a ``cluster`` column: the document's cluster, or the document itself.

    ``clusters`` has columns doc_id, cluster_id (documents without a cluster may be absent).
    The two kinds of key are prefixed so a cluster named like a document never merges them.
    """
    return frame.join(
        clusters.select("doc_id", "cluster_id"), on="doc_id", how="left"
    ).with_columns(
        pl.when(pl.col("cluster_id").is_not_null())
        .then(pl.lit("c:") + pl.col("cluster_id"))
        .otherwise(pl.lit("d:") + pl.col("doc_id"))
        .alias("cluster")
    )


def clusters_frame(mapping: Mapping[str, str | None]) -> pl.DataFrame:
    """A doc_id -> cluster_id mapping as the frame ``cluster_keys`` takes."""
    pairs = [(d, c) for d, c in mapping.items() if c]
    return pl.DataFrame(
        {"doc_id": [d for d, _ in pairs], "cluster_id": [c for _, c in pairs]},
        schema={"doc_id": pl.String, "cluster_id": pl.String},
    )


@dataclass(frozen=True)
class ClusterEvaluation:
    """Per-query unique-clusters@k and cluster-recall@k, and their summaries."""

    k: int
    unique: dict[str, int]
    recall: dict[str, float]
    relevant_clusters: int
    found_clusters: int

    @property
    def median_unique(self) -> float:
        return float(median(self.unique.values())) if self.unique else 0.0

    @property
    def share_few(self) -> float:
        """Share of queries with ``FEW`` or fewer distinct clusters in the top k."""
        if not self.unique:
            return 0.0
        return sum(n <= FEW for n in self.unique.values()) / len(self.unique)

    @property
    def cluster_recall(self) -> float:
        return sum(self.recall.values()) / len(self.recall) if self.recall else 0.0

    @property
    def cluster_recall_micro(self) -> float:
        return self.found_clusters / self.relevant_clusters if self.relevant_clusters else 0.0


def evaluate_clusters(
    golden: Judgments, top: pl.DataFrame, clusters: pl.DataFrame, k: int
) -> ClusterEvaluation:
    """Cluster measures at ``k`` for the evaluated queries of ``golden``.

    ``top``: the run's results with columns qid, doc_id, rank (1-based, after the conventions);
    at least its first ``k`` results per query.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    qids = golden.evaluated_qids
    shown = cluster_keys(top.filter(pl.col("rank") <= k).select("qid", "doc_id"), clusters)
    unique = dict.fromkeys(qids, 0) | dict(
        shown.group_by("qid").agg(pl.col("cluster").n_unique()).iter_rows()
    )
    relevant = cluster_keys(golden.relevant.select("qid", "doc_id"), clusters).unique(
        ["qid", "cluster"]
    )
    found = relevant.join(shown.select("qid", "cluster").unique(), on=["qid", "cluster"])
    per_query = (
        relevant.group_by("qid")
        .agg(pl.len().alias("relevant"))
        .join(found.group_by("qid").agg(pl.len().alias("found")), on="qid", how="left")
        .with_columns(pl.col("found").fill_null(0))
    )
    recall = {q: f / r for q, r, f in per_query.select("qid", "relevant", "found").iter_rows()}
    return ClusterEvaluation(
        k=k,
        unique={q: int(unique[q]) for q in qids},
        recall={q: recall.get(q, 0.0) for q in qids},
        relevant_clusters=relevant.height,
        found_clusters=found.height,
    )
