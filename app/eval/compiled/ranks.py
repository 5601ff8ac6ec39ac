"""The ranks of a run's judged documents, a block of a TREC run at a time, in one pass: each
line taken apart where it lies (``lines``), each query's repeated documents dropped (its first
line in the file kept), its query and its documents looked up among the golden set's, and
each judged document's rank counted from its query's lines, as ``app.eval.ranking`` has it.

Built ahead of time into a module of its own (``app.eval.compiled.aot``): ``evaluate`` reads
a run in a fraction of a second, where loading numba would take most of one. Nothing is
allocated a line.
"""

from __future__ import annotations

import numpy as np

from app.eval.compiled import compiled, inlined
from app.eval.compiled.lines import (
    DONE,
    F_IN_ORDER,
    F_SAME_QUERY,
    FILE,
    L_BEGIN,
    L_DOC_END,
    L_DOC_HASH,
    L_DOC_START,
    L_FLAGS,
    L_QID_END,
    L_QID_START,
    L_RANK,
    L_SCORE,
    REFUSED,
    TREC,
    TREC_EVAL,
    ascii_only,
    parse_lines,
)
from app.eval.compiled.scan import greater, id_hash, same
from app.eval.compiled.tally import MAX_QUERY_LINES, _sort, grown

#: A query's row of the answer (``rank_block``): its golden query's number (-1: none), its
#: lines, its repeated documents dropped, and where its id lies in the names (a query that
#: is not the golden set's: the caller reports its id; -1 otherwise).
P_QUERY = 0
P_LINES = 1
P_DROPPED = 2
P_NAME_START = 3
P_NAME_END = 4
P_FIELDS = 5
#: A judged document's row: its judgment's number and its rank.
T_JUDGMENT = 0
T_RANK = 1
T_FIELDS = 2
#: At most this many judgments of a query are looked through one by one (in one cache line
#: or two), more in the table of them all.
_FEW = 8
#: A query with more judged documents than this found is sorted, not counted over.
_COUNTED = 16
_MIX = np.uint64(0x9E3779B97F4A7C15)


@compiled
def golden_tables(
    qids: np.ndarray,
    q_offsets: np.ndarray,
    docs: np.ndarray,
    d_offsets: np.ndarray,
    j_query: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The golden set's queries (``qids[q_offsets[q]:q_offsets[q + 1]]``, distinct) and
    judgments (document ``docs[d_offsets[j]:d_offsets[j + 1]]`` of query ``j_query[j]``,
    ascending, one a pair) as the pass looks them up: (the queries' slots, each judgment's
    document hash, the first judgment of each query (and one past the last), the judgments'
    slots). A slot (a power of two of them, at least twice the entries) holds a number + 1
    (0: empty); a judgment's slot is found from its document's hash and its query."""
    queries = len(q_offsets) - 1
    size = 16
    while size < 2 * queries:
        size *= 2
    q_slots = np.zeros(size, np.int64)
    mask = np.uint64(size - 1)
    for q in range(queries):
        slot = id_hash(qids, q_offsets[q], q_offsets[q + 1]) & mask
        while q_slots[slot] != 0:
            slot = (slot + np.uint64(1)) & mask
        q_slots[slot] = q + 1
    judgments = len(d_offsets) - 1
    j_hashes = np.zeros(judgments, np.uint64)
    j_first = np.zeros(queries + 1, np.int64)
    size = 16
    while size < 2 * judgments:
        size *= 2
    j_slots = np.zeros(size, np.int64)
    mask = np.uint64(size - 1)
    for j in range(judgments):
        h = id_hash(docs, d_offsets[j], d_offsets[j + 1])
        j_hashes[j] = h
        j_first[j_query[j] + 1] += 1
        slot = (h ^ (np.uint64(j_query[j] + 1) * _MIX)) & mask
        while j_slots[slot] != 0:
            slot = (slot + np.uint64(1)) & mask
        j_slots[slot] = j + 1
    for q in range(queries):
        j_first[q + 1] += j_first[q]
    return q_slots, j_hashes, j_first, j_slots


@inlined
def _golden_query(
    buf: np.ndarray,
    start: int,
    end: int,
    qids: np.ndarray,
    q_offsets: np.ndarray,
    q_slots: np.ndarray,
) -> int:
    """The number of the golden query ``buf[start:end]``, or -1."""
    mask = np.uint64(len(q_slots) - 1)
    slot = id_hash(buf, start, end) & mask
    while q_slots[slot] != 0:
        q = q_slots[slot] - 1
        if same(qids, q_offsets[q], q_offsets[q + 1], buf, start, end):
            return int(q)
        slot = (slot + np.uint64(1)) & mask
    return -1


@compiled
def rank_block(
    buf: np.ndarray,
    n: int,
    sep: int,
    order: int,
    final: bool,
    long_ok: bool,
    lines: np.ndarray,
    qids: np.ndarray,
    q_offsets: np.ndarray,
    q_slots: np.ndarray,
    docs: np.ndarray,
    d_offsets: np.ndarray,
    j_query: np.ndarray,
    j_hashes: np.ndarray,
    j_first: np.ndarray,
    j_slots: np.ndarray,
    queries: np.ndarray,
    nq: int,
    targets: np.ndarray,
    nt: int,
    names: np.ndarray,
    nn: int,
) -> tuple[int, int, np.ndarray, int, np.ndarray, int, np.ndarray, int]:
    """Rank the queries of the TREC lines ``buf[:n]`` (whole lines from a query's first;
    unless ``final``, the last query may go on past ``n`` and is left for the next call).

    ``lines``: a ``LINE_FIELDS`` x capacity scratch, the block's lines taken apart a batch at
    a time (a query longer than it grows it, up to ``tally.MAX_QUERY_LINES``). The golden
    set: ``golden_tables``' arrays. The answer is added to ``queries`` (``P_*`` rows, ``nq``
    of them so far), ``targets`` (``T_*`` rows) and ``names`` (the ids of the queries that
    are not the golden set's, each followed by a line feed), each grown when full.

    Returns (DONE or REFUSED, the bytes consumed (where the query left for the next call
    begins), and the three with how many rows or bytes each holds). REFUSED: a line the
    careful reader may read otherwise, or a query of more than ``MAX_QUERY_LINES`` lines."""
    if not ascii_only(buf, n):
        return REFUSED, 0, queries, nq, targets, nt, names, nn
    carried = 0
    pos = 0
    while True:
        status, count, pos = parse_lines(
            buf, pos, n, TREC, sep, order, final, long_ok, lines, carried
        )
        if status == REFUSED:
            return REFUSED, 0, queries, nq, targets, nt, names, nn
        more = count == lines.shape[1] and pos < n
        first, queries, nq, targets, nt, names, nn = rank_queries(
            buf,
            count,
            final and not more,
            order,
            lines,
            qids,
            q_offsets,
            q_slots,
            docs,
            d_offsets,
            j_query,
            j_hashes,
            j_first,
            j_slots,
            queries,
            nq,
            targets,
            nt,
            names,
            nn,
        )
        if not more:
            consumed = lines[L_BEGIN, first] if first < count else pos
            return DONE, consumed, queries, nq, targets, nt, names, nn
        if first == 0:  # one query fills the scratch: a larger one, up to a bound
            if 2 * lines.shape[1] > MAX_QUERY_LINES:
                return REFUSED, 0, queries, nq, targets, nt, names, nn
            larger = np.empty((lines.shape[0], 2 * lines.shape[1]), np.int64)
            larger[:, :count] = lines[:, :count]
            lines = larger
        else:  # the lines of the query not ranked yet go to the front
            lines[:, : count - first] = lines[:, first:count]
        carried = count - first


@compiled
def rank_queries(
    buf: np.ndarray,
    count: int,
    whole: bool,
    order: int,
    lines: np.ndarray,
    qids: np.ndarray,
    q_offsets: np.ndarray,
    q_slots: np.ndarray,
    docs: np.ndarray,
    d_offsets: np.ndarray,
    j_query: np.ndarray,
    j_hashes: np.ndarray,
    j_first: np.ndarray,
    j_slots: np.ndarray,
    queries: np.ndarray,
    nq: int,
    targets: np.ndarray,
    nt: int,
    names: np.ndarray,
    nn: int,
) -> tuple[int, np.ndarray, int, np.ndarray, int, np.ndarray, int]:
    """Rank the queries of the ``count`` lines taken apart (the last one too when
    ``whole``): (the first line not ranked, and ``rank_block``'s three answers).

    A query: its repeated documents dropped (the first line in the file kept); when it is a
    golden query, each judged document among the rest ranked: one plus the lines of the
    query before it (``tally._before``): its place, when the file has the query's lines in
    ranking order already (as runs are written), else counted over them, or, for more than
    ``_COUNTED`` judged documents, read from the query sorted. Written out in the loop, as
    ``tally.tally_queries`` is, for the same reason."""
    flags = lines[L_FLAGS]
    starts = lines[L_DOC_START]
    ends = lines[L_DOC_END]
    doc_hashes = lines[L_DOC_HASH].view(np.uint64)
    scores = lines[L_SCORE].view(np.float64)
    ranks = lines[L_RANK]
    qid_starts = lines[L_QID_START]
    qid_ends = lines[L_QID_END]
    keep = np.empty(64, np.int64)
    spare = np.empty(64, np.int64)
    place = np.empty(64, np.int64)
    found_lines = np.empty(64, np.int64)
    found_judgments = np.empty(64, np.int64)
    # the query's documents: an open-addressing set, a power of two, half free, its entries
    # marked with the query's number
    seen_hashes = np.zeros(128, np.uint64)
    seen_lines = np.zeros(128, np.int64)
    seen_marks = np.zeros(128, np.int64)
    j_mask = np.uint64(len(j_slots) - 1)
    epoch = 0
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
            place = np.empty(2 * size, np.int64)
        if 2 * size > len(seen_marks):
            slots = len(seen_marks)
            while slots < 2 * size:
                slots *= 2
            seen_hashes = np.zeros(slots, np.uint64)
            seen_lines = np.zeros(slots, np.int64)
            seen_marks = np.zeros(slots, np.int64)
        epoch += 1
        q = _golden_query(buf, qid_starts[first], qid_ends[first], qids, q_offsets, q_slots)
        a = j_first[q] if q >= 0 else 0
        b = j_first[q + 1] if q >= 0 else 0
        # its repeated documents dropped, the first line in the file kept; the judged
        # documents among the rest found
        kept = 0
        found = 0
        mask = np.uint64(len(seen_marks) - 1)
        for i in range(first, last):
            h = doc_hashes[i]
            at = h & mask
            repeated = False
            while seen_marks[at] == epoch:
                k = seen_lines[at]
                if seen_hashes[at] == h and same(buf, starts[k], ends[k], buf, starts[i], ends[i]):
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
            if a == b:
                continue
            judgment = -1
            if b - a <= _FEW:
                for j in range(a, b):
                    if j_hashes[j] == h and same(
                        docs, d_offsets[j], d_offsets[j + 1], buf, starts[i], ends[i]
                    ):
                        judgment = j
                        break
            else:
                slot = (h ^ (np.uint64(q + 1) * _MIX)) & j_mask
                while j_slots[slot] != 0:
                    j = j_slots[slot] - 1
                    if (
                        j_query[j] == q
                        and j_hashes[j] == h
                        and same(docs, d_offsets[j], d_offsets[j + 1], buf, starts[i], ends[i])
                    ):
                        judgment = j
                        break
                    slot = (slot + np.uint64(1)) & j_mask
            if judgment >= 0:
                if found == len(found_lines):
                    found_lines = grown(found_lines, 2 * found)
                    found_judgments = grown(found_judgments, 2 * found)
                found_lines[found] = kept - 1  # its place among the kept lines
                found_judgments[found] = judgment
                found += 1
        if nt + found > len(targets):
            larger = np.empty((2 * (nt + found), T_FIELDS), np.int64)
            larger[:nt] = targets[:nt]
            targets = larger
        if found and not in_order and order != FILE:
            if found > _COUNTED:
                for r in range(kept):
                    spare[r] = keep[r]
                _sort(spare, kept, place, order, buf, starts, ends, scores, ranks)
                # the place of each kept line (by its number in the query) in ranking order
                for r in range(kept):
                    place[spare[r] - first] = r
                for f in range(found):
                    found_lines[f] = place[keep[found_lines[f]] - first]
            else:
                # the lines ahead of each, compared here rather than by ``tally._before``:
                # numba counts the references to the arrays handed to a function it writes
                # in, and a call a line and judged document cost more than the rest of the
                # pass (0.5 s of 7M lines, measured)
                for f in range(found):
                    line = keep[found_lines[f]]
                    ahead = 0
                    if order == TREC_EVAL:
                        own = scores[line]
                        for r in range(kept):
                            other = keep[r]
                            score = scores[other]
                            ahead += score > own
                            if score == own and other != line:
                                ahead += greater(
                                    buf, starts[other], ends[other], starts[line], ends[line]
                                )
                    else:
                        own_rank = ranks[line]
                        for r in range(kept):
                            other = keep[r]
                            rank = ranks[other]
                            ahead += rank < own_rank or (rank == own_rank and other < line)
                    found_lines[f] = ahead
        for f in range(found):
            targets[nt, T_JUDGMENT] = found_judgments[f]
            targets[nt, T_RANK] = found_lines[f] + 1
            nt += 1
        if nq == len(queries):
            larger = np.empty((2 * nq, P_FIELDS), np.int64)
            larger[:nq] = queries[:nq]
            queries = larger
        queries[nq, P_QUERY] = q
        queries[nq, P_LINES] = size
        queries[nq, P_DROPPED] = size - kept
        queries[nq, P_NAME_START] = -1
        queries[nq, P_NAME_END] = -1
        if q < 0:
            length = qid_ends[first] - qid_starts[first]
            if nn + length + 1 > len(names):
                names = grown(names, 2 * (nn + length + 1))
            names[nn : nn + length] = buf[qid_starts[first] : qid_ends[first]]
            queries[nq, P_NAME_START] = nn
            queries[nq, P_NAME_END] = nn + length
            nn += length
            names[nn] = 10
            nn += 1
        nq += 1
        first = last
    return first, queries, nq, targets, nt, names, nn
