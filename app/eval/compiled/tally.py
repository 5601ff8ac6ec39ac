"""The cluster tally of a block of a log in one compiled pass: each line taken apart where
it lies (``lines``), its document looked up in the corpus's table (``table``), each query's
repeated documents dropped (its first line in the file kept), its lines in ranking order
(without a sort when written in it, as a log is), its first max(k) results added to the
tally: per k the histogram of distinct clusters, per rank the clustered and known results
and their tokens. Nothing is allocated a line."""

from __future__ import annotations

import numpy as np

from app.eval.compiled import compiled
from app.eval.compiled.lines import BAD, BLANK, JSONL, PAIRS, PARTIAL, line
from app.eval.compiled.scan import greater, id_hash, integer, number, same
from app.eval.compiled.table import lookup

#: What a block's pass ends with.
DONE = 0
#: A line this pass does not take: the caller reads the file another way.
REFUSED = 1

#: The orders.
TREC_EVAL = 0
RANK = 1
FILE = 2

#: counters (int64), by index
Q_QUERIES = 0  # queries tallied
Q_LINES = 1  # lines read (blank lines not counted)
Q_DROPPED = 2  # repeated documents dropped
Q_SHOWN = 3  # results at the largest k: sum over queries of min(max k, results)
Q_EPOCH = 4  # the number of the query being tallied (marks the per-query sets)
Q_COUNTERS = 5


@compiled
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


#: Where a block's lines are taken apart (``LINE_FIELDS`` arrays of one capacity): the
#: line's start, its qid's start and end, its document's start and end (int64), the
#: document's hash (uint64 bits), its corpus row (-1: none), the score (double bits), the
#: rank. Allocated once a thread and reused block after block.
L_BEGIN = 0
L_QID_START = 1
L_QID_END = 2
L_DOC_START = 3
L_DOC_END = 4
L_DOC_HASH = 5
L_ROW = 6
L_SCORE = 7
L_RANK = 8
LINE_FIELDS = 9


@compiled
def _parse_lines(
    buf: np.ndarray,
    n: int,
    fmt: int,
    sep: int,
    order: int,
    final: bool,
    long_ok: bool,
    lines: np.ndarray,
    given_scores: np.ndarray,
    given_ranks: np.ndarray,
) -> tuple[int, int, int]:
    """(DONE or REFUSED, lines taken apart into ``lines`` (at most its capacity), where the
    next line begins)."""
    cap = lines.shape[1]
    scores = lines[L_SCORE].view(np.float64)
    count = 0
    pos = 0
    while pos < n and count < cap:
        what, nxt, qs, qe, ds, de, rs, re, ss, se = line(buf, pos, n, fmt, sep, final)
        if what == PARTIAL:
            break
        if what == BAD:
            return REFUSED, 0, 0
        if what == BLANK:
            pos = nxt
            continue
        score = 0.0
        rank = 0
        if fmt == PAIRS:
            score = given_scores[count] + 0.0  # -0.0 ties with 0.0
            rank = given_ranks[count]
        elif order == TREC_EVAL:
            taken, score = number(buf, ss, se, fmt == JSONL, long_ok)
            if not taken:
                return REFUSED, 0, 0
        elif order == RANK:
            if rs < 0:
                return REFUSED, 0, 0
            taken, rank = integer(buf, rs, re)
            if not taken:
                return REFUSED, 0, 0
        lines[L_BEGIN, count] = pos
        lines[L_QID_START, count] = qs
        lines[L_QID_END, count] = qe
        lines[L_DOC_START, count] = ds
        lines[L_DOC_END, count] = de
        lines[L_DOC_HASH, count] = np.int64(id_hash(buf, ds, de))
        scores[count] = score
        lines[L_RANK, count] = rank
        count += 1
        pos = nxt
    return DONE, count, pos


@compiled
def _look_up_lines(
    buf: np.ndarray,
    count: int,
    lines: np.ndarray,
    ids: np.ndarray,
    offsets: np.ndarray,
    hashes: np.ndarray,
    rows: np.ndarray,
) -> None:
    """Each line's corpus row, in a loop of its own: the lookups of many lines are under way
    at once (in a large corpus each is a cache miss)."""
    doc_hashes = lines[L_DOC_HASH].view(np.uint64)
    for i in range(count):
        lines[L_ROW, i] = lookup(
            buf,
            lines[L_DOC_START, i],
            lines[L_DOC_END, i],
            doc_hashes[i],
            ids,
            offsets,
            hashes,
            rows,
        )


@compiled
def tally_block(
    buf: np.ndarray,
    n: int,
    shape: tuple[int, int, int, bool],
    final: bool,
    lines: np.ndarray,
    given: tuple[np.ndarray, np.ndarray],
    ks: np.ndarray,
    corpus: tuple[np.ndarray, ...],
    tally: tuple[np.ndarray, ...],
) -> tuple[int, int, int, np.ndarray]:
    """Tally the queries of ``buf[:n]`` (whole lines from a query's first) at the cutoffs
    ``ks``. Unless ``final``, the last query may go on past ``n``: it is left for the next
    call, as are the lines past the scratch's capacity.

    ``shape``: (the lines' format, TREC's separator byte, the order, whether a long decimal
    is read by strtod). ``lines``: the calling thread's ``LINE_FIELDS`` x capacity scratch.
    ``given``: (scores, ranks) of the lines in ``PAIRS``, by their number (empty otherwise).
    ``corpus``: (its ids' bytes, their offsets, their table's hashes and rows
    (``corpus_table``), per row the cluster's number (0: none) and tokens (NaN: unknown)).
    ``tally``: the calling thread's accumulators, added to: (per k the histogram of distinct
    clusters, per k the queries with fewer results, per rank the clustered and the known
    results and their tokens, the ``Q_*`` counters, a mark per corpus row and per cluster).

    Returns (DONE or REFUSED, the bytes consumed (where the query left for the next call
    begins; 0 with a query longer than the capacity), the lines consumed, the hash of each
    query tallied, in the file's order)."""
    fmt, sep, order, long_ok = shape
    given_scores, given_ranks = given
    ids, offsets, hashes, rows, codes, tokens = corpus
    histograms, short, clustered, known, token_sums, counters, doc_marks, cluster_marks = tally
    status, count, pos = _parse_lines(
        buf, n, fmt, sep, order, final, long_ok, lines, given_scores, given_ranks
    )
    if status == REFUSED:
        return REFUSED, 0, 0, np.empty(0, np.uint64)
    _look_up_lines(buf, count, lines, ids, offsets, hashes, rows)
    whole = final and pos >= n
    first, query_hashes = _tally_queries(
        buf,
        count,
        whole,
        order,
        lines,
        ks,
        codes,
        tokens,
        histograms,
        short,
        clustered,
        known,
        token_sums,
        counters,
        doc_marks,
        cluster_marks,
    )
    consumed = lines[L_BEGIN, first] if first < count else pos
    return DONE, consumed, first, query_hashes


@compiled
def _tally_queries(
    buf: np.ndarray,
    count: int,
    whole: bool,
    order: int,
    lines: np.ndarray,
    ks: np.ndarray,
    codes: np.ndarray,
    tokens: np.ndarray,
    histograms: np.ndarray,
    short: np.ndarray,
    clustered: np.ndarray,
    known: np.ndarray,
    token_sums: np.ndarray,
    counters: np.ndarray,
    doc_marks: np.ndarray,
    cluster_marks: np.ndarray,
) -> tuple[int, np.ndarray]:
    """Tally the queries of the ``count`` lines (the last one too when ``whole``): (the
    first line not tallied, the queries' hashes)."""
    scores = lines[L_SCORE].view(np.float64)
    ranks = lines[L_RANK]
    starts = lines[L_DOC_START]
    ends = lines[L_DOC_END]
    keep = np.empty(64, np.int64)
    spare = np.empty(64, np.int64)
    seen_hashes = np.zeros(128, np.uint64)
    seen_lines = np.zeros(128, np.int64)
    seen_marks = np.zeros(128, np.int64)
    query_hashes = np.empty(max(count // 4, 16), np.uint64)
    queries = 0
    deepest = ks[-1]
    first = 0
    while first < count:
        qs = lines[L_QID_START, first]
        qe = lines[L_QID_END, first]
        last = first + 1
        in_order = True
        while last < count and same(
            buf, qs, qe, buf, lines[L_QID_START, last], lines[L_QID_END, last]
        ):
            if in_order:
                p = last - 1
                if order == TREC_EVAL:
                    in_order = scores[last] < scores[p] or (
                        scores[last] == scores[p]
                        and greater(buf, starts[p], ends[p], starts[last], ends[last])
                    )
                elif order == RANK:
                    in_order = ranks[last] >= ranks[p]
            last += 1
        if last == count and not whole:
            break  # the query may go on in the next block
        size = last - first
        if size > len(keep):
            keep = np.empty(2 * size, np.int64)
            spare = np.empty(2 * size, np.int64)
            seen_hashes = np.zeros(4 * size, np.uint64)
            seen_lines = np.zeros(4 * size, np.int64)
            seen_marks = np.zeros(4 * size, np.int64)
        _tally_query(
            first,
            last,
            in_order,
            order,
            buf,
            lines,
            keep,
            spare,
            seen_hashes,
            seen_lines,
            seen_marks,
            ks,
            deepest,
            codes,
            tokens,
            histograms,
            short,
            clustered,
            known,
            token_sums,
            counters,
            doc_marks,
            cluster_marks,
        )
        if queries == len(query_hashes):
            query_hashes = _grown(query_hashes, 2 * queries)
        query_hashes[queries] = id_hash(buf, qs, qe)
        queries += 1
        first = last
    return first, query_hashes[:queries]


@compiled
def _grown(values: np.ndarray, size: int) -> np.ndarray:
    out = np.empty(size, values.dtype)
    out[: len(values)] = values
    return out


@compiled
def _tally_query(
    first: int,
    last: int,
    in_order: bool,
    order: int,
    buf: np.ndarray,
    lines: np.ndarray,
    keep: np.ndarray,
    spare: np.ndarray,
    seen_hashes: np.ndarray,
    seen_lines: np.ndarray,
    seen_marks: np.ndarray,
    ks: np.ndarray,
    deepest: int,
    codes: np.ndarray,
    tokens: np.ndarray,
    histograms: np.ndarray,
    short: np.ndarray,
    clustered: np.ndarray,
    known: np.ndarray,
    token_sums: np.ndarray,
    counters: np.ndarray,
    doc_marks: np.ndarray,
    cluster_marks: np.ndarray,
) -> None:
    """Tally one query, lines ``first`` to ``last`` (see ``tally_block``): its repeated
    documents dropped (the first line in the file kept), its lines in ranking order, its
    first ``deepest`` results counted."""
    starts = lines[L_DOC_START]
    ends = lines[L_DOC_END]
    doc_hashes = lines[L_DOC_HASH].view(np.uint64)
    doc_rows = lines[L_ROW]
    scores = lines[L_SCORE].view(np.float64)
    ranks = lines[L_RANK]
    epoch = counters[Q_EPOCH] + 1
    counters[Q_EPOCH] = epoch
    kept = 0
    mask = np.uint64(len(seen_marks) - 1)
    for i in range(first, last):
        row = doc_rows[i]
        if row >= 0:
            if doc_marks[row] == epoch:
                continue
            doc_marks[row] = epoch
        else:  # not in the corpus: a set of this query's other such documents
            h = doc_hashes[i]
            at = h & mask
            repeated = False
            while seen_marks[at] == epoch:
                j = seen_lines[at]
                if seen_hashes[at] == h and same(buf, starts[j], ends[j], buf, starts[i], ends[i]):
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
    shown = min(kept, deepest)
    new = 0
    j = 0
    nks = len(ks)
    for r in range(shown):
        row = doc_rows[keep[r]]
        code = 0
        if row >= 0:
            code = codes[row]
            t = tokens[row]
            if t == t:  # not NaN
                known[r] += 1
                token_sums[r] += t
        if code > 0:
            clustered[r] += 1
            if cluster_marks[code] != epoch:
                cluster_marks[code] = epoch
                new += 1
        else:
            new += 1
        while j < nks and ks[j] == r + 1:
            histograms[j, new] += 1
            j += 1
    while j < nks:
        histograms[j, new] += 1
        short[j] += 1
        j += 1
    counters[Q_QUERIES] += 1
    counters[Q_LINES] += last - first
    counters[Q_DROPPED] += (last - first) - kept
    counters[Q_SHOWN] += shown
