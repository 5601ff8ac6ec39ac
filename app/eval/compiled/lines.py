"""The lines of a log: where a TREC line's or a JSONL hit's fields lie (see the package),
where the first query after a byte begins, and a block's lines taken apart into a thread's
scratch (``parse_lines``: ids' places, scores, ranks, and whether each line goes on the query
of the line before and comes after it in ranking order)."""

from __future__ import annotations

import numpy as np

from app.eval.compiled import compiled, inlined
from app.eval.compiled.scan import (
    POW10,
    blanks,
    field_end,
    greater,
    id_hash,
    integer,
    json_id,
    json_number_end,
    key,
    number,
    printable_end,
    same,
    word,
)

#: The formats of lines.
TREC = 0
JSONL = 1

#: What a block's pass ends with.
DONE = 0
#: A line this pass does not take: the caller reads the file another way.
REFUSED = 1

#: The orders.
TREC_EVAL = 0
RANK = 1
FILE = 2

#: What a line parser finds at a position.
LINE = 0
BLANK = 1
PARTIAL = 2  # the buffer ends inside the line (not the file's last block)
BAD = 3


@inlined
def _trec_line(
    buf: np.ndarray, pos: int, n: int, sep: int, final: bool
) -> tuple[int, int, int, int, int, int, int, int, int, int]:
    """(what, next line's start, qid start, qid end, doc start, doc end, rank start, rank
    end, score start, score end) of the TREC line at ``pos``: six non-empty fields of
    printable ASCII between single ``sep`` bytes, ending in LF, CRLF or the file's end."""
    e0 = printable_end(buf, pos, n)
    if e0 == pos:  # a blank line, or one that starts with a blank
        if e0 < n and buf[e0] == 10:
            return BLANK, e0 + 1, 0, 0, 0, 0, 0, 0, 0, 0
        if e0 + 1 < n and buf[e0] == 13 and buf[e0 + 1] == 10:
            return BLANK, e0 + 2, 0, 0, 0, 0, 0, 0, 0, 0
        if e0 + 1 >= n and not final:
            return PARTIAL, 0, 0, 0, 0, 0, 0, 0, 0, 0
        return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    if e0 == n or buf[e0] != sep:
        return PARTIAL if e0 == n and not final else BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    e1 = printable_end(buf, e0 + 1, n)
    if e1 == n or buf[e1] != sep or e1 == e0 + 1:
        return PARTIAL if e1 == n and not final else BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    e2 = printable_end(buf, e1 + 1, n)
    if e2 == n or buf[e2] != sep or e2 == e1 + 1:
        return PARTIAL if e2 == n and not final else BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    e3 = printable_end(buf, e2 + 1, n)
    if e3 == n or buf[e3] != sep or e3 == e2 + 1:
        return PARTIAL if e3 == n and not final else BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    e4 = printable_end(buf, e3 + 1, n)
    if e4 == n or buf[e4] != sep or e4 == e3 + 1:
        return PARTIAL if e4 == n and not final else BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    e5 = printable_end(buf, e4 + 1, n)
    if e5 == e4 + 1:
        return PARTIAL if e5 == n and not final else BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    if e5 == n:
        if not final:
            return PARTIAL, 0, 0, 0, 0, 0, 0, 0, 0, 0
        nxt = n
    elif buf[e5] == 10:
        nxt = e5 + 1
    elif buf[e5] == 13 and e5 + 1 < n and buf[e5 + 1] == 10:
        nxt = e5 + 2
    elif buf[e5] == 13 and e5 + 1 == n and not final:
        return PARTIAL, 0, 0, 0, 0, 0, 0, 0, 0, 0
    else:
        return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    return LINE, nxt, pos, e0, e1 + 1, e2, e2 + 1, e3, e3 + 1, e4


_QID_KEY = np.frombuffer(b'"qid"', np.uint8)
_DOC_KEY = np.frombuffer(b'"doc_id"', np.uint8)
_SCORE_KEY = np.frombuffer(b'"score"', np.uint8)
_RANK_KEY = np.frombuffer(b'"rank"', np.uint8)
_NULL = np.frombuffer(b"null", np.uint8)


@inlined
def _jsonl_line(
    buf: np.ndarray, pos: int, n: int, final: bool
) -> tuple[int, int, int, int, int, int, int, int, int, int]:
    """``_trec_line``'s answer for a JSONL hit of the usual shape: ``{"qid": .., "doc_id":
    .., "score": ..}`` and maybe ``"rank"`` (an integer or null: rank start -1), in that
    order, blanks between tokens."""
    end = -1
    nxt = -1
    i = pos
    while i < n:
        c = buf[i]
        if c == 10:
            end = i
            nxt = i + 1
            break
        if c > 126 or (c < 32 and c != 9 and c != 13):
            return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
        i += 1
    if end < 0:
        if not final:
            return PARTIAL, 0, 0, 0, 0, 0, 0, 0, 0, 0
        end = n
        nxt = n
    i = blanks(buf, pos, end)
    if i >= end or buf[i] != 123:  # '{'
        return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    i = key(buf, i + 1, end, _QID_KEY)
    if i < 0:
        return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    qs, qe, i = json_id(buf, i, end)
    if qs < 0:
        return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    i = blanks(buf, i, end)
    if i >= end or buf[i] != 44:  # ','
        return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    i = key(buf, i + 1, end, _DOC_KEY)
    if i < 0:
        return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    ds, de, i = json_id(buf, i, end)
    if ds < 0:
        return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    i = blanks(buf, i, end)
    if i >= end or buf[i] != 44:
        return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    i = key(buf, i + 1, end, _SCORE_KEY)
    if i < 0:
        return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    ss = i
    se = json_number_end(buf, i, end)
    if se == ss:
        return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    i = blanks(buf, se, end)
    rs = re = -1
    if i < end and buf[i] == 44:
        i = key(buf, i + 1, end, _RANK_KEY)
        if i < 0:
            return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
        after = word(buf, i, end, _NULL)
        if after >= 0:
            i = after
        else:
            rs, re, i = json_id(buf, i, end)
            if rs < 0 or buf[rs - 1] == 34:  # an integer, not a string
                return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
        i = blanks(buf, i, end)
    if i >= end or buf[i] != 125:  # '}'
        return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    if blanks(buf, i + 1, end) != end:
        return BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    return LINE, nxt, qs, qe, ds, de, rs, re, ss, se


@inlined
def line(
    buf: np.ndarray, pos: int, n: int, fmt: int, sep: int, final: bool
) -> tuple[int, int, int, int, int, int, int, int, int, int]:
    if fmt == TREC:
        return _trec_line(buf, pos, n, sep, final)
    return _jsonl_line(buf, pos, n, final)


@compiled
def query_cut(buf: np.ndarray, start: int, n: int, fmt: int, sep: int) -> int:
    """Where the first query that begins after byte ``start`` begins (a line start at which
    the qid changes), or -1 when none does before ``n`` or a line is not taken."""
    i = start
    while i < n and buf[i] != 10:
        i += 1
    i += 1
    qs = qe = -1
    while i < n:
        what, nxt, a, b, _, _, _, _, _, _ = line(buf, i, n, fmt, sep, False)
        if what in (PARTIAL, BAD):
            return -1
        if what == LINE:
            if qs < 0:
                qs, qe = a, b
            elif not same(buf, qs, qe, buf, a, b):
                return i
        i = nxt
    return -1


@compiled
def last_query_start(buf: np.ndarray, n: int, fmt: int, sep: int) -> int:
    """Where the lines of ``buf[:n]``'s last query begin: the first of the lines at the end
    that hold the query id of its last whole line (blank lines among them; the bytes after
    the last line end, a line the block cut, go with them), so that what comes before is
    whole queries. 0 when every line is that query's or none is whole; -1 when a line is
    not taken (the caller reads the file another way)."""
    end = n - 1
    while end >= 0 and buf[end] != 10:
        end -= 1
    qs = qe = -1
    cut = end + 1  # the start of the line after the one read
    while end >= 0:
        start = end - 1
        while start >= 0 and buf[start] != 10:
            start -= 1
        start += 1
        what, _, a, b, _, _, _, _, _, _ = line(buf, start, end + 1, fmt, sep, True)
        if what in (BAD, PARTIAL):
            return -1
        if what == LINE:
            if qs < 0:
                qs, qe = a, b
            elif not same(buf, qs, qe, buf, a, b):
                return cut
        cut = start
        end = start - 1
    return 0


#: Where a block's lines are taken apart (``LINE_FIELDS`` arrays of one capacity): the
#: line's start, its qid's start and end, its document's start and end (int64), the
#: document's hash (uint64 bits), its corpus row (-1: none), the score (double bits), the
#: rank, the flags, and what the tally needs of the document's record (its cluster's
#: number, its tokens as double bits: ``tally.look_up_lines`` copies them while the record
#: is in cache). Allocated once a thread and reused block after block.
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
L_CODE = 10
L_TOKENS = 11
LINE_FIELDS = 12
#: The line goes on the query of the line before.
F_SAME_QUERY = 1
#: ... and comes after it in ranking order (``tally._before``), or no order is asked for.
F_IN_ORDER = 2


@compiled
def ascii_only(buf: np.ndarray, n: int) -> bool:
    """True when no byte of ``buf[:n]`` is past printable ASCII (above 126): one pass the
    compiler makes wide (many bytes an instruction), so that the line readers look at each
    byte once, for its place alone."""
    top = np.uint8(0)  # a byte, not an int: LLVM then takes 32 bytes an instruction (6x)
    for i in range(n):
        top = max(top, buf[i])
    return bool(top <= 126)


@compiled
def parse_lines(
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
    begins). A TREC line as a log writes it is taken in one pass, written out below: six
    fields of printable ASCII, single ``sep`` between them, LF at the end, a score of digits
    and maybe a point (at most 15 digits: one division of exact numbers, exact), with
    ``order`` rank a rank of digits (the block holds no byte past ASCII: ``ascii_only``).
    Any other line is read by ``line`` and the number readers. Each line's flags say
    whether it goes on the query of the line before and comes after it in ranking order
    (decided here, while both lines are in cache).

    The usual line's reader is written out in the loop, not called: numba counts the
    references to the bytes handed to a function it writes in (an atomic operation, taken
    and given back), and the reader and its score's reader were two such calls a line (36
    ns a line against 28, measured)."""
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
        qs = pos
        nxt, qe, ds, de, score, rank = -1, 0, 0, 0, 0.0, 0
        while fmt == TREC:  # the usual TREC line, in one pass (``break``: another line)
            qid_end = field_end(buf, pos, n)
            if qid_end >= n or buf[qid_end] != sep or qid_end == pos:
                break
            i = field_end(buf, qid_end + 1, n)  # Q0
            if i >= n or buf[i] != sep or i == qid_end + 1:
                break
            doc_start = i + 1
            doc_end = field_end(buf, doc_start, n)
            if doc_end >= n or buf[doc_end] != sep or doc_end == doc_start:
                break
            i = field_end(buf, doc_end + 1, n)  # the rank
            if i >= n or buf[i] != sep or i == doc_end + 1:
                break
            r = 0
            if order == RANK:
                taken, r = integer(buf, doc_end + 1, i)
                if not taken:
                    break
            # the score: -?digits(.digits)?, at most 15 digits; -0.0 read as 0.0
            # (``scan.plain_decimal``, written out for the reason above)
            i += 1
            negative = i < n and buf[i] == 45
            if negative:
                i += 1
            mantissa = 0
            digits = 0
            point = -1
            while i < n:
                c = buf[i]
                if 48 <= c <= 57:
                    mantissa = mantissa * 10 + (c - 48)
                    digits += 1
                elif c == 46 and point < 0:
                    point = digits
                else:
                    break
                i += 1
            if digits == 0 or digits > 15 or point == digits or point == 0:
                break
            s = float(mantissa)
            if point >= 0:
                s /= POW10[digits - point]
            s = (-s if negative else s) + 0.0
            if i >= n or buf[i] != sep:
                break
            end = field_end(buf, i + 1, n)  # the tag
            if end == i + 1 or end >= n or buf[end] != 10:
                break
            nxt, qe, ds, de, score, rank = end + 1, qid_end, doc_start, doc_end, s, r
            break
        # Written before the test of the usual line's outcome, and again below when it was
        # not the usual line: tested first, LLVM kept every field's value alive through each
        # way out of the line's reader, and the pass took 2.4 times as long (108 ns a line
        # against 45, measured).
        begins[count] = pos
        qid_starts[count] = qs
        qid_ends[count] = qe
        doc_starts[count] = ds
        doc_ends[count] = de
        scores[count] = score
        ranks[count] = rank
        if nxt < 0:
            what, nxt, qs, qe, ds, de, rs, re, ss, se = line(buf, pos, n, fmt, sep, final)
            # Likewise the fields, and the score read (a line not taken has none: 0 to 0,
            # not taken), before the outcome is tested: JSONL hits 221 ns a line against 330.
            # The score is read in every order: the careful readers refuse one that is not
            # a finite number whatever orders the results.
            qid_starts[count] = qs
            qid_ends[count] = qe
            doc_starts[count] = ds
            doc_ends[count] = de
            taken, score = number(buf, ss, se, fmt == JSONL, long_ok)
            scores[count] = score
            if what == PARTIAL:
                break
            if what == BAD:
                return REFUSED, 0, 0
            if what == BLANK:
                pos = nxt
                continue
            if not taken:
                return REFUSED, 0, 0
            rank = 0
            if order == RANK:
                if rs < 0:
                    return REFUSED, 0, 0
                taken, rank = integer(buf, rs, re)
                if not taken:
                    return REFUSED, 0, 0
            ranks[count] = rank
        doc_hashes[count] = np.int64(id_hash(buf, ds, de))
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
