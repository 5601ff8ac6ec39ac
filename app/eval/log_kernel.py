"""The cluster tally of a log's lines in one compiled pass (numba), from the bytes of the file.

``app.eval.cluster_stream`` reads a log of any length block by block; ranking, joining and
tallying a block with polars operations costs some ten passes over its lines and a hash join of
strings. This module does it in one pass over the bytes: each line is taken apart where it
lies (a TREC line, or a JSONL hit of the usual shape), its document looked up in a hash table
of the corpus's ids (compared byte for byte, never by hash alone), each query's repeated
documents dropped (first occurrence in the file wins), its lines put in ranking order (without
a sort when they are written in it, as a log is), and its first max(k) results added to the
tally: per k the histogram of distinct clusters, per rank the clustered and known results and
their tokens. Nothing is allocated a line.

It takes a line only when it is sure to read it as the careful readers do, and refuses the
block otherwise (``REFUSED``): a byte outside printable ASCII, an empty field, a score other
than a plain decimal that converts exactly by one IEEE operation (Clinger's fast path: at
most 2^53 as an integer and a power of ten up to 22), a JSON escape, another key order. The
caller then reads the file the careful way, which gives the same figures and words any error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

#: What a block's pass ends with.
DONE = 0
#: A line this pass does not take (see the module): the caller reads the file another way.
REFUSED = 1

#: The formats of lines (``fmt``) and the orders (``order``), as numbers.
TREC = 0
JSONL = 1
#: "qid<TAB>doc_id" a line, the scores and ranks given apart (a columnar file's results,
#: written out by polars: any bytes but tab and newline in an id)
PAIRS = 2
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

_OFFSET = np.uint64(0xCBF29CE484222325)
_PRIME = np.uint64(0x100000001B3)
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_TWO53 = 1 << 53
_POW10 = np.array([10.0**i for i in range(23)])

_F = TypeVar("_F", bound=Callable[..., Any])


def _compiled(function: _F) -> _F:
    """``function`` compiled by numba on its first call, kept on disk (``cache``), run
    without the GIL; array indexes not checked (every index is in range by construction)."""
    jitted = njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")(function)
    return cast(_F, jitted)


@_compiled
def id_hash(buf: np.ndarray, start: int, end: int) -> np.uint64:  # pragma: no cover - jitted
    """64-bit hash of ``buf[start:end]`` (FNV-1a, then murmur3's finaliser)."""
    h = _OFFSET
    for i in range(start, end):
        h = (h ^ np.uint64(buf[i])) * _PRIME
    h ^= h >> _S33
    h *= _M1
    h ^= h >> _S33
    h *= _M2
    h ^= h >> _S33
    return h


@_compiled
def corpus_table(ids: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An open-addressing table of the corpus's ids (``ids[offsets[i]:offsets[i + 1]]``):
    (the hash, the row or -1) a slot, a power of two at least twice the ids. A repeated id
    keeps its first row."""
    n = len(offsets) - 1
    size = 16
    while size < 2 * n:
        size *= 2
    hashes = np.zeros(size, np.uint64)
    rows = np.full(size, -1, np.int64)
    mask = np.uint64(size - 1)
    for row in range(n):
        start = offsets[row]
        end = offsets[row + 1]
        h = id_hash(ids, start, end)
        slot = h & mask
        while True:
            other = rows[slot]
            if other < 0:
                hashes[slot] = h
                rows[slot] = row
                break
            if hashes[slot] == h and _same(
                ids, offsets[other], offsets[other + 1], ids, start, end
            ):
                break
            slot = (slot + np.uint64(1)) & mask
    return hashes, rows


@_compiled
def _same(a: np.ndarray, a0: int, a1: int, b: np.ndarray, b0: int, b1: int) -> bool:
    if a1 - a0 != b1 - b0:
        return False
    for i in range(a1 - a0):  # noqa: SIM110 (numba compiles no generator into all())
        if a[a0 + i] != b[b0 + i]:
            return False
    return True


@_compiled
def _greater(buf: np.ndarray, a0: int, a1: int, b0: int, b1: int) -> bool:
    """True when bytes ``buf[a0:a1]`` sort after ``buf[b0:b1]`` (byte order)."""
    la = a1 - a0
    lb = b1 - b0
    m = la if la < lb else lb
    for i in range(m):
        x = buf[a0 + i]
        y = buf[b0 + i]
        if x != y:
            return bool(x > y)
    return la > lb


@_compiled
def _lookup(
    buf: np.ndarray,
    start: int,
    end: int,
    h: np.uint64,
    ids: np.ndarray,
    offsets: np.ndarray,
    hashes: np.ndarray,
    rows: np.ndarray,
) -> int:
    """The corpus row of the id ``buf[start:end]`` (hash ``h``), or -1."""
    mask = np.uint64(len(rows) - 1)
    slot = h & mask
    while True:
        row = rows[slot]
        if row < 0:
            return -1
        if hashes[slot] == h and _same(ids, offsets[row], offsets[row + 1], buf, start, end):
            return int(row)
        slot = (slot + np.uint64(1)) & mask


@intrinsic
def _strtod(typingctx: Any, address: Any) -> Any:  # pragma: no cover - compiled
    """C's strtod of the text at ``address`` (correctly rounded; the C locale's decimal
    point, which Python leaves alone): declared by name, so that the compiled code caches."""
    signature = types.float64(types.intp)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        char_p = ir.IntType(8).as_pointer()
        function_type = ir.FunctionType(ir.DoubleType(), [char_p, char_p.as_pointer()])
        strtod = cgutils.get_or_insert_function(  # type: ignore[no-untyped-call]
            builder.module, function_type, "strtod"
        )
        end = ir.Constant(char_p.as_pointer(), None)
        return builder.call(strtod, [builder.inttoptr(args[0], char_p), end])

    return signature, codegen


@_compiled
def _number(buf: np.ndarray, start: int, end: int, json: bool, long_ok: bool) -> tuple[bool, float]:
    """(taken, value) of a decimal ``-?digits(.digits)?([eE][+-]?digits)?`` (JSON: no
    leading zero before another digit), as the double nearest to it; -0.0 comes back as 0.0.
    At most 2^53 as an integer times a power of ten up to 22 converts by one IEEE operation
    (exact: Clinger's fast path); a longer one by C's strtod when ``long_ok``. The text must
    be followed by a byte that cannot go on a number (as a field's separator)."""
    i = start
    if i < end and buf[i] == 45:  # '-'
        i += 1
    if i >= end or not (48 <= buf[i] <= 57):
        return False, 0.0
    if json and buf[i] == 48 and i + 1 < end and 48 <= buf[i + 1] <= 57:
        return False, 0.0
    mantissa = 0
    digits = 0  # significant digits (leading zeros not counted)
    scale = 0
    while i < end and 48 <= buf[i] <= 57:
        d = buf[i] - 48
        if digits or d:
            digits += 1
            if digits <= 18:
                mantissa = mantissa * 10 + d
            else:
                scale += 1
        i += 1
    if i < end and buf[i] == 46:  # '.'
        i += 1
        if i >= end or not (48 <= buf[i] <= 57):
            return False, 0.0
        while i < end and 48 <= buf[i] <= 57:
            d = buf[i] - 48
            if digits or d:
                digits += 1
                if digits <= 18:
                    mantissa = mantissa * 10 + d
                    scale -= 1
            else:
                scale -= 1
            i += 1
    if i < end and (buf[i] == 101 or buf[i] == 69):  # 'e' 'E'
        i += 1
        sign = 1
        if i < end and (buf[i] == 43 or buf[i] == 45):
            if buf[i] == 45:
                sign = -1
            i += 1
        if i >= end or not (48 <= buf[i] <= 57):
            return False, 0.0
        exponent = 0
        while i < end and 48 <= buf[i] <= 57:
            if exponent < 100_000:
                exponent = exponent * 10 + (buf[i] - 48)
            i += 1
        scale += sign * exponent
    if i != end:
        return False, 0.0
    if mantissa == 0:
        return True, 0.0
    if digits <= 18 and mantissa <= _TWO53 and -22 <= scale <= 22:
        value = float(mantissa)
        value = value * _POW10[scale] if scale >= 0 else value / _POW10[-scale]
        return True, -value if buf[start] == 45 else value
    if not long_ok:
        return False, 0.0
    value = _strtod(buf.ctypes.data + start) + 0.0  # type: ignore[call-arg]
    if value - value != 0.0:  # infinite: not a score
        return False, 0.0
    return True, value


@_compiled
def _integer(buf: np.ndarray, start: int, end: int) -> tuple[bool, int]:
    """(taken, value) of ``-?digits`` with at most 18 digits."""
    i = start
    negative = False
    if i < end and buf[i] == 45:
        negative = True
        i += 1
    if i >= end or end - i > 18:
        return False, 0
    value = 0
    while i < end:
        d = buf[i] - 48
        if d < 0 or d > 9:
            return False, 0
        value = value * 10 + d
        i += 1
    return True, -value if negative else value


#: what a line parser finds at ``pos``
_LINE = 0
_BLANK = 1
_PARTIAL = 2  # the buffer ends inside the line (not the file's last block)
_BAD = 3


@_compiled
def _printable_end(buf: np.ndarray, i: int, n: int) -> int:
    """The first byte at or after ``i`` that is not printable ASCII (or ``n``)."""
    while i < n:
        c = buf[i]
        if c < 33 or c > 126:
            return i
        i += 1
    return n


@_compiled
def _trec_line(
    buf: np.ndarray, pos: int, n: int, sep: int, final: bool
) -> tuple[int, int, int, int, int, int, int, int, int, int]:
    """(what, next line's start, qid start, qid end, doc start, doc end, rank start, rank
    end, score start, score end) of the TREC line at ``pos``: six non-empty fields of
    printable ASCII between single ``sep`` bytes, ending in LF, CRLF or the file's end."""
    e0 = _printable_end(buf, pos, n)
    if e0 == pos:  # a blank line, or one that starts with a blank
        if e0 < n and buf[e0] == 10:
            return _BLANK, e0 + 1, 0, 0, 0, 0, 0, 0, 0, 0
        if e0 + 1 < n and buf[e0] == 13 and buf[e0 + 1] == 10:
            return _BLANK, e0 + 2, 0, 0, 0, 0, 0, 0, 0, 0
        if e0 + 1 >= n and not final:
            return _PARTIAL, 0, 0, 0, 0, 0, 0, 0, 0, 0
        if e0 == n:
            return _BLANK, n, 0, 0, 0, 0, 0, 0, 0, 0
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    if e0 == n or buf[e0] != sep:
        return _PARTIAL if e0 == n and not final else _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    e1 = _printable_end(buf, e0 + 1, n)
    if e1 == n or buf[e1] != sep or e1 == e0 + 1:
        return _PARTIAL if e1 == n and not final else _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    e2 = _printable_end(buf, e1 + 1, n)
    if e2 == n or buf[e2] != sep or e2 == e1 + 1:
        return _PARTIAL if e2 == n and not final else _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    e3 = _printable_end(buf, e2 + 1, n)
    if e3 == n or buf[e3] != sep or e3 == e2 + 1:
        return _PARTIAL if e3 == n and not final else _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    e4 = _printable_end(buf, e3 + 1, n)
    if e4 == n or buf[e4] != sep or e4 == e3 + 1:
        return _PARTIAL if e4 == n and not final else _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    e5 = _printable_end(buf, e4 + 1, n)
    if e5 == e4 + 1:
        return _PARTIAL if e5 == n and not final else _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    if e5 == n:
        if not final:
            return _PARTIAL, 0, 0, 0, 0, 0, 0, 0, 0, 0
        nxt = n
    elif buf[e5] == 10:
        nxt = e5 + 1
    elif buf[e5] == 13 and e5 + 1 < n and buf[e5 + 1] == 10:
        nxt = e5 + 2
    elif buf[e5] == 13 and e5 + 1 == n and not final:
        return _PARTIAL, 0, 0, 0, 0, 0, 0, 0, 0, 0
    else:
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    return _LINE, nxt, pos, e0, e1 + 1, e2, e2 + 1, e3, e3 + 1, e4


_QID_KEY = np.frombuffer(b'"qid"', np.uint8)
_DOC_KEY = np.frombuffer(b'"doc_id"', np.uint8)
_SCORE_KEY = np.frombuffer(b'"score"', np.uint8)
_RANK_KEY = np.frombuffer(b'"rank"', np.uint8)
_NULL = np.frombuffer(b"null", np.uint8)


@_compiled
def _blanks(buf: np.ndarray, i: int, end: int) -> int:
    while i < end and (buf[i] == 32 or buf[i] == 9 or buf[i] == 13):
        i += 1
    return i


@_compiled
def _word(buf: np.ndarray, i: int, end: int, word: np.ndarray) -> int:
    """The position after ``word`` at ``i`` (blanks before it skipped), or -1."""
    i = _blanks(buf, i, end)
    if end - i < len(word):
        return -1
    for j in range(len(word)):
        if buf[i + j] != word[j]:
            return -1
    return i + len(word)


@_compiled
def _key(buf: np.ndarray, i: int, end: int, key: np.ndarray) -> int:
    """The position after ``"key" :`` at ``i``, or -1."""
    i = _word(buf, i, end, key)
    if i < 0:
        return -1
    i = _blanks(buf, i, end)
    if i >= end or buf[i] != 58:  # ':'
        return -1
    return _blanks(buf, i + 1, end)


@_compiled
def _json_id(buf: np.ndarray, i: int, end: int) -> tuple[int, int, int]:
    """(start, end, next) of an id at ``i``: a string of printable ASCII without blanks,
    quotes or backslashes, or an integer as Python writes it back; start -1 when neither."""
    if i < end and buf[i] == 34:  # '"'
        j = i + 1
        while j < end and buf[j] != 34:
            c = buf[j]
            if c < 33 or c > 126 or c == 92:
                return -1, 0, 0
            j += 1
        if j >= end or j == i + 1:
            return -1, 0, 0
        return i + 1, j, j + 1
    j = i
    if j < end and buf[j] == 45:
        j += 1
    digits = j
    while j < end and 48 <= buf[j] <= 57:
        j += 1
    if j == digits or j - digits > 18:
        return -1, 0, 0
    if buf[digits] == 48 and (j - digits > 1 or digits > i):  # "0" alone, never "-0" or "01"
        return -1, 0, 0
    return i, j, j


@_compiled
def _json_number_end(buf: np.ndarray, i: int, end: int) -> int:
    """Where the JSON number text at ``i`` ends (its characters: sign, digits, . e E +)."""
    while i < end:
        c = buf[i]
        if not (48 <= c <= 57 or c == 45 or c == 43 or c == 46 or c == 101 or c == 69):
            break
        i += 1
    return i


@_compiled
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
            return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
        i += 1
    if end < 0:
        if not final:
            return _PARTIAL, 0, 0, 0, 0, 0, 0, 0, 0, 0
        end = n
        nxt = n
    i = _blanks(buf, pos, end)
    if i >= end or buf[i] != 123:  # '{'
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    i = _key(buf, i + 1, end, _QID_KEY)
    if i < 0:
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    qs, qe, i = _json_id(buf, i, end)
    if qs < 0:
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    i = _blanks(buf, i, end)
    if i >= end or buf[i] != 44:  # ','
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    i = _key(buf, i + 1, end, _DOC_KEY)
    if i < 0:
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    ds, de, i = _json_id(buf, i, end)
    if ds < 0:
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    i = _blanks(buf, i, end)
    if i >= end or buf[i] != 44:
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    i = _key(buf, i + 1, end, _SCORE_KEY)
    if i < 0:
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    ss = i
    se = _json_number_end(buf, i, end)
    if se == ss:
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    i = _blanks(buf, se, end)
    rs = re = -1
    if i < end and buf[i] == 44:
        i = _key(buf, i + 1, end, _RANK_KEY)
        if i < 0:
            return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
        after = _word(buf, i, end, _NULL)
        if after >= 0:
            i = after
        else:
            rs, re, i = _json_id(buf, i, end)
            if rs < 0 or buf[rs - 1] == 34:  # an integer, not a string
                return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
        i = _blanks(buf, i, end)
    if i >= end or buf[i] != 125:  # '}'
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    if _blanks(buf, i + 1, end) != end:
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    return _LINE, nxt, qs, qe, ds, de, rs, re, ss, se


@_compiled
def _pairs_line(
    buf: np.ndarray, pos: int, n: int
) -> tuple[int, int, int, int, int, int, int, int, int, int]:
    """``_trec_line``'s answer for a line of two non-empty fields, a tab between them."""
    i = pos
    while i < n and buf[i] != 9 and buf[i] != 10:
        i += 1
    if i == pos or i >= n or buf[i] != 9:
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    j = i + 1
    while j < n and buf[j] != 9 and buf[j] != 10:
        j += 1
    if j == i + 1 or (j < n and buf[j] == 9):
        return _BAD, 0, 0, 0, 0, 0, 0, 0, 0, 0
    return _LINE, j + 1, pos, i, i + 1, j, -1, -1, -1, -1


@_compiled
def _line(
    buf: np.ndarray, pos: int, n: int, fmt: int, sep: int, final: bool
) -> tuple[int, int, int, int, int, int, int, int, int, int]:
    if fmt == TREC:
        return _trec_line(buf, pos, n, sep, final)
    if fmt == JSONL:
        return _jsonl_line(buf, pos, n, final)
    return _pairs_line(buf, pos, n)


@_compiled
def query_cut(buf: np.ndarray, start: int, n: int, fmt: int, sep: int) -> int:
    """Where the first query that begins after byte ``start`` begins (a line start at which
    the qid changes), or -1 when none does before ``n`` or a line is not taken."""
    i = start
    while i < n and buf[i] != 10:
        i += 1
    i += 1
    qs = qe = -1
    while i < n:
        what, nxt, a, b, _, _, _, _, _, _ = _line(buf, i, n, fmt, sep, False)
        if what in (_PARTIAL, _BAD):
            return -1
        if what == _LINE:
            if qs < 0:
                qs, qe = a, b
            elif not _same(buf, qs, qe, buf, a, b):
                return i
        i = nxt
    return -1


@_compiled
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
        return _greater(buf, starts[i], ends[i], starts[j], ends[j])
    if ranks[i] != ranks[j]:
        return bool(ranks[i] < ranks[j])
    return i < j


@_compiled
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


@_compiled
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
        what, nxt, qs, qe, ds, de, rs, re, ss, se = _line(buf, pos, n, fmt, sep, final)
        if what == _PARTIAL:
            break
        if what == _BAD:
            return REFUSED, 0, 0
        if what == _BLANK:
            pos = nxt
            continue
        score = 0.0
        rank = 0
        if fmt == PAIRS:
            score = given_scores[count] + 0.0  # -0.0 ties with 0.0
            rank = given_ranks[count]
        elif order == TREC_EVAL:
            taken, score = _number(buf, ss, se, fmt == JSONL, long_ok)
            if not taken:
                return REFUSED, 0, 0
        elif order == RANK:
            if rs < 0:
                return REFUSED, 0, 0
            taken, rank = _integer(buf, rs, re)
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


@_compiled
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
        lines[L_ROW, i] = _lookup(
            buf,
            lines[L_DOC_START, i],
            lines[L_DOC_END, i],
            doc_hashes[i],
            ids,
            offsets,
            hashes,
            rows,
        )


@_compiled
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


@_compiled
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
        while last < count and _same(
            buf, qs, qe, buf, lines[L_QID_START, last], lines[L_QID_END, last]
        ):
            if in_order:
                p = last - 1
                if order == TREC_EVAL:
                    in_order = scores[last] < scores[p] or (
                        scores[last] == scores[p]
                        and _greater(buf, starts[p], ends[p], starts[last], ends[last])
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


@_compiled
def _grown(values: np.ndarray, size: int) -> np.ndarray:
    out = np.empty(size, values.dtype)
    out[: len(values)] = values
    return out


@_compiled
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
                if seen_hashes[at] == h and _same(buf, starts[j], ends[j], buf, starts[i], ends[i]):
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
