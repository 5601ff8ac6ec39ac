"""Ranks of judged documents in a run whose queries each hold one stretch of lines.

A run written query by query (nearly every run) keeps all the lines of a query together. Then
the rank of a judged document is counted over its query's stretch of lines alone, in arrays:
no join of every line of the run with the judged documents of its query (the join hashes
seven million query ids for seven thousand judged documents). Runs whose queries are
interleaved take the general path (``app.eval.ranking``); both give the same ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from app.eval.conventions import Order

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@dataclass(frozen=True)
class Stretches:
    """The queries of a run, each one stretch of rows: ``qids[i]`` holds the rows from
    ``starts[i]`` up to (not including) ``ends[i]``."""

    qids: pl.Series
    starts: npt.NDArray[np.int64]
    ends: npt.NDArray[np.int64]

    def per_query(self) -> pl.DataFrame:
        """qid, n: the number of lines of each query."""
        return pl.DataFrame(
            {"qid": self.qids, "n": pl.Series(self.ends - self.starts, dtype=pl.UInt32)}
        )


def stretches(frame: pl.DataFrame) -> Stretches | None:
    """The stretches of ``frame``'s queries, or None when a query's lines are not together."""
    import numpy as np

    qid = frame.get_column("qid")
    if not qid.len():
        return None
    # run-length encoding: no copy of the column (neighbours compared through a shifted copy
    # of seven million ids would weigh 112 MB)
    runs = qid.rle().struct.unnest()
    qids = runs.get_column("value")
    if qids.n_unique() != qids.len():
        return None  # a query comes back after another one: interleaved
    ends = runs.get_column("len").cast(pl.Int64).cum_sum().to_numpy()
    return Stretches(qids=qids.alias("qid"), starts=np.append(0, ends[:-1]), ends=ends)


def judged_ranks(
    frame: pl.DataFrame,
    groups: Stretches,
    judgments: pl.DataFrame,
    dropped: pl.Series,
    order: Order,
) -> pl.DataFrame:
    """qid, doc_id, grade, rank of every judged document ``frame`` returns (but the lines
    ``dropped``, by ``pos``), sorted by qid and rank: the rank is one plus the number of
    kept lines of its query that precede it under ``order``, as ``app.eval.ranking`` has
    it (trec_eval: score descending, then docno descending)."""
    import numpy as np

    indexed = frame.lazy().with_row_index("_i")
    if dropped.len():
        indexed = indexed.filter(~pl.col("pos").is_in(dropped.implode()))
    judged_docs = judgments.get_column("doc_id").unique().implode()
    targets = (
        indexed.filter(pl.col("doc_id").is_in(judged_docs))
        .join(judgments.lazy(), on=["qid", "doc_id"], how="inner")
        .collect(engine="streaming")
    )
    kept = np.ones(frame.height, dtype=bool)
    if dropped.len():
        rows = frame.lazy().with_row_index("_i").filter(pl.col("pos").is_in(dropped.implode()))
        kept[rows.select("_i").collect(engine="streaming").to_series().to_numpy()] = False
    rows_t = targets.get_column("_i").cast(pl.Int64).to_numpy()
    which = np.searchsorted(groups.starts, rows_t, side="right") - 1
    starts, ends = groups.starts[which].tolist(), groups.ends[which].tolist()
    # Columns are read a query at a time: a slice within one of the frame's chunks is a view,
    # where the whole column as one array would copy it (56 MB a column at 7M lines).
    score, rank, pos = (frame.get_column(c) for c in ("score", "rank", "pos"))
    before: list[int] = []
    # (target, row) of every kept line tied with a target on the score: compared on the
    # docno afterwards, all at once
    tie_targets: list[npt.NDArray[np.int64]] = []
    tie_rows: list[npt.NDArray[np.int64]] = []
    for t, (row, a, b) in enumerate(zip(rows_t.tolist(), starts, ends, strict=True)):
        alive, at = kept[a:b], row - a
        if order is Order.TREC_EVAL:
            values = score.slice(a, b - a).to_numpy()
            own = values[at]
            before.append(int(np.count_nonzero((values > own) & alive)))
            tied = np.flatnonzero((values == own) & alive)
            tied = tied[tied != at]
            if tied.size:
                tie_targets.append(np.full(tied.size, t, dtype=np.int64))
                tie_rows.append(tied + a)
        elif order is Order.RANK:
            values, places = rank.slice(a, b - a).to_numpy(), pos.slice(a, b - a).to_numpy()
            first = (values < values[at]) | ((values == values[at]) & (places < places[at]))
            before.append(int(np.count_nonzero(first & alive)))
        else:
            places = pos.slice(a, b - a).to_numpy()
            before.append(int(np.count_nonzero((places < places[at]) & alive)))
    counts = np.asarray(before, dtype=np.int64)
    if tie_rows:
        tie_t = np.concatenate(tie_targets)
        docs = frame.get_column("doc_id").gather(np.concatenate(tie_rows))
        own_docs = targets.get_column("doc_id").gather(tie_t)
        # docno descending breaks the tie (byte order, as polars compares strings)
        counts += np.bincount(tie_t[(docs > own_docs).to_numpy()], minlength=counts.size)
    return (
        targets.select("qid", "doc_id", "grade")
        .with_columns(pl.Series("rank", counts + 1).cast(pl.UInt32))
        .sort("qid", "rank")
    )
