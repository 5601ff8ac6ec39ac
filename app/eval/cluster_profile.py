"""unique-clusters@k without judgments: a run's duplicate profile over every query it answers.

unique-clusters@k needs no labels, so it is measured over every query of a run (a production
query log's results included), judged or not. Definitions (API.md, "cluster measures without
judgments"), for a set Q of queries and a list of cutoffs k1 < k2 < ...:

* u_q(k) = the number of distinct clusters among the first k results of query q. A document
  without a ``cluster_id``, or absent from the corpus, is its own cluster. A query with fewer
  than k results counts the distinct clusters among what it returned (it is not padded and not
  left out), so u_q(k) <= min(k, results of q).
* mean(k) = (1/|Q|) * sum over q of u_q(k); the distinct fraction = mean(k) / k (k, not the
  results returned: a short result list lowers the fraction, as it lowers what a prompt holds).
* marginal(k_i) = (mean(k_i) - mean(k_{i-1})) / (k_i - k_{i-1}): the distinct clusters each added
  slot brings between neighbouring cutoffs (none at the first k).
* the distribution of u_q(k) over Q: median, p10, p90 (quantiles by linear interpolation between
  order statistics: for sorted values x_0..x_{n-1}, q(p) = x_j + (h - j) * (x_{j+1} - x_j) with
  h = (n - 1) * p and j = floor(h)), the share of queries with u_q(k) <= threshold, and a
  histogram (distinct count -> number of queries).

The prompt cost side, where the corpus has text: a document's tokens are estimated as
characters / 4 (title and text, joined by one newline when both are present; no rounding).
tokens_q(k) = the sum of the estimated tokens of q's first k results (a document absent from the
corpus adds 0 and is counted apart); prompt tokens at k = the mean of tokens_q(k) over Q. With a
price per million tokens and queries per day: daily price = prompt tokens * queries per day *
price / 1,000,000, so doubling k (about) doubles the prompt and the price.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from app.eval.clusters import FEW, cluster_keys, clusters_frame

DEFAULT_KS: tuple[int, ...] = (10, 20, 30, 40, 50)
DEFAULT_THRESHOLD = FEW
#: How a document's prompt tokens are estimated (echoed with the figures).
TOKEN_ESTIMATE = "characters / 4 (title and text)"


def estimate_tokens(title: str, text: str) -> float:
    """Estimated prompt tokens of a document: its characters / 4 (title + newline + text)."""
    joined = f"{title}\n{text}" if title and text else title or text
    return len(joined) / 4


def quantile(values: Sequence[float], p: float) -> float:
    """The p-quantile by linear interpolation between order statistics (h = (n - 1) * p)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    h = (len(ordered) - 1) * p
    j = math.floor(h)
    if j + 1 >= len(ordered):
        return float(ordered[-1])
    return float(ordered[j] + (h - j) * (ordered[j + 1] - ordered[j]))


@dataclass(frozen=True, slots=True)
class ClusterDepth:
    """The figures at one k."""

    k: int
    mean_distinct: float
    distinct_fraction: float
    #: distinct clusters per added slot since the previous k (None at the first k)
    marginal_per_slot: float | None
    median: float
    p10: float
    p90: float
    share_at_or_below: float
    #: distinct count -> number of queries with it (only counts that occur)
    histogram: dict[int, int]
    #: queries with fewer than k results (counted on what they returned)
    short_queries: int
    prompt_tokens: float | None
    daily_price: float | None


@dataclass(frozen=True)
class ClusterProfile:
    """A run's cluster figures at every k, over every query it answers."""

    queries: int
    threshold: int
    depths: list[ClusterDepth]
    #: results (within the largest k) whose document has no cluster_id / is not in the corpus
    unclustered_results: int
    unknown_results: int
    price_per_million: float | None
    queries_per_day: float | None


def cluster_profile(
    top: pl.DataFrame,
    clusters: Mapping[str, str],
    *,
    ks: Sequence[int] = DEFAULT_KS,
    threshold: int = DEFAULT_THRESHOLD,
    tokens: Mapping[str, float] | None = None,
    price_per_million: float | None = None,
    queries_per_day: float | None = None,
) -> ClusterProfile:
    """The cluster profile of a ranked run (see the module's definitions).

    ``top``: qid, rank (1-based), doc_id: at least the first max(ks) results of every query
    (``rank_every_query``). ``clusters``: doc_id -> cluster_id of the clustered documents.
    ``tokens``: doc_id -> estimated tokens of every corpus document, or None when the corpus
    has no text (no cost side). The daily price needs both the price and the queries per day.
    """
    cutoffs = sorted(set(ks))
    if not cutoffs or cutoffs[0] < 1:
        raise ValueError(f"every k must be >= 1, got {list(ks)}")
    deepest = top.filter(pl.col("rank") <= cutoffs[-1]).select("qid", "rank", "doc_id")
    keyed = cluster_keys(deepest, clusters_frame(dict(clusters)))
    qids = keyed.get_column("qid").unique().to_list()
    returned = dict(keyed.group_by("qid").len().iter_rows())
    known = set(tokens) if tokens is not None else None
    unknown = keyed.filter(~pl.col("doc_id").is_in(list(known))).height if known is not None else 0
    if tokens is not None:
        costed = keyed.with_columns(
            pl.col("doc_id")
            .replace_strict(dict(tokens), default=0.0, return_dtype=pl.Float64)
            .alias("tokens")
        )
    rows: list[ClusterDepth] = []
    previous: tuple[int, float] | None = None
    for k in cutoffs:
        shown = keyed.filter(pl.col("rank") <= k)
        per_query = dict.fromkeys(qids, 0) | dict(
            shown.group_by("qid").agg(pl.col("cluster").n_unique()).iter_rows()
        )
        values = [int(v) for v in per_query.values()]
        mean = sum(values) / len(values) if values else 0.0
        prompt = daily = None
        if tokens is not None and qids:
            prompt = float(costed.filter(pl.col("rank") <= k).get_column("tokens").sum()) / len(
                qids
            )
            if price_per_million is not None and queries_per_day is not None:
                daily = prompt * queries_per_day * price_per_million / 1_000_000
        rows.append(
            ClusterDepth(
                k=k,
                mean_distinct=mean,
                distinct_fraction=mean / k,
                marginal_per_slot=None
                if previous is None
                else (mean - previous[1]) / (k - previous[0]),
                median=quantile(values, 0.5),
                p10=quantile(values, 0.1),
                p90=quantile(values, 0.9),
                share_at_or_below=sum(v <= threshold for v in values) / len(values)
                if values
                else 0.0,
                histogram=dict(sorted(Counter(values).items())),
                short_queries=sum(1 for q in qids if returned[q] < k),
                prompt_tokens=prompt,
                daily_price=daily,
            )
        )
        previous = (k, mean)
    return ClusterProfile(
        queries=len(qids),
        threshold=threshold,
        depths=rows,
        unclustered_results=keyed.filter(pl.col("cluster_id").is_null()).height,
        unknown_results=unknown,
        price_per_million=price_per_million,
        queries_per_day=queries_per_day,
    )
