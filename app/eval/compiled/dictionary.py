"""The cluster tally of a Parquet log's rows with their ids as Parquet keeps them: each a
number into its row group's dictionary of ids (``app.eval.log_dictionary``).

A dictionary's ids are checked and hashed (``entries``) and looked up in the corpus
(``look_up_entries``) once, not once a row: a log's 100,000 documents are named by 100M
rows. The rows are then tallied a query at a time (``tally_indices``) as
``tally.tally_queries`` tallies a text log's lines: a row's query is the row before's when
its number is (or its id's bytes are), its repeated documents dropped (the first row kept),
its rows in ranking order (sorted when not written in it: by the score, then the document
id's bytes; or by the rank), its first max(k) results counted. Nothing is decided by a hash
alone."""

from __future__ import annotations

import numpy as np

from app.eval.compiled import compiled, inlined
from app.eval.compiled.columns import _id_bytes
from app.eval.compiled.lines import DONE, FILE, REFUSED, TREC_EVAL
from app.eval.compiled.scan import greater, id_hash, prefetch, same, word_of
from app.eval.compiled.table import R_CODE, R_TOKENS, RECORD_WORDS, lookup
from app.eval.compiled.tally import (
    MAX_QUERY_LINES,
    PREFETCH_AHEAD,
    Q_DROPPED,
    Q_EPOCH,
    Q_LINES,
    Q_QUERIES,
    Q_SHOWN,
    _sort,
    grown,
)


@compiled
def entries(data: np.ndarray, offsets: np.ndarray, hashes: np.ndarray) -> tuple[int, int]:
    """Each id of a dictionary (``data[offsets[e]:offsets[e + 1]]``) hashed into
    ``hashes[e]`` (``scan.id_hash``, as a text log's ids): (0, what the ids' bytes hold:
    ``columns.BLANK_OR_CONTROL`` and ``PAST_ASCII`` as bits), or (-1, 0) at an empty id
    (the careful reader words it)."""
    found = 0
    for e in range(len(offsets) - 1):
        start = offsets[e]
        end = offsets[e + 1]
        if end <= start:
            return -1, 0
        for k in range(start, end, 8):
            found |= _id_bytes(word_of(data, k, end), min(end - k, 8))
        hashes[e] = id_hash(data, start, end)
    return 0, found


_LOW = np.uint64(0xFFFFFFFF)

#: A document entry's row in ``look_up_entries``' table: the first entry of its id's bytes
#: (the row its marks are kept in), its cluster's number (0: none), its tokens (a double's
#: bits; NaN: unknown), the number of the query that last counted it. One row read a result
#: (the four in one array: in four, a result read four lines of memory, past a core's cache).
E_FIRST = 0
E_CODE = 1
E_TOKENS = 2
E_MARK = 3
ENTRY_WORDS = 4


@compiled
def look_up_entries(
    data: np.ndarray,
    offsets: np.ndarray,
    hashes: np.ndarray,
    corpus: tuple[np.ndarray, ...],
    table: np.ndarray,
    row_first: np.ndarray,
) -> int:
    """Each document id of a dictionary (hashed by ``entries``) looked up in the corpus, its
    row of ``table`` (``E_*``) written, its mark 0. A dictionary may name an id twice: both
    entries are one document (their first's mark), found by the corpus row's first entry
    (``row_first``: a calling thread's, a number a corpus row, any values: an entry there
    counts when it is one of this dictionary's that names the row) or, outside the corpus,
    by the bytes. The number of entries outside the corpus."""
    ids, corpus_offsets, slots, records = corpus
    record_floats = records.view(np.float64)
    floats = table.view(np.float64)
    n = len(offsets) - 1
    mask = np.uint64(len(slots) - 1)
    outside = 0
    for e in range(n):
        # (as ``tally.look_up_lines``: the slot asked for twice as far ahead as its record)
        if e + 2 * PREFETCH_AHEAD < n:
            ahead = np.intp(hashes[e + 2 * PREFETCH_AHEAD] & mask)
            prefetch(slots, ahead)  # type: ignore[call-arg]
        if e + PREFETCH_AHEAD < n:
            value = slots[hashes[e + PREFETCH_AHEAD] & mask]
            record = np.intp(value & _LOW) * RECORD_WORDS - RECORD_WORDS
            prefetch(records, record)  # type: ignore[call-arg]
        row = lookup(
            data, offsets[e], offsets[e + 1], hashes[e], slots, records, ids, corpus_offsets
        )
        table[e, E_MARK] = row  # (until the firsts are found)
        outside += row < 0
    # the ids outside the corpus: an open-addressing set of their first entries (+ 1)
    size = 16
    while size < 2 * outside:
        size *= 2
    firsts = np.zeros(size, np.int64)
    for e in range(n):
        row = table[e, E_MARK]
        if row >= 0:
            table[e, E_CODE] = records[row, R_CODE]
            floats[e, E_TOKENS] = record_floats[row, R_TOKENS]
            f = row_first[row]
            if not (0 <= f < e and table[f, E_MARK] == row):
                row_first[row] = e
                f = e
            table[e, E_FIRST] = f
            continue
        table[e, E_CODE] = 0
        floats[e, E_TOKENS] = np.nan
        h = hashes[e]
        at = h & np.uint64(size - 1)
        while firsts[at] != 0:
            f = firsts[at] - 1
            if hashes[f] == h and same(
                data, offsets[f], offsets[f + 1], data, offsets[e], offsets[e + 1]
            ):
                break
            at = (at + np.uint64(1)) & np.uint64(size - 1)
        if firsts[at] == 0:
            firsts[at] = e + 1
        table[e, E_FIRST] = firsts[at] - 1
    for e in range(n):
        table[e, E_MARK] = 0
    return outside


@inlined
def _same_query(
    qidx: np.ndarray, a: int, b: int, qdata: np.ndarray, qoffsets: np.ndarray, qhashes: np.ndarray
) -> bool:
    """True when rows ``a`` and ``b`` name the same query: the same entry, or two of the
    same bytes."""
    x = qidx[a]
    y = qidx[b]
    if x == y:
        return True
    return bool(qhashes[x] == qhashes[y]) and same(
        qdata, qoffsets[x], qoffsets[x + 1], qdata, qoffsets[y], qoffsets[y + 1]
    )


@inlined
def _ties_in_order(
    didx: np.ndarray,
    ddata: np.ndarray,
    doffsets: np.ndarray,
    scores: np.ndarray,
    row: int,
    end: int,
) -> bool:
    """True when each of rows ``row`` to ``end`` whose score ties the row before's has a
    document id after it in byte order (trec_eval's order: ties by the id, descending)."""
    for i in range(row + 1, end):
        if scores[i - 1] == scores[i]:
            x = didx[i - 1]
            y = didx[i]
            if not greater(ddata, doffsets[x], doffsets[x + 1], doffsets[y], doffsets[y + 1]):
                return False
    return True


@compiled
def query_bounds(
    qidx: np.ndarray, qdata: np.ndarray, qoffsets: np.ndarray, qhashes: np.ndarray
) -> tuple[int, int]:
    """(The first row, from 1 on, that begins a query, or the number of rows when every row
    is one query's; the row where the last query begins, 0 when it is the only one.)"""
    n = len(qidx)
    first = 1
    while first < n and _same_query(qidx, first - 1, first, qdata, qoffsets, qhashes):
        first += 1
    last = n - 1
    while last > 0 and _same_query(qidx, last - 1, last, qdata, qoffsets, qhashes):
        last -= 1
    return min(first, n), max(last, 0)


@compiled
def tally_indices(
    qidx: np.ndarray,
    qdata: np.ndarray,
    qoffsets: np.ndarray,
    qhashes: np.ndarray,
    didx: np.ndarray,
    ddata: np.ndarray,
    doffsets: np.ndarray,
    table: np.ndarray,
    scores: np.ndarray,
    ranks: np.ndarray,
    first: int,
    last: int,
    order: int,
    ks: np.ndarray,
    tally: tuple[np.ndarray, ...],
) -> tuple[int, np.ndarray]:
    """Tally the whole queries of rows ``first`` to ``last`` at the cutoffs ``ks``: a row's
    query is entry ``qidx[row]`` of the query ids' dictionary (``qdata``, ``qoffsets``,
    hashed in ``qhashes``), its document entry ``didx[row]`` of the documents' (``ddata``,
    ``doffsets``), whose row of ``table`` ``look_up_entries`` wrote; ``tally`` as
    ``tally.tally_block``'s (its mark per corpus row unused: an entry's is in ``table``).
    (DONE, the hash of each query tallied, in order), or REFUSED for a query of more than
    ``MAX_QUERY_LINES`` rows (the careful reader holds it)."""
    histograms, short, clustered, known, token_sums, counters, _, cluster_marks = tally
    floats = table.view(np.float64)
    query_hashes = np.empty(1024, np.uint64)
    queries = 0
    keep = np.empty(64, np.int64)
    spare = np.empty(64, np.int64)
    local_starts = np.empty(0, np.int64)
    local_ends = np.empty(0, np.int64)
    local_scores = np.empty(0, np.float64)
    local_ranks = np.empty(0, np.int64)
    deepest = ks[-1]
    nks = len(ks)
    epoch = counters[Q_EPOCH]
    row = first
    while row < last:
        end = row + 1
        in_order = True
        ties = False
        # (the arrays are handed to a function only at two ids of one hash and at a tie:
        # numba counts a reference to each array a call is handed, even inlined, two
        # atomic operations an array; a row at a time they took 40% of the pass, measured)
        while end < last:
            if end + PREFETCH_AHEAD < last:  # a later row's entry asked for (see the table)
                prefetch(table, np.intp(didx[end + PREFETCH_AHEAD]) * ENTRY_WORDS)  # type: ignore[call-arg]
            x = qidx[end - 1]
            y = qidx[end]
            if x != y and (
                qhashes[x] != qhashes[y]  # (then no call: see above)
                or not _same_query(qidx, end - 1, end, qdata, qoffsets, qhashes)
            ):
                break
            if order == TREC_EVAL:
                a = scores[end - 1]
                b = scores[end]
                if a < b:
                    in_order = False
                elif a == b:
                    ties = True
            elif order != FILE and ranks[end - 1] > ranks[end]:
                in_order = False
            end += 1
        if ties and in_order:  # tied scores: in order when the document ids descend
            in_order = _ties_in_order(didx, ddata, doffsets, scores, row, end)
        size = end - row
        if size > MAX_QUERY_LINES:
            return REFUSED, np.empty(0, np.uint64)
        if size > len(keep):
            keep = np.empty(2 * size, np.int64)
            spare = np.empty(2 * size, np.int64)
        epoch += 1
        # its repeated documents dropped, the first row kept (positions in the query)
        kept = 0
        for p in range(size):
            f = table[didx[row + p], E_FIRST]
            if table[f, E_MARK] == epoch:
                continue
            table[f, E_MARK] = epoch
            keep[kept] = p
            kept += 1
        if not in_order:
            if size > len(local_starts):
                local_starts = np.empty(2 * size, np.int64)
                local_ends = np.empty(2 * size, np.int64)
                local_scores = np.empty(2 * size, np.float64)
                local_ranks = np.empty(2 * size, np.int64)
            for p in range(size):
                e = didx[row + p]
                local_starts[p] = doffsets[e]
                local_ends[p] = doffsets[e + 1]
                local_scores[p] = scores[row + p]
                local_ranks[p] = ranks[row + p]
            _sort(
                keep, kept, spare, order, ddata, local_starts, local_ends, local_scores, local_ranks
            )
        # its first results counted, without a branch on what a result is (as
        # ``tally.tally_queries``)
        shown = min(kept, deepest)
        new = 0
        j = 0
        for r in range(shown):
            e = didx[row + keep[r]]
            code = table[e, E_CODE]
            t = floats[e, E_TOKENS]
            counted = t == t  # not NaN
            known[r] += counted
            token_sums[r] += t if counted else 0.0
            in_cluster = code > 0
            clustered[r] += in_cluster
            new += not in_cluster or cluster_marks[code] != epoch
            cluster_marks[code] = epoch  # (number 0 too: none is a cluster)
            while j < nks and ks[j] == r + 1:
                histograms[j, new] += 1
                j += 1
        while j < nks:
            histograms[j, new] += 1
            short[j] += 1
            j += 1
        counters[Q_QUERIES] += 1
        counters[Q_LINES] += size
        counters[Q_DROPPED] += size - kept
        counters[Q_SHOWN] += shown
        if queries == len(query_hashes):
            query_hashes = grown(query_hashes, 2 * queries)
        query_hashes[queries] = qhashes[qidx[row]]
        queries += 1
        row = end
    counters[Q_EPOCH] = epoch
    return DONE, query_hashes[:queries]
