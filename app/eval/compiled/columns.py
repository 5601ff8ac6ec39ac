"""The cluster tally of a Parquet log's batch, given in columns by polars
(``app.eval.log_parquet``): what the strings decided (query starts, ranking order, documents'
hashes) comes in arrays, and the pass tallies; two documents outside the corpus sharing a hash
are found for the caller to compare first (``repeated_unknowns``)."""

from __future__ import annotations

import numpy as np

from app.eval.compiled import compiled
from app.eval.compiled.lines import (
    F_IN_ORDER,
    F_SAME_QUERY,
    L_DOC_HASH,
    L_FLAGS,
    L_RANK,
    L_ROW,
    L_SCORE,
    RANK,
    TREC_EVAL,
)
from app.eval.compiled.tally import grown, tally_queries


@compiled
def tally_columns(
    new_query: np.ndarray,
    in_order: np.ndarray,
    doc_hashes: np.ndarray,
    rows: np.ndarray,
    scores: np.ndarray,
    ranks: np.ndarray,
    order: int,
    lines: np.ndarray,
    ks: np.ndarray,
    records: np.ndarray,
    tally: tuple[np.ndarray, ...],
) -> int:
    """Tally whole queries given in columns, a line each (a Parquet log's batch, which
    polars read): whether the line begins a query, whether it comes after the line before
    in ranking order, its document's 64-bit hash and corpus row (-1: none), its score and
    rank. Documents not in the corpus are told apart by their hashes alone: the caller
    checks first that no two of a query share one (``repeated_unknowns``). ``lines``: the
    calling thread's scratch (``tally_block``); ``tally`` its accumulators. The queries
    tallied come back."""
    count = len(doc_hashes)
    if lines.shape[1] < count:
        lines = np.zeros((lines.shape[0], count), np.int64)
    for i in range(count):
        lines[L_DOC_HASH, i] = np.int64(doc_hashes[i])
        lines[L_ROW, i] = rows[i]
        lines[L_RANK, i] = ranks[i]
        flag = 0
        if not new_query[i]:
            flag = F_SAME_QUERY
            if in_order[i]:
                flag |= F_IN_ORDER
        lines[L_FLAGS, i] = flag
    lines[L_SCORE, :count].view(np.float64)[:] = scores + 0.0  # -0.0 ties with 0.0
    _, _, queries = tally_queries(
        np.zeros(8, np.uint8),
        count,
        True,
        order,
        lines,
        ks,
        records,
        tally,
        np.empty(1024, np.uint64),
        0,
        True,
    )
    return queries


@compiled
def repeated_unknowns(
    new_query: np.ndarray, rows: np.ndarray, doc_hashes: np.ndarray
) -> np.ndarray:
    """(earlier line, later line) of each pair of lines of one query whose documents, not
    in the corpus, share a 64-bit hash: the caller checks that they are one document."""
    pairs = np.empty((2, 64), np.int64)
    found = 0
    size = 64
    seen_hashes = np.zeros(size, np.uint64)
    seen_lines = np.zeros(size, np.int64)
    seen_marks = np.zeros(size, np.int64)
    epoch = 0
    first = 0
    count = len(rows)
    while first < count:
        last = first + 1
        while last < count and not new_query[last]:
            last += 1
        if 2 * (last - first) > size:
            while 2 * (last - first) > size:
                size *= 2
            seen_hashes = np.zeros(size, np.uint64)
            seen_lines = np.zeros(size, np.int64)
            seen_marks = np.zeros(size, np.int64)
        epoch += 1
        mask = np.uint64(size - 1)
        for i in range(first, last):
            if rows[i] >= 0:
                continue
            h = doc_hashes[i]
            at = h & mask
            while seen_marks[at] == epoch and seen_hashes[at] != h:
                at = (at + np.uint64(1)) & mask
            if seen_marks[at] == epoch:
                if found == pairs.shape[1]:
                    larger = np.empty((2, 2 * found), np.int64)
                    larger[:, :found] = pairs
                    pairs = larger
                pairs[0, found] = seen_lines[at]
                pairs[1, found] = i
                found += 1
            else:
                seen_marks[at] = epoch
                seen_hashes[at] = h
                seen_lines[at] = i
        first = last
    return pairs[:, :found]


@compiled
def after_the_row_before(
    scores: np.ndarray, ranks: np.ndarray, order: int
) -> tuple[np.ndarray, np.ndarray]:
    """(whether each row comes after the row before in ranking order, the rows whose score
    ties the row before's: their document ids decide, which the caller compares)."""
    count = len(scores)
    after = np.ones(count, np.bool_)
    ties = np.empty(16, np.int64)
    found = 0
    for i in range(1, count):
        if order == TREC_EVAL:
            if scores[i] == scores[i - 1]:  # -0.0 ties with 0.0, as the sort has it
                if found == len(ties):
                    ties = grown(ties, 2 * found)
                ties[found] = i
                found += 1
            else:
                after[i] = scores[i] < scores[i - 1]
        elif order == RANK:
            after[i] = ranks[i] >= ranks[i - 1]
    return after, ties[:found]
