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

What any k needs, kept compactly (``ClusterTraces``, stored per run at import): per query the
number of results and the ranks at which a result repeats a cluster already seen higher in the
same ranking, so that u_q(k) = min(k, results of q) - (repeats at rank <= k); per rank, summed
over the queries, the results with a cluster, the results in the corpus and their tokens.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from app.eval.clusters import FEW

DEFAULT_KS: tuple[int, ...] = (10, 20, 30, 40, 50)
DEFAULT_THRESHOLD = FEW
#: How a document's prompt tokens are estimated (echoed with the figures).
TOKEN_ESTIMATE = "characters / 4 (title and text)"


def estimate_tokens(title: str, text: str) -> float:
    """Estimated prompt tokens of a document: its characters / 4 (title + newline + text)."""
    return float(tokens_of_lengths(len(title), len(text)))


def tokens_of_lengths(title_chars: Any, text_chars: Any) -> Any:
    """``estimate_tokens`` from the lengths alone (a store counts characters without sending
    the text): the newline joins a title and a text only when both are present. The same
    formula for numbers and for polars expressions (columns of lengths)."""
    joiner = (title_chars > 0) & (text_chars > 0)
    return (title_chars + joiner + text_chars) / 4


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


#: The corpus as the traces join it: tokens null = the document is not in the corpus.
CORPUS_SCHEMA = {"doc_id": pl.String, "cluster_id": pl.String, "tokens": pl.Float64}


@dataclass(frozen=True)
class ClusterCorpus:
    """What the cluster measures take from a corpus: a frame of its documents (doc_id,
    cluster_id, null for none, and tokens, the estimated prompt tokens) and whether any of
    them has text (without text: no cost side)."""

    documents: pl.DataFrame
    has_text: bool

    @classmethod
    def of(
        cls, clusters: Mapping[str, str], tokens: Mapping[str, float] | None = None
    ) -> ClusterCorpus:
        """From mappings: doc_id -> cluster_id of the clustered documents; doc_id -> the
        tokens of every document, or None when no document has text."""
        known = tokens or {}
        extra = [d for d in clusters if d not in known]
        ids = list(known) + extra
        return cls(
            documents=pl.DataFrame(
                {
                    "doc_id": ids,
                    "cluster_id": [clusters.get(d) or None for d in ids],
                    "tokens": list(known.values()) + [None] * len(extra),
                },
                schema=CORPUS_SCHEMA,
            ),
            has_text=tokens is not None,
        )

    @property
    def empty(self) -> bool:
        """True when which document sits where changes no figure (no clusters, no text)."""
        clustered = self.documents.height - self.documents.get_column("cluster_id").null_count()
        return not clustered and not self.has_text


@dataclass(frozen=True)
class CorpusSource:
    """A corpus asked only for the documents a run returned: a store's corpus may be far
    larger than what any run retrieves, and need not be read whole for one import."""

    #: False when no document has a cluster or text: where a document sits changes nothing
    matters: bool
    #: True when some document has text: the cost side is measured
    has_text: bool
    #: doc ids -> the clusters and estimated tokens of those of them in the corpus
    lookup: Callable[[list[str]], ClusterCorpus]

    @classmethod
    def of(cls, corpus: ClusterCorpus) -> CorpusSource:
        """A corpus already in memory."""
        return cls(matters=not corpus.empty, has_text=corpus.has_text, lookup=lambda _: corpus)


@dataclass(frozen=True, slots=True)
class QueryTrace:
    """One query's ranking as the cluster measures need it, at every k."""

    #: results the query returned (after dropping repeated documents)
    returned: int
    #: ranks (1-based, ascending) whose document's cluster already appeared at a better rank
    repeats: tuple[int, ...] = ()

    def distinct(self, k: int) -> int:
        """u_q(k): distinct clusters among the first k results."""
        return min(k, self.returned) - bisect.bisect_right(self.repeats, k)


@dataclass(frozen=True)
class RankTotals:
    """Per rank (list index = rank - 1), summed over the queries; lists end at the last rank
    with a non-zero entry (an empty list: zero at every rank)."""

    clustered: list[int] = field(default_factory=list)
    known: list[int] = field(default_factory=list)
    #: None when the corpus has no text: no cost side
    tokens: list[float] | None = None


@dataclass(frozen=True)
class ClusterTraces:
    """Everything the profile needs at any k: a trace per query and the totals per rank."""

    queries: dict[str, QueryTrace]
    totals: RankTotals
    #: the judged documents' cluster ranks where they differ from their own rank
    #: (app.eval.cluster_ranks): None when not traced (log runs, runs imported before)
    cluster_ranks: pl.DataFrame | None = None

    @property
    def depth(self) -> int:
        """The longest ranking."""
        return max((t.returned for t in self.queries.values()), default=0)


def _per_rank(frame: pl.DataFrame, value: pl.Expr) -> list[Any]:
    """Sum of ``value`` per rank as a list indexed by rank - 1 (missing ranks: 0)."""
    sums = frame.group_by("rank").agg(value.sum().alias("v")).filter(pl.col("v") != 0)
    if not sums.height:
        return []
    out: list[Any] = [0] * int(sums.get_column("rank").max())  # type: ignore[arg-type]
    for rank, v in sums.iter_rows():
        out[int(rank) - 1] = v
    return out


def repeats_a_cluster() -> pl.Expr:
    """True on a result whose cluster already appeared at a better rank of its query (over
    qid, rank, cluster_id: a result without a cluster is its own, and never repeats, since
    repeated documents are dropped)."""
    return pl.col("cluster_id").is_not_null() & (
        pl.col("rank") > pl.col("rank").min().over("qid", "cluster_id")
    )


def trace_ranking(
    ranked: pl.DataFrame | None,
    returned: Mapping[str, int],
    corpus: ClusterCorpus | None = None,
) -> ClusterTraces:
    """The traces of a ranked run.

    ``ranked``: qid, rank (1-based), doc_id of every result kept (the cluster measures are
    exact up to the deepest rank it holds). ``returned``: results per query (every query the
    run answers). Without a corpus (or one without clusters and text) nothing depends on
    which document sits where, and ``ranked`` may be None (no sort of a large run needed).
    """
    if corpus is None or corpus.empty:
        return ClusterTraces({q: QueryTrace(n) for q, n in returned.items()}, RankTotals())
    if ranked is None:
        raise ValueError("the ranked results are needed with clusters or text")
    # One join with the corpus: a document absent from it has no cluster and no tokens.
    joined = ranked.select("qid", "rank", "doc_id").join(corpus.documents, on="doc_id", how="left")
    # A document without a cluster is its own and never repeats (repeated documents are
    # dropped), so only the clustered results are searched for repeats.
    repeated = (
        joined.filter(pl.col("cluster_id").is_not_null())
        .filter(repeats_a_cluster())
        .group_by("qid")
        .agg(pl.col("rank").sort())
    )
    repeats = {qid: tuple(int(r) for r in ranks) for qid, ranks in repeated.iter_rows()}
    queries = {q: QueryTrace(n, repeats.get(q, ())) for q, n in returned.items()}
    return ClusterTraces(queries, trace_totals(joined, has_text=corpus.has_text))


def trace_totals(joined: pl.DataFrame, *, has_text: bool) -> RankTotals:
    """The per-rank totals of results joined with the corpus (rank, cluster_id, tokens)."""
    return RankTotals(
        clustered=_per_rank(joined, pl.col("cluster_id").is_not_null().cast(pl.Int64)),
        known=_per_rank(joined, pl.col("tokens").is_not_null().cast(pl.Int64)) if has_text else [],
        tokens=[float(v) for v in _per_rank(joined, pl.col("tokens").fill_null(0.0))]
        if has_text
        else None,
    )


def add_totals(a: RankTotals, b: RankTotals) -> RankTotals:
    """The totals of two sets of queries together (tokens: None unless both have them; an
    empty RankTotals() adds nothing)."""
    tokens = None
    if a.tokens is not None and b.tokens is not None:
        tokens = _plus(a.tokens, b.tokens)
    elif a == RankTotals():
        tokens = b.tokens
    elif b == RankTotals():
        tokens = a.tokens
    return RankTotals(
        clustered=_plus(a.clustered, b.clustered), known=_plus(a.known, b.known), tokens=tokens
    )


def _upto(values: Sequence[float], k: int) -> float:
    return float(sum(values[:k]))


def _plus(a: list[Any], b: Sequence[Any]) -> list[Any]:
    """Elementwise sum of two per-rank lists of any lengths."""
    if len(a) < len(b):
        a = a + [0] * (len(b) - len(a))
    return [x + (b[i] if i < len(b) else 0) for i, x in enumerate(a)]


@dataclass
class ClusterTally:
    """What the profile at fixed cutoffs needs, summed over queries: per k the histogram of
    u_q(k) and the queries with fewer than k results, and the per-rank totals. Its size
    depends on the cutoffs, not on the queries: a log of any length is tallied block by block
    (``add``) and the figures come out the same as from the traces of every query."""

    ks: tuple[int, ...]
    #: False: the corpus has no text (no cost side: ``totals.tokens`` is None)
    has_text: bool
    queries: int = 0
    #: per k (in ``ks`` order): distinct count -> queries
    histograms: list[Counter[int]] = field(default_factory=list)
    #: per k: queries with fewer than k results
    short: list[int] = field(default_factory=list)
    #: results shown at the largest k (sum over q of min(max(ks), results of q))
    shown: int = 0
    totals: RankTotals = field(default_factory=RankTotals)

    def __post_init__(self) -> None:
        if not self.histograms:
            self.histograms = [Counter() for _ in self.ks]
        if not self.short:
            self.short = [0] * len(self.ks)
        if self.has_text and self.totals.tokens is None:
            self.totals = RankTotals(self.totals.clustered, self.totals.known, [])

    def add(self, other: ClusterTally) -> None:
        """Count the queries of ``other`` too (queries of its own: none counted here)."""
        if other.ks != self.ks or other.has_text != self.has_text:
            raise ValueError("tallies of different cutoffs or corpora do not add")
        self.queries += other.queries
        for mine, theirs in zip(self.histograms, other.histograms, strict=True):
            mine.update(theirs)
        self.short = [a + b for a, b in zip(self.short, other.short, strict=True)]
        self.shown += other.shown
        self.totals = add_totals(self.totals, other.totals)


def tally_of_traces(traces: ClusterTraces, ks: Sequence[int], *, has_text: bool) -> ClusterTally:
    """The tally of every query's trace at the cutoffs ``ks`` (sorted, distinct)."""
    runs = list(traces.queries.values())
    cutoffs = tuple(ks)
    return ClusterTally(
        ks=cutoffs,
        has_text=has_text,
        queries=len(runs),
        histograms=[Counter(t.distinct(k) for t in runs) for k in cutoffs],
        short=[sum(1 for t in runs if t.returned < k) for k in cutoffs],
        shown=sum(min(cutoffs[-1], t.returned) for t in runs),
        totals=traces.totals,
    )


def tally_of_ranked(ranked: pl.DataFrame, corpus: ClusterCorpus, ks: Sequence[int]) -> ClusterTally:
    """The tally of some whole queries' rankings, in columns: ``ranked`` holds qid, rank
    (1-based, repeated documents dropped), doc_id of at least their first max(ks) results.
    The same figures as ``tally_of_traces(trace_ranking(...))``, without a trace a query."""
    joined = (
        ranked.lazy()
        .select("qid", "rank", "doc_id")
        .filter(pl.col("rank") <= max(ks))
        .join(corpus.documents.lazy(), on="doc_id", how="left")
        .with_columns(
            # a result brings a new cluster unless it repeats one
            new=~repeats_a_cluster()
        )
        .collect()
    )
    return tally_of_joined(joined, ks, has_text=corpus.has_text)


def tally_of_joined(
    joined: pl.DataFrame, ks: Sequence[int], *, has_text: bool, query: str = "qid"
) -> ClusterTally:
    """The tally of the first max(ks) results of some whole queries joined with the corpus:
    ``query`` (the query's key), rank, cluster_id (null: none), tokens (null: not in the
    corpus) and ``new`` (the result's cluster is not among the better-ranked ones')."""
    cutoffs = tuple(ks)
    per_query = joined.group_by(query).agg(
        pl.len().alias("n"),
        *[(pl.col("new") & (pl.col("rank") <= k)).sum().alias(f"u{k}") for k in cutoffs],
    )
    return _tally_of_counts(
        per_query, cutoffs, has_text=has_text, totals=trace_totals(joined, has_text=has_text)
    )


def _tally_of_counts(
    per_query: pl.DataFrame,
    cutoffs: tuple[int, ...],
    *,
    has_text: bool,
    totals: RankTotals | None = None,
) -> ClusterTally:
    """The tally of a frame of one row a query: ``n`` (its results) and ``u{k}`` (u_q(k))
    at each cutoff."""
    n = per_query.get_column("n")
    histograms = []
    for k in cutoffs:
        counts = per_query.get_column(f"u{k}").value_counts()
        histograms.append(Counter({int(u): int(c) for u, c in counts.iter_rows()}))
    return ClusterTally(
        ks=cutoffs,
        has_text=has_text,
        queries=per_query.height,
        histograms=histograms,
        short=[int((n < k).sum()) for k in cutoffs],
        shown=int(n.clip(upper_bound=cutoffs[-1]).sum()),
        totals=RankTotals() if totals is None else totals,
    )


def tally_of_trace_rows(rows: pl.DataFrame, ks: Sequence[int], *, has_text: bool) -> ClusterTally:
    """The tally of some queries' stored traces, in columns: ``returned`` and ``repeats``
    (a list of ranks), one row a query; without the per-rank totals (a run's, added once).
    u_q(k) = min(k, returned) - (repeats at rank <= k), as ``QueryTrace.distinct``."""
    cutoffs = tuple(ks)
    returned = pl.col("returned")
    per_query = rows.select(
        returned.alias("n"),
        *[
            (
                pl.min_horizontal(returned, pl.lit(k))
                - pl.col("repeats").list.eval(pl.element() <= k).list.sum().fill_null(0)
            ).alias(f"u{k}")
            for k in cutoffs
        ],
    )
    return _tally_of_counts(per_query, cutoffs, has_text=has_text)


def quantile_of_counts(histogram: Mapping[int, int], p: float) -> float:
    """``quantile`` of the values a histogram counts (value -> how many), without listing
    them: the same order statistics, the same interpolation."""
    n = sum(histogram.values())
    if not n:
        return 0.0
    h = (n - 1) * p
    j = math.floor(h)

    def at(index: int) -> int:
        seen = 0
        for value in sorted(histogram):
            seen += histogram[value]
            if index < seen:
                return value
        raise IndexError(index)

    if j + 1 >= n:
        return float(at(n - 1))
    low, high = at(j), at(j + 1)
    return float(low + (h - j) * (high - low))


def profile_of_tally(
    tally: ClusterTally,
    *,
    threshold: int = DEFAULT_THRESHOLD,
    price_per_million: float | None = None,
    queries_per_day: float | None = None,
) -> ClusterProfile:
    """The cluster profile (see the module's definitions) at the tally's cutoffs."""
    rows: list[ClusterDepth] = []
    previous: tuple[int, float] | None = None
    totals = tally.totals
    n = tally.queries
    for i, k in enumerate(tally.ks):
        histogram = tally.histograms[i]
        mean = sum(u * c for u, c in histogram.items()) / n if n else 0.0
        prompt = daily = None
        if totals.tokens is not None and n:
            prompt = _upto(totals.tokens, k) / n
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
                median=quantile_of_counts(histogram, 0.5),
                p10=quantile_of_counts(histogram, 0.1),
                p90=quantile_of_counts(histogram, 0.9),
                share_at_or_below=sum(c for u, c in histogram.items() if u <= threshold) / n
                if n
                else 0.0,
                histogram={u: histogram[u] for u in sorted(histogram) if histogram[u]},
                short_queries=tally.short[i],
                prompt_tokens=prompt,
                daily_price=daily,
            )
        )
        previous = (k, mean)
    deepest = tally.ks[-1]
    return ClusterProfile(
        queries=n,
        threshold=threshold,
        depths=rows,
        unclustered_results=tally.shown - int(_upto(totals.clustered, deepest)),
        unknown_results=tally.shown - int(_upto(totals.known, deepest))
        if totals.tokens is not None
        else 0,
        price_per_million=price_per_million,
        queries_per_day=queries_per_day,
    )


def profile_of_traces(
    traces: ClusterTraces,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    threshold: int = DEFAULT_THRESHOLD,
    price_per_million: float | None = None,
    queries_per_day: float | None = None,
) -> ClusterProfile:
    """The cluster profile (see the module's definitions) at the cutoffs ``ks``."""
    cutoffs = sorted(set(ks))
    if not cutoffs or cutoffs[0] < 1:
        raise ValueError(f"every k must be >= 1, got {list(ks)}")
    tally = tally_of_traces(traces, cutoffs, has_text=traces.totals.tokens is not None)
    return profile_of_tally(
        tally,
        threshold=threshold,
        price_per_million=price_per_million,
        queries_per_day=queries_per_day,
    )


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
    deepest = top.filter(pl.col("rank") <= cutoffs[-1])
    returned = {q: int(n) for q, n in deepest.group_by("qid").len().iter_rows()}
    traces = trace_ranking(deepest, returned, ClusterCorpus.of(clusters, tokens))
    return profile_of_traces(
        traces,
        ks=cutoffs,
        threshold=threshold,
        price_per_million=price_per_million,
        queries_per_day=queries_per_day,
    )
