"""The lines of a log: where a TREC line's or a JSONL hit's fields lie (see the package); and
where the first query after a byte begins."""

from __future__ import annotations

import numpy as np

from app.eval.compiled import compiled, inlined
from app.eval.compiled.scan import (
    blanks,
    json_id,
    json_number_end,
    key,
    printable_end,
    same,
    word,
)

#: The formats of lines.
TREC = 0
JSONL = 1

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
