"""The compiled path of a Parquet log's cluster tally (``app.eval.log_fast``).

polars reads the log's columns a batch at a time (its own threads, many rows an instruction)
and works out, per row, what needs the strings: where a query begins, whether a row comes
after the one before in ranking order, its document's 64-bit hash; the compiled pass then
looks the hashes up in a table of the corpus's, and tallies. Nothing is decided by a hash
alone: a row found in the corpus by its hash is compared with that document's id (polars,
the whole batch at once), and two documents of one query not in the corpus that share a
hash are compared before the pass counts them as one. A batch with a query written out of
ranking order, or with two distinct documents of one hash, is tallied by polars instead
(``fallback``). ``Declined`` (the whole log to the careful paths, which word the error or
read it) for a corpus two of whose ids share a hash and for a result without the score (or
rank) its order needs. A thread reads and prepares the next batch while this one is tallied.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from app.eval.cluster_profile import ClusterCorpus, ClusterTally
from app.eval.conventions import Order
from app.eval.parquet import RunColumns, checked_batches
from app.eval.streaming import ahead

#: Rows read at once.
PARQUET_ROWS = 250_000
#: The seed of polars' hash, for the log's ids and the corpus's alike.
_SEED = 29

#: A batch of whole queries tallied by polars (``cluster_stream``'s block tally).
FallbackFn = Callable[[pl.DataFrame], ClusterTally]


def order_code(order: Order) -> int:
    """``order`` as the compiled pass numbers it (``compiled.lines``' TREC_EVAL, RANK, FILE)."""
    from app.eval.compiled import lines

    return {Order.TREC_EVAL: lines.TREC_EVAL, Order.RANK: lines.RANK, Order.FILE: lines.FILE}[order]


class Declined(Exception):
    """The compiled path does not read this log (see the module)."""


def tally_parquet(
    path: Path,
    corpus: ClusterCorpus,
    *,
    columns: RunColumns,
    order: Order,
    tally_columns: Callable[..., int],
    seen: Any,
    fallback: FallbackFn,
) -> list[tuple[ClusterTally, int]]:
    """Tally the Parquet log at ``path`` with ``tally_columns`` (``compiled.tally``'s, with a
    worker's scratch and accumulators); each query's first id's hash goes to ``seen``
    (which raises when one comes twice). The tallies of the batches polars tallied come
    back, with their rows. Declined: see the module."""
    from app.eval.compiled import table

    corpus_ids = corpus.documents.get_column("doc_id")
    keys, rows = table.hashed_table(corpus_ids.hash(_SEED).to_numpy(writable=True))
    if corpus_ids.len() and not len(rows):
        raise Declined("two of the corpus's ids share a hash")
    needed = {Order.TREC_EVAL: "score", Order.RANK: "rank"}.get(order)
    other: list[tuple[ClusterTally, int]] = []

    def prepared() -> Generator[tuple[pl.DataFrame, dict[str, np.ndarray], int]]:
        for frame, begins, first_row in _whole_queries(
            path, columns, with_rank=order is Order.RANK
        ):
            if needed is not None and frame.get_column(needed).null_count():
                raise Declined(f"a result without a {needed}")  # the careful path names it
            arrays = {
                "begins": begins.to_numpy(writable=True),
                "starts": frame.get_column("qid").filter(begins).hash(_SEED).to_numpy(),
                "hashes": frame.get_column("doc_id").hash(_SEED).to_numpy(writable=True),
                "scores": frame.get_column("score").fill_null(0.0).to_numpy(writable=True),
                "ranks": frame.get_column("rank").fill_null(0).to_numpy(writable=True)
                if order is Order.RANK
                else np.zeros(frame.height, np.int64),
            }
            arrays["in_order"] = _after_the_row_before(frame, arrays, order)
            yield frame, arrays, first_row

    with ahead(prepared()) as batches:
        for frame, arrays, first_row in batches:
            seen.add_new(np.ascontiguousarray(arrays["starts"]))
            found = table.hashed_rows(keys, rows, arrays["hashes"])
            if not _documents_checked(frame, arrays, found, corpus_ids) or not bool(
                (arrays["begins"] | arrays["in_order"]).all()
            ):
                line = pl.int_range(0, pl.len(), dtype=pl.UInt32) + first_row
                other.append((fallback(frame.with_columns(line.alias("line"))), frame.height))
                continue
            tally_columns(
                arrays["begins"],
                arrays["in_order"],
                arrays["hashes"],
                found,
                arrays["scores"],
                arrays["ranks"],
            )
    return other


def _after_the_row_before(
    frame: pl.DataFrame, arrays: dict[str, np.ndarray], order: Order
) -> np.ndarray:
    """Whether each row comes after the row before in ranking order (on a query's first
    row: no matter): by the scores (or ranks) in the compiled pass, by the document ids
    (polars) on the rows whose score ties the row before's."""
    from app.eval.compiled import columns

    after, ties = columns.after_the_row_before(arrays["scores"], arrays["ranks"], order_code(order))
    if len(ties):
        doc_ids = frame.get_column("doc_id")
        after[ties] = (doc_ids.gather(ties) < doc_ids.gather(ties - 1)).to_numpy()
    return after


def _documents_checked(
    frame: pl.DataFrame, arrays: dict[str, np.ndarray], found: np.ndarray, corpus_ids: pl.Series
) -> bool:
    """Whether no two documents of a query outside the corpus share a hash; ``found`` (the
    rows found in the corpus by their hash) is set to -1 where the row holds another id
    than that document's (it is then not in the corpus)."""
    from app.eval.compiled import columns

    doc_ids = frame.get_column("doc_id")
    if corpus_ids.len():
        same = (doc_ids == corpus_ids.gather(np.maximum(found, 0))).to_numpy()
        found[(found >= 0) & ~same] = -1
    pairs = columns.repeated_unknowns(arrays["begins"], found, arrays["hashes"])
    if not pairs.shape[1]:
        return True
    return bool((doc_ids.gather(pairs[0]) == doc_ids.gather(pairs[1])).all())


def _whole_queries(
    path: Path, columns: RunColumns, *, with_rank: bool
) -> Generator[tuple[pl.DataFrame, pl.Series, int]]:
    """The log's rows in frames of whole queries, where each query begins, and the frame's
    first row's number (a batch's last query waits for the next; the caller checks that
    each query comes once)."""
    carry: pl.DataFrame | None = None
    first_row = 1
    for batch in checked_batches(path, columns, with_rank=with_rank, rows=PARQUET_ROWS):
        frame = batch if carry is None else pl.concat([carry, batch])
        qid = frame.get_column("qid")
        begins = (qid != qid.shift()).fill_null(True)
        starts = begins.arg_true()
        cut = int(starts[-1]) if len(starts) else 0
        carry = frame.slice(cut)
        if cut:
            yield frame.slice(0, cut), begins.slice(0, cut), first_row
            first_row += cut
    if carry is not None and carry.height:
        qid = carry.get_column("qid")
        yield carry, (qid != qid.shift()).fill_null(True), first_row
