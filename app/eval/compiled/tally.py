"""The cluster tally of a block of a log in one compiled pass: each line taken apart where
it lies (``lines``), its document looked up in the corpus's table (``table``), each query's
repeated documents dropped (its first line in the file kept), its lines in ranking order
(without a sort when written in it, as a log is), its first max(k) results added to the
tally: per k the histogram of distinct clusters, per rank the clustered and known results
and their tokens. Nothing is allocated a line."""

from __future__ import annotations

import numpy as np

from app.eval.compiled import compiled, inlined
from app.eval.compiled.lines import BAD, BLANK, JSONL, PARTIAL, TREC, line
from app.eval.compiled.scan import (
    field_end,
    greater,
    id_hash,
    integer,
    number,
    plain_decimal,
    same,
)
from app.eval.compiled.table import R_CODE, R_TOKENS, lookup

#: The most lines of one query the pass holds (some 200 MB of scratch).
MAX_QUERY_LINES = 1 << 20

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
L_FLAGS = 9  # F_* bits
LINE_FIELDS = 10
#: The line goes on the query of the line before.
F_SAME_QUERY = 1
#: ... and comes after it in ranking order (``_before``), or no order is asked for.
F_IN_ORDER = 2


@inlined
def _usual_trec_line(
    buf: np.ndarray, pos: int, n: int, sep: int, order: int
) -> tuple[int, int, int, int, float, int]:
    """(where the next line begins, the qid's end, the document's start and end, the score,
    the rank) of the TREC line at ``pos`` as a log writes it, taken apart in one pass: six
    fields of printable ASCII, single ``sep`` between them, LF at the end, a score of digits
    and maybe a point (at most 15 digits: one division, exact), with ``order`` rank a rank
    of digits (the block holds no byte past ASCII: ``_ascii``). The next line's start is -1
    for any other line (``line`` reads it)."""
    failed = (-1, 0, 0, 0, 0.0, 0)
    qid_end = field_end(buf, pos, n)
    if qid_end >= n or buf[qid_end] != sep or qid_end == pos:
        return failed
    i = field_end(buf, qid_end + 1, n)  # Q0
    if i >= n or buf[i] != sep or i == qid_end + 1:
        return failed
    doc_start = i + 1
    doc_end = field_end(buf, doc_start, n)
    if doc_end >= n or buf[doc_end] != sep or doc_end == doc_start:
        return failed
    i = field_end(buf, doc_end + 1, n)  # the rank
    if i >= n or buf[i] != sep or i == doc_end + 1:
        return failed
    rank = 0
    if order == RANK:
        taken, rank = integer(buf, doc_end + 1, i)
        if not taken:
            return failed
    i, taken, score = plain_decimal(buf, i + 1, n)
    if not taken or i >= n or buf[i] != sep:
        return failed
    end = field_end(buf, i + 1, n)  # the tag
    if end == i + 1 or end >= n or buf[end] != 10:
        return failed
    return end + 1, qid_end, doc_start, doc_end, score, rank


@compiled
def _ascii(buf: np.ndarray, n: int) -> bool:
    """True when no byte of ``buf[:n]`` is past printable ASCII (above 126): one pass the
    compiler makes wide (many bytes an instruction), so that the line readers look at each
    byte once, for its place alone."""
    top = 0
    for i in range(n):
        top = max(top, buf[i])
    return top <= 126


@compiled
def _parse_lines(
    buf: np.ndarray,
    pos: int,
    n: int,
    fmt: int,
    sep: int,
    order: int,
    final: bool,
    long_ok: bool,
    lines: np.ndarray,
    count: int,
) -> tuple[int, int, int]:
    """Take apart the lines from byte ``pos`` into ``lines`` from its column ``count`` on,
    until it is full: (DONE or REFUSED, the lines it then holds, where the next line
    begins). A TREC line as a log writes it is taken in one pass
    (``_usual_trec_line``), any other by ``line`` and the number readers. Each line's flags
    say whether it goes on the query of the line before and comes after it in ranking order
    (decided here, while both lines are in cache)."""
    cap = lines.shape[1]
    begins = lines[L_BEGIN]
    qid_starts = lines[L_QID_START]
    qid_ends = lines[L_QID_END]
    doc_starts = lines[L_DOC_START]
    doc_ends = lines[L_DOC_END]
    doc_hashes = lines[L_DOC_HASH]
    scores = lines[L_SCORE].view(np.float64)
    ranks = lines[L_RANK]
    flags = lines[L_FLAGS]
    while pos < n and count < cap:
        nxt = -1
        qs = pos
        if fmt == TREC:
            nxt, qe, ds, de, score, rank = _usual_trec_line(buf, pos, n, sep, order)
        if nxt < 0:
            what, nxt, qs, qe, ds, de, rs, re, ss, se = line(buf, pos, n, fmt, sep, final)
            if what == PARTIAL:
                break
            if what == BAD:
                return REFUSED, 0, 0
            if what == BLANK:
                pos = nxt
                continue
            rank = 0
            # the score is read in every order: the careful readers refuse one that is not
            # a finite number whatever orders the results
            taken, score = number(buf, ss, se, fmt == JSONL, long_ok)
            if not taken:
                return REFUSED, 0, 0
            if order == RANK:
                if rs < 0:
                    return REFUSED, 0, 0
                taken, rank = integer(buf, rs, re)
                if not taken:
                    return REFUSED, 0, 0
        begins[count] = pos
        qid_starts[count] = qs
        qid_ends[count] = qe
        doc_starts[count] = ds
        doc_ends[count] = de
        doc_hashes[count] = np.int64(id_hash(buf, ds, de))
        scores[count] = score
        ranks[count] = rank
        flag = 0
        p = count - 1
        if count and same(buf, qid_starts[p], qid_ends[p], buf, qs, qe):
            flag = F_SAME_QUERY
            if order == FILE:
                flag |= F_IN_ORDER
            elif order == TREC_EVAL:
                if scores[p] > score or (
                    scores[p] == score and greater(buf, doc_starts[p], doc_ends[p], ds, de)
                ):
                    flag |= F_IN_ORDER
            elif ranks[p] <= rank:
                flag |= F_IN_ORDER
        flags[count] = flag
        count += 1
        pos = nxt
    return DONE, count, pos


@compiled
def _look_up_lines(
    buf: np.ndarray,
    start: int,
    count: int,
    lines: np.ndarray,
    slots: np.ndarray,
    records: np.ndarray,
    ids: np.ndarray,
    offsets: np.ndarray,
) -> None:
    """Each line's corpus row, in a loop of its own: the lookups of many lines are under way
    at once (in a large corpus each is a cache miss)."""
    doc_hashes = lines[L_DOC_HASH].view(np.uint64)
    doc_starts = lines[L_DOC_START]
    doc_ends = lines[L_DOC_END]
    doc_rows = lines[L_ROW]
    for i in range(start, count):
        doc_rows[i] = lookup(
            buf, doc_starts[i], doc_ends[i], doc_hashes[i], slots, records, ids, offsets
        )


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
    (a block's half holds some 300,000 lines): the block's lines go through it a batch at
    a time, a query not tallied yet moved to its front (a query longer than the scratch
    grows it, up to ``MAX_QUERY_LINES``).
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
    if not _ascii(buf, n):
        return REFUSED, 0, np.empty(0, np.uint64)  # the line readers take ASCII alone
    query_hashes = np.empty(1024, np.uint64)
    queries = 0
    carried = 0  # lines in the scratch of a query not tallied yet
    pos = 0
    while True:
        status, count, pos = _parse_lines(
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
        _look_up_lines(buf, carried, count, lines, slots, records, ids, offsets)
        more = count == lines.shape[1] and pos < n
        first, query_hashes, queries = _tally_queries(
            buf,
            count,
            final and not more,
            order,
            lines,
            ks,
            records,
            tally,
            query_hashes,
            queries,
            False,
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
def _tally_queries(
    buf: np.ndarray,
    count: int,
    whole: bool,
    order: int,
    lines: np.ndarray,
    ks: np.ndarray,
    records: np.ndarray,
    tally: tuple[np.ndarray, ...],
    query_hashes: np.ndarray,
    queries: int,
    hashed: bool,
) -> tuple[int, np.ndarray, int]:
    """Tally the queries of the ``count`` lines (the last one too when ``whole``), their
    hashes added to ``query_hashes`` after its first ``queries``: (the first line not
    tallied, the hashes (a larger array when it grew), how many it holds). ``hashed``: the
    lines' documents not in the corpus are told apart by their hashes alone (the lines
    have no bytes in ``buf``; their caller checked no two of a query share one)."""
    histograms, short, clustered, known, token_sums, counters, doc_marks, cluster_marks = tally
    flags = lines[L_FLAGS]
    record_floats = records.view(np.float64)
    keep = np.empty(64, np.int64)
    spare = np.empty(64, np.int64)
    seen_hashes = np.zeros(128, np.uint64)
    seen_lines = np.zeros(128, np.int64)
    seen_marks = np.zeros(128, np.int64)
    deepest = ks[-1]
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
        if 2 * size > len(seen_marks):  # an open-addressing set: a power of two, half free
            slots = len(seen_marks)
            while slots < 2 * size:
                slots *= 2
            seen_hashes = np.zeros(slots, np.uint64)
            seen_lines = np.zeros(slots, np.int64)
            seen_marks = np.zeros(slots, np.int64)
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
            records,
            record_floats,
            histograms,
            short,
            clustered,
            known,
            token_sums,
            counters,
            doc_marks,
            cluster_marks,
            hashed,
        )
        if queries == len(query_hashes):
            query_hashes = _grown(query_hashes, 2 * queries)
        if not hashed:  # (the columns' queries are checked by the caller)
            query_hashes[queries] = id_hash(buf, lines[L_QID_START, first], lines[L_QID_END, first])
        queries += 1
        first = last
    return first, query_hashes, queries


@compiled
def _grown(values: np.ndarray, size: int) -> np.ndarray:
    out = np.empty(size, values.dtype)
    out[: len(values)] = values
    return out


@inlined
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
    records: np.ndarray,
    record_floats: np.ndarray,
    histograms: np.ndarray,
    short: np.ndarray,
    clustered: np.ndarray,
    known: np.ndarray,
    token_sums: np.ndarray,
    counters: np.ndarray,
    doc_marks: np.ndarray,
    cluster_marks: np.ndarray,
    hashed: bool,
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
                if seen_hashes[at] == h and (
                    hashed or same(buf, starts[j], ends[j], buf, starts[i], ends[i])
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
    shown = min(kept, deepest)
    new = 0
    j = 0
    nks = len(ks)
    for r in range(shown):
        row = doc_rows[keep[r]]
        code = 0
        if row >= 0:
            code = records[row, R_CODE]
            t = record_floats[row, R_TOKENS]
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
    _, _, queries = _tally_queries(
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
                    ties = _grown(ties, 2 * found)
                ties[found] = i
                found += 1
            else:
                after[i] = scores[i] < scores[i - 1]
        elif order == RANK:
            after[i] = ranks[i] >= ranks[i - 1]
    return after, ties[:found]
