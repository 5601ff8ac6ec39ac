"""The cluster tally of a Parquet log's rows as polars reads them (``app.eval.log_parquet``).

A column of text comes as Arrow string views, 16 bytes a value: its length, then either the
value itself (12 bytes or fewer) or its first 4 bytes, a data buffer's number and an offset
in it. A column whose values all lie in their views is read there (``inline_views``,
``_span``); another, ``strings`` copies end to end, in one buffer of bytes and their ends.
The rows are then taken apart into a thread's scratch (``tally_rows``) as a text log's lines
are, and tallied by the same pass: the documents found in the corpus by their bytes, the
ranking order decided by the scores (or ranks) and the ids' bytes, nothing by a hash alone."""

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
    TREC_EVAL,
)
from app.eval.compiled.scan import greater, id_hash, put_word, same, word_at, word_of
from app.eval.compiled.tally import MAX_QUERY_LINES, look_up_lines, tally_queries

#: The most bytes a string view holds in itself.
INLINE_VIEW = 12


#: ``strings``' findings about the ids it copied: a byte that is a control, a blank or DEL,
#: and a byte past ASCII (whose character the caller checks: it may be a blank).
BLANK_OR_CONTROL = 1
PAST_ASCII = 2
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_ONES = np.uint64(0x0101010101010101)
_ADD_5F = np.uint64(0x5F5F5F5F5F5F5F5F)
_TOPS = np.uint64(0x8080808080808080)
_LETTERS = np.uint64(0x4141414141414141)


@inlined
def _id_bytes(word: np.uint64, n: int) -> int:
    """What the first ``n`` (1 to 8) bytes of ``word`` hold: BLANK_OR_CONTROL and
    PAST_ASCII, as bits. A byte under 0x80 plus 0x5F has its top bit clear exactly when it
    is 0x20 or less, plus 1 has it set exactly when it is DEL (no carry between bytes)."""
    if n < 8:  # the bytes past the value made letters
        keep = (np.uint64(1) << np.uint64(8 * n)) - np.uint64(1)
        word = (word & keep) | (_LETTERS & ~keep)
    low = word & _LOW7
    found = 0
    if word & _TOPS:
        found |= PAST_ASCII
    if (~(low + _ADD_5F) | (low + _ONES)) & ~word & _TOPS:
        found |= BLANK_OR_CONTROL
    return found


@compiled
def strings(
    views: np.ndarray,
    data: np.ndarray,
    bases: np.ndarray,
    out: np.ndarray,
    ends: np.ndarray,
    row: int,
    at: int,
) -> tuple[int, int]:
    """Copy the values of a string-view array (``views``: its views as bytes, 16 a value)
    into ``out`` from byte ``at`` on, each value's end into ``ends[row + 1 + i]``; ``data``:
    its data buffers one after the other, ``bases`` where each begins there. ``out`` has
    room for the values and 16 bytes more: they are copied a word at a time, the bytes past
    one's end written over by the next. (The byte after the last value, what the values'
    bytes hold: BLANK_OR_CONTROL and PAST_ASCII as bits), or -1 at an empty value (the
    careful reader words it)."""
    words = views.view(np.int32)
    found = 0
    for i in range(len(views) // 16):
        length = words[4 * i]
        if length <= 0:
            return -1, found
        if length <= INLINE_VIEW:  # bytes 4 to 16 of the view, in two words
            first = word_at(views, 16 * i + 4)
            found |= _id_bytes(first, min(length, 8))
            if length > 8:
                second = word_at(views, 16 * i + 8)
                found |= _id_bytes(second >> np.uint64(32), length - 8)
                put_word(out, at + 4, second)  # type: ignore[call-arg]
            put_word(out, at, first)  # type: ignore[call-arg]
        else:
            source = bases[words[4 * i + 2]] + words[4 * i + 3]
            for k in range(0, length, 8):
                word = word_of(data, source + k, source + length)
                found |= _id_bytes(word, min(length - k, 8))
                put_word(out, at + k, word)  # type: ignore[call-arg]
        at += length
        ends[row + 1 + i] = at
    return at, found


@compiled
def inline_views(views: np.ndarray, out: np.ndarray, at: int) -> tuple[int, int]:
    """Whether every value of a string-view array (``views``: its views as bytes, 16 a
    value) lies in its view (``INLINE_VIEW`` bytes or fewer), where the pass then reads it
    (``_span``) without a copy of its bytes: the views are copied into ``out`` from byte
    ``at`` on as they are checked (one pass over them). (1, what the values' bytes hold, as
    ``strings`` says it), (0, 0) at the first that does not (the caller copies their
    bytes: ``strings``), (-1, 0) at an empty value (the careful reader words it)."""
    found = 0
    for i in range(len(views) // 16):
        first = word_at(views, 16 * i)
        second = word_at(views, 16 * i + 8)
        length: int = np.int64(first & _LENGTH)  # type: ignore[assignment]
        if length == 0 or length > INLINE_VIEW:  # (a length is never negative: 31 bits)
            return (-1 if length == 0 else 0), 0
        found |= _id_bytes(first >> np.uint64(32), min(length, 4))
        if length > 4:
            found |= _id_bytes(second, min(length - 4, 8))
        put_word(out, at + 16 * i, first)  # type: ignore[call-arg]
        put_word(out, at + 16 * i + 8, second)
    return 1, found


@inlined
def _span(values: np.ndarray, ends: np.ndarray, row: int) -> tuple[int, int]:
    """Where row ``row``'s value lies in ``values``: between its ends (``strings``' copy),
    or, when ``ends`` is empty, in its own view (``values``: the views as bytes, each value
    in its view: ``inline_views``)."""
    if len(ends) == 0:
        start = 16 * row + 4
        length = np.int64(word_at(values, 16 * row) & _LENGTH)
        return start, start + length  # type: ignore[return-value]
    return ends[row], ends[row + 1]


_LENGTH = np.uint64(0xFFFFFFFF)


@inlined
def _same_query(qids: np.ndarray, ends: np.ndarray, row: int) -> bool:
    """True when row ``row``'s query id is the row before's."""
    a0, a1 = _span(qids, ends, row - 1)
    b0, b1 = _span(qids, ends, row)
    return same(qids, a0, a1, qids, b0, b1)


@compiled
def query_start(qids: np.ndarray, ends: np.ndarray, row: int, count: int) -> int:
    """The first row from ``row`` on (at least 1) that begins a query (its id is not the row
    before's), or ``count``. (``qids`` and ``ends`` as ``_span`` takes them.)"""
    i = max(row, 1)
    while i < count and _same_query(qids, ends, i):
        i += 1
    return i


@compiled
def last_query_start(qids: np.ndarray, ends: np.ndarray, count: int) -> int:
    """The row where the last of ``count`` rows' query begins (0 when it is the only one)."""
    i = count - 1
    while i > 0 and _same_query(qids, ends, i):
        i -= 1
    return max(i, 0)


@inlined
def _rows(
    qids: np.ndarray,
    qid_ends: np.ndarray,
    docs: np.ndarray,
    doc_ends: np.ndarray,
    scores: np.ndarray,
    ranks: np.ndarray,
    row: int,
    last: int,
    order: int,
    lines: np.ndarray,
    count: int,
) -> tuple[int, int]:
    """Take rows from ``row`` into ``lines`` from its column ``count`` on, until it is full
    or ``last`` is reached: (the lines it then holds, the next row). As ``parse_lines``: the
    ids' places, the document's hash, score and rank, and whether the row goes on the query
    of the row before and comes after it in ranking order (the same decision as
    ``parse_lines``', written out in both: a function handed the bytes cost 6 ns a line in
    reference counting, measured)."""
    cap = lines.shape[1]
    begins = lines[L_BEGIN]
    qid_starts = lines[L_QID_START]
    qid_stops = lines[L_QID_END]
    doc_starts = lines[L_DOC_START]
    doc_stops = lines[L_DOC_END]
    doc_hashes = lines[L_DOC_HASH]
    line_scores = lines[L_SCORE].view(np.float64)
    line_ranks = lines[L_RANK]
    flags = lines[L_FLAGS]
    while row < last and count < cap:
        qs, qe = _span(qids, qid_ends, row)
        ds, de = _span(docs, doc_ends, row)
        score = scores[row] + 0.0  # -0.0 ties with 0.0
        rank = ranks[row]
        begins[count] = row
        qid_starts[count] = qs
        qid_stops[count] = qe
        doc_starts[count] = ds
        doc_stops[count] = de
        line_scores[count] = score
        line_ranks[count] = rank
        doc_hashes[count] = np.int64(id_hash(docs, ds, de))
        # (booleans, not a number's bits set in turn: numba's AOT compiler types a number
        # given its first value in the inlined copy as that literal alone)
        together = False
        in_order = False
        p = count - 1
        if count and same(qids, qid_starts[p], qid_stops[p], qids, qs, qe):
            together = True
            if order == FILE:
                in_order = True
            elif order == TREC_EVAL:
                in_order = line_scores[p] > score or (
                    line_scores[p] == score and greater(docs, doc_starts[p], doc_stops[p], ds, de)
                )
            else:
                in_order = line_ranks[p] <= rank
        flags[count] = F_SAME_QUERY * together + F_IN_ORDER * in_order
        count += 1
        row += 1
    return count, row


@compiled
def tally_rows(
    qids: np.ndarray,
    qid_ends: np.ndarray,
    docs: np.ndarray,
    doc_ends: np.ndarray,
    scores: np.ndarray,
    ranks: np.ndarray,
    first: int,
    last: int,
    order: int,
    lines: np.ndarray,
    ks: np.ndarray,
    corpus: tuple[np.ndarray, ...],
    tally: tuple[np.ndarray, ...],
) -> tuple[int, np.ndarray]:
    """Tally the whole queries of rows ``first`` to ``last`` (each id column as ``_span``
    reads it: a row's query id is ``qids[qid_ends[row]:qid_ends[row + 1]]`` when copied by
    ``strings``, in its view when ``qid_ends`` is empty; its document's likewise) at the
    cutoffs ``ks``; ``lines``, ``corpus`` and ``tally`` as ``tally_block``'s. (DONE, the
    hash of each query tallied, in order), or REFUSED for a query of more than
    ``MAX_QUERY_LINES`` rows (the careful reader holds it)."""
    ids, offsets, slots, records = corpus
    query_hashes = np.empty(1024, np.uint64)
    queries = 0
    carried = 0  # lines in the scratch of a query not tallied yet
    row = first
    while True:
        count, row = _rows(
            qids, qid_ends, docs, doc_ends, scores, ranks, row, last, order, lines, carried
        )
        look_up_lines(docs, carried, count, lines, slots, records, ids, offsets)
        more = row < last
        done, query_hashes, queries = tally_queries(
            docs, qids, count, not more, order, lines, ks, tally, query_hashes, queries
        )
        if not more:
            return DONE, query_hashes[:queries]
        if done == 0:  # one query fills the scratch: a larger one, up to a bound
            if 2 * lines.shape[1] > MAX_QUERY_LINES:
                return REFUSED, np.empty(0, np.uint64)
            larger = np.empty((lines.shape[0], 2 * lines.shape[1]), np.int64)
            larger[:, :count] = lines[:, :count]
            lines = larger
        else:  # the lines of the query not tallied go to the front
            lines[:, : count - done] = lines[:, done:count]
        carried = count - done
