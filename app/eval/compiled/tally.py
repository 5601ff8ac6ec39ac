"""The cluster tally of a block of a log in one compiled pass: each line taken apart where
it lies (``lines``), its document looked up in the corpus's table (``table``), each query's
repeated documents dropped (its first line in the file kept), its lines in ranking order
(without a sort when written in it, as a log is), its first max(k) results added to the
tally: per k the histogram of distinct clusters, per rank the clustered and known results
and their tokens. Nothing is allocated a line."""

from __future__ import annotations

import numpy as np

from app.eval.compiled import compiled, inlined
from app.eval.compiled.lines import (
    DONE,
    F_IN_ORDER,
    F_SAME_QUERY,
    L_BEGIN,
    L_CODE,
    L_DOC_END,
    L_DOC_HASH,
    L_DOC_START,
    L_FLAGS,
    L_QID_END,
    L_QID_START,
    L_RANK,
    L_ROW,
    L_SCORE,
    L_TOKENS,
    REFUSED,
    TREC_EVAL,
    ascii_only,
    parse_lines,
)
from app.eval.compiled.scan import greater, id_hash, prefetch, same
from app.eval.compiled.table import R_CODE, R_TOKENS, RECORD_WORDS, lookup

#: The most lines of one query the pass holds (some 200 MB of scratch).
MAX_QUERY_LINES = 1 << 20
#: How many lines ahead a corpus record is asked for (``look_up_lines``); its slot twice as
#: many.
PREFETCH_AHEAD = 16
_LOW = np.uint64(0xFFFFFFFF)


#: counters (int64), by index
Q_QUERIES = 0  # queries tallied
Q_LINES = 1  # lines read (blank lines not counted)
Q_DROPPED = 2  # repeated documents dropped
Q_SHOWN = 3  # results at the largest k: sum over queries of min(max k, results)
Q_EPOCH = 4  # the number of the query being tallied (marks the per-query sets)
Q_COUNTERS = 5


@inlined
def _before(
    i: int,
    j: int,
    order: int,
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    scores: np.ndarray,
    ranks: np.ndarray,
) -> bool:
    """True when line ``i`` of a query ranks before line ``j`` (``i`` < ``j`` in the file):
    trec_eval, score descending then docno in descending byte order; rank, the rank column
    ascending then the file's order."""
    if order == TREC_EVAL:
        if scores[i] != scores[j]:
            return bool(scores[i] > scores[j])
        return greater(buf, starts[i], ends[i], starts[j], ends[j])
    if ranks[i] != ranks[j]:
        return bool(ranks[i] < ranks[j])
    return i < j


@compiled
def _sort(
    keep: np.ndarray,
    count: int,
    spare: np.ndarray,
    order: int,
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    scores: np.ndarray,
    ranks: np.ndarray,
) -> None:
    """``keep[:count]`` (line numbers of a query) in ranking order: a bottom-up merge sort."""
    width = 1
    src = keep
    dst = spare
    while width < count:
        lo = 0
        while lo < count:
            mid = min(lo + width, count)
            hi = min(lo + 2 * width, count)
            a = lo
            b = mid
            k = lo
            while a < mid and b < hi:
                if _before(src[b], src[a], order, buf, starts, ends, scores, ranks):
                    dst[k] = src[b]
                    b += 1
                else:
                    dst[k] = src[a]
                    a += 1
                k += 1
            while a < mid:
                dst[k] = src[a]
                a += 1
                k += 1
            while b < hi:
                dst[k] = src[b]
                b += 1
                k += 1
            lo = hi
        src, dst = dst, src
        width *= 2
    if src is not keep:
        keep[:count] = src[:count]


@compiled
def look_up_lines(
    buf: np.ndarray,
    start: int,
    count: int,
    lines: np.ndarray,
    slots: np.ndarray,
    records: np.ndarray,
    ids: np.ndarray,
    offsets: np.ndarray,
) -> None:
    """Each line's corpus row, its cluster's number (0: none) and its tokens (NaN: unknown),
    in a loop of its own: the lookups of many lines are under way at once, and the slot of
    the line ``PREFETCH_AHEAD`` on is asked for while this one is looked up (the table is
    larger than a core's cache, and the block read passes through it: 24 ns a lookup
    against 16 measured). The tally then reads the lines alone, not the records (25 ns a
    line against 20)."""
    doc_hashes = lines[L_DOC_HASH].view(np.uint64)
    doc_starts = lines[L_DOC_START]
    doc_ends = lines[L_DOC_END]
    doc_rows = lines[L_ROW]
    codes = lines[L_CODE]
    tokens = lines[L_TOKENS].view(np.float64)
    record_floats = records.view(np.float64)
    mask = np.uint64(len(slots) - 1)
    for i in range(start, count):
        if i + 2 * PREFETCH_AHEAD < count:
            ahead = np.intp(doc_hashes[i + 2 * PREFETCH_AHEAD] & mask)
            prefetch(slots, ahead)  # type: ignore[call-arg]
        if i + PREFETCH_AHEAD < count:  # its slot asked for before: its record now
            value = slots[doc_hashes[i + PREFETCH_AHEAD] & mask]
            prefetch(records, np.intp(value & _LOW) * RECORD_WORDS - RECORD_WORDS)  # type: ignore[call-arg]
        doc_rows[i] = lookup(
            buf, doc_starts[i], doc_ends[i], doc_hashes[i], slots, records, ids, offsets
        )
    for i in range(start, count):  # (in the loop above: 60 ns a lookup, measured)
        row = doc_rows[i]
        inside = row >= 0
        at = row if inside else 0  # the corpus has a record 0 (records: one at least)
        codes[i] = records[at, R_CODE] if inside else 0
        tokens[i] = record_floats[at, R_TOKENS] if inside else np.nan


@compiled
def tally_block(
    buf: np.ndarray,
    n: int,
    shape: tuple[int, int, int, bool],
    final: bool,
    lines: np.ndarray,
    ks: np.ndarray,
    corpus: tuple[np.ndarray, ...],
    tally: tuple[np.ndarray, ...],
) -> tuple[int, int, np.ndarray]:
    """Tally the queries of ``buf[:n]`` (whole lines from a query's first) at the cutoffs
    ``ks``. Unless ``final``, the last query may go on past ``n``: it is left for the next
    call.

    ``shape``: (the lines' format, TREC's separator byte, the order, whether a long decimal
    is read by strtod). ``lines``: the calling thread's ``LINE_FIELDS`` x capacity scratch
    (``log_fast._BATCH_LINES``): the block's lines go through it a batch at a time, a query
    not tallied yet moved to its front (a query longer than the scratch grows it, up to
    ``MAX_QUERY_LINES``).
    ``corpus``: (its ids' bytes, their offsets, their table's slots and records
    (``table.corpus_table``)).
    ``tally``: the calling thread's accumulators, added to: (per k the histogram of distinct
    clusters, per k the queries with fewer results, per rank the clustered and the known
    results and their tokens, the ``Q_*`` counters, a mark per corpus row and per cluster).

    Returns (DONE or REFUSED, the bytes consumed (where the query left for the next call
    begins), the hash of each query tallied, in the file's order). REFUSED too for a query
    of more than ``MAX_QUERY_LINES`` lines (the careful reader holds it)."""
    fmt, sep, order, long_ok = shape
    ids, offsets, slots, records = corpus
    if not ascii_only(buf, n):
        return REFUSED, 0, np.empty(0, np.uint64)  # the line readers take ASCII alone
    query_hashes = np.empty(1024, np.uint64)
    queries = 0
    carried = 0  # lines in the scratch of a query not tallied yet
    pos = 0
    while True:
        status, count, pos = parse_lines(
            buf,
            pos,
            n,
            fmt,
            sep,
            order,
            final,
            long_ok,
            lines,
            carried,
        )
        if status == REFUSED:
            return REFUSED, 0, np.empty(0, np.uint64)
        look_up_lines(buf, carried, count, lines, slots, records, ids, offsets)
        more = count == lines.shape[1] and pos < n
        first, query_hashes, queries = tally_queries(
            buf,
            buf,
            count,
            final and not more,
            order,
            lines,
            ks,
            tally,
            query_hashes,
            queries,
        )
        if not more:
            consumed = lines[L_BEGIN, first] if first < count else pos
            return DONE, consumed, query_hashes[:queries]
        if first == 0:  # one query fills the scratch: a larger one, up to a bound
            if 2 * lines.shape[1] > MAX_QUERY_LINES:
                return REFUSED, 0, np.empty(0, np.uint64)
            larger = np.empty((lines.shape[0], 2 * lines.shape[1]), np.int64)
            larger[:, :count] = lines[:, :count]
            lines = larger
        else:  # the lines of the query not tallied go to the front
            lines[:, : count - first] = lines[:, first:count]
        carried = count - first


@compiled
def tally_queries(
    buf: np.ndarray,
    qids: np.ndarray,
    count: int,
    whole: bool,
    order: int,
    lines: np.ndarray,
    ks: np.ndarray,
    tally: tuple[np.ndarray, ...],
    query_hashes: np.ndarray,
    queries: int,
) -> tuple[int, np.ndarray, int]:
    """Tally the queries of the ``count`` lines (the last one too when ``whole``), their
    hashes added to ``query_hashes`` after its first ``queries``: (the first line not
    tallied, the hashes (a larger array when it grew), how many it holds). The lines'
    documents' bytes are in ``buf``, their queries' in ``qids`` (a text log's block: the
    same bytes).

    A query: its repeated documents dropped (its first line kept), its lines in ranking
    order, its first max(k) results counted. Written out in the loop over the queries, not
    in a function of its own: numba counts the references to the arrays handed to a function
    it writes in (an atomic operation each, taken and given back), and some twenty arrays a
    query cost 250 ns of the 500 a query took (measured); the lines' fields are taken once
    a call for the same reason."""
    histograms, short, clustered, known, token_sums, counters, doc_marks, cluster_marks = tally
    flags = lines[L_FLAGS]
    starts = lines[L_DOC_START]
    ends = lines[L_DOC_END]
    doc_hashes = lines[L_DOC_HASH].view(np.uint64)
    doc_rows = lines[L_ROW]
    scores = lines[L_SCORE].view(np.float64)
    ranks = lines[L_RANK]
    codes = lines[L_CODE]
    tokens = lines[L_TOKENS].view(np.float64)
    qid_starts = lines[L_QID_START]
    qid_ends = lines[L_QID_END]
    keep = np.empty(64, np.int64)
    spare = np.empty(64, np.int64)
    # the query's documents outside the corpus: an open-addressing set, a power of two, half
    # free, its entries marked with the query's number
    seen_hashes = np.zeros(128, np.uint64)
    seen_lines = np.zeros(128, np.int64)
    seen_marks = np.zeros(128, np.int64)
    deepest = ks[-1]
    nks = len(ks)
    epoch = counters[Q_EPOCH]
    tallied = queries
    first = 0
    while first < count:
        last = first + 1
        in_order = True
        while last < count and flags[last] & F_SAME_QUERY:
            in_order = in_order and flags[last] & F_IN_ORDER != 0
            last += 1
        if last == count and not whole:
            break  # the query may go on in the next block
        size = last - first
        if size > len(keep):
            keep = np.empty(2 * size, np.int64)
            spare = np.empty(2 * size, np.int64)
        if 2 * size > len(seen_marks):
            slots = len(seen_marks)
            while slots < 2 * size:
                slots *= 2
            seen_hashes = np.zeros(slots, np.uint64)
            seen_lines = np.zeros(slots, np.int64)
            seen_marks = np.zeros(slots, np.int64)
        epoch += 1
        # its repeated documents dropped, the first line in the file kept
        kept = 0
        mask = np.uint64(len(seen_marks) - 1)
        for i in range(first, last):
            row = doc_rows[i]
            if row >= 0:
                if doc_marks[row] == epoch:
                    continue
                doc_marks[row] = epoch
            else:  # not in the corpus: the set of this query's other such documents
                h = doc_hashes[i]
                at = h & mask
                repeated = False
                while seen_marks[at] == epoch:
                    j = seen_lines[at]
                    if seen_hashes[at] == h and same(
                        buf, starts[j], ends[j], buf, starts[i], ends[i]
                    ):
                        repeated = True
                        break
                    at = (at + np.uint64(1)) & mask
                if repeated:
                    continue
                seen_marks[at] = epoch
                seen_hashes[at] = h
                seen_lines[at] = i
            keep[kept] = i
            kept += 1
        if not in_order:
            _sort(keep, kept, spare, order, buf, starts, ends, scores, ranks)
        # its first results counted, without a branch on what a result is (in a cluster,
        # one new to the query, with its tokens): a log's results come in no pattern a
        # branch would guess
        shown = min(kept, deepest)
        new = 0
        j = 0
        for r in range(shown):
            line = keep[r]
            code = codes[line]
            t = tokens[line]
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
        query_hashes[queries] = first  # its first line: hashed below
        queries += 1
        first = last
    counters[Q_EPOCH] = epoch
    # the queries' ids hashed in a loop of their own: in the loop above, numba counted a
    # reference to ``qids`` for each (two atomic operations a query, on a line of memory
    # the other thread's counts share)
    for q in range(tallied, queries):
        line = np.int64(query_hashes[q])
        query_hashes[q] = id_hash(qids, qid_starts[line], qid_ends[line])
    return first, query_hashes, queries


@compiled
def grown(values: np.ndarray, size: int) -> np.ndarray:
    out = np.empty(size, values.dtype)
    out[: len(values)] = values
    return out
