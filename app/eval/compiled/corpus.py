"""The lines of a corpus (BEIR's ``corpus.jsonl``) as the cluster measures read them: where
each document's id and cluster id lie, and how many characters its title and text hold (as
Python counts them once the JSON is decoded), in one compiled pass.

A line is taken only in the shape the careful reader (``app.eval.jsonl.read_corpus``) reads
the same way: one JSON object whose ``_id`` (and ``cluster_id``, ``parent_id``) is a string of
printable ASCII without escapes or an integer as Python writes it back, whose ``title`` and
``text`` are strings (escapes counted as the characters they stand for, UTF-8 checked, no NUL,
no lone surrogate), whose ``chunk_index`` is null or an integer in range, each named once; any
other member a string, a number, true, false or null. Anything else refuses the block.
"""

from __future__ import annotations

import numpy as np

from app.eval.compiled import compiled
from app.eval.compiled.scan import blanks, json_id
from app.eval.textio import MAX_LINE_BYTES

#: Where a document's fields lie (rows of the output, by line): its id's start and end, its
#: cluster id's (-1: none), its title's and text's characters.
C_ID_START = 0
C_ID_END = 1
C_CLUSTER_START = 2
C_CLUSTER_END = 3
C_TITLE_CHARS = 4
C_TEXT_CHARS = 5
CORPUS_FIELDS = 6

#: What a block's pass ends with.
DONE = 0
REFUSED = 1

_INT32_MAX = 2**31 - 1
#: The most digits of a number's integer part taken: Python's json reads an integer of more
#: digits than ``sys.get_int_max_str_digits()`` (4,300 unless set, never set below 640) as an
#: error, which the careful reader words.
_INT_DIGITS = 640
#: The members the careful reader looks at, by a number.
_OTHER = 0
_ID = 1
_TITLE = 2
_TEXT = 3
_CLUSTER = 4
_PARENT = 5
_CHUNK = 6
_NAMES = (b"_id", b"title", b"text", b"cluster_id", b"parent_id", b"chunk_index")


@compiled
def _member(buf: np.ndarray, start: int, end: int) -> int:
    """Which member the key ``buf[start:end]`` names (``_OTHER``: one not read)."""
    length = end - start
    for index in range(len(_NAMES)):
        name = _NAMES[index]
        if len(name) == length:
            same = True
            for i in range(length):
                if buf[start + i] != name[i]:
                    same = False
                    break
            if same:
                return index + 1
    return _OTHER


@compiled
def _hex(buf: np.ndarray, i: int, end: int) -> int:
    """The value of four hexadecimal digits at ``i``, or -1."""
    if i + 4 > end:
        return -1
    value = 0
    for j in range(i, i + 4):
        c = buf[j]
        if 48 <= c <= 57:
            d = c - 48
        elif 97 <= c <= 102:
            d = c - 87
        elif 65 <= c <= 70:
            d = c - 55
        else:
            return -1
        value = value * 16 + d
    return value


@compiled
def _string(buf: np.ndarray, i: int, end: int, strict: bool) -> tuple[int, int]:
    """(where the JSON string opening at ``i`` ends, its characters once decoded), or (-1, 0)
    for a string Python's json would not read, or (with ``strict``: a title or a text) one
    the careful reader refuses: a NUL, a lone surrogate."""
    if i >= end or buf[i] != 34:
        return -1, 0
    i += 1
    count = 0
    while i < end:
        c = buf[i]
        if c == 34:
            return i + 1, count
        if c == 92:  # an escape
            if i + 1 >= end:
                return -1, 0
            e = buf[i + 1]
            if e == 117:  # \uXXXX
                code = _hex(buf, i + 2, end)
                if code < 0:
                    return -1, 0
                i += 6
                if 0xD800 <= code <= 0xDBFF:  # a pair, one character
                    if i + 1 < end and buf[i] == 92 and buf[i + 1] == 117:
                        low = _hex(buf, i + 2, end)
                        if 0xDC00 <= low <= 0xDFFF:
                            i += 6
                            count += 1
                            continue
                    if strict:
                        return -1, 0
                elif (0xDC00 <= code <= 0xDFFF or code == 0) and strict:
                    return -1, 0
                count += 1
                continue
            if e in (34, 92, 47, 98, 102, 110, 114, 116):
                i += 2
                count += 1
                continue
            return -1, 0
        if c < 32:
            return -1, 0  # a control character: not JSON
        if c < 128:
            i += 1
            count += 1
            continue
        size = _utf8(buf, i, end)
        if size < 0:
            return -1, 0
        i += size
        count += 1
    return -1, 0


@compiled
def _utf8(buf: np.ndarray, i: int, end: int) -> int:
    """The length of the well-formed UTF-8 sequence of one character at ``i``, or -1."""
    c = buf[i]
    if 0xC2 <= c <= 0xDF:
        size, low, high = 2, 0x80, 0xBF
    elif c == 0xE0:
        size, low, high = 3, 0xA0, 0xBF
    elif c == 0xED:
        size, low, high = 3, 0x80, 0x9F  # no surrogate
    elif 0xE1 <= c <= 0xEF:
        size, low, high = 3, 0x80, 0xBF
    elif c == 0xF0:
        size, low, high = 4, 0x90, 0xBF
    elif 0xF1 <= c <= 0xF3:
        size, low, high = 4, 0x80, 0xBF
    elif c == 0xF4:
        size, low, high = 4, 0x80, 0x8F
    else:
        return -1
    if i + size > end or not (low <= buf[i + 1] <= high):
        return -1
    for j in range(i + 2, i + size):
        if not (0x80 <= buf[j] <= 0xBF):
            return -1
    return size


@compiled
def _scalar(buf: np.ndarray, i: int, end: int) -> int:
    """Where a member the careful reader does not read ends: a string, a number, true, false
    or null; -1 for anything else (an object or a list: the careful reader checks them)."""
    c = buf[i] if i < end else 0
    if c == 34:
        after, _ = _string(buf, i, end, False)
        return after
    for word in (b"true", b"false", b"null"):
        if i + len(word) <= end:
            same = True
            for j in range(len(word)):
                if buf[i + j] != word[j]:
                    same = False
                    break
            if same:
                return i + len(word)
    return _json_number(buf, i, end)


@compiled
def _json_number(buf: np.ndarray, i: int, end: int) -> int:
    """Where the JSON number at ``i`` ends, or -1 (for one of more than ``_INT_DIGITS``
    digits before its point too)."""
    if i < end and buf[i] == 45:
        i += 1
    if i >= end or not (48 <= buf[i] <= 57):
        return -1
    if buf[i] == 48:
        i += 1
    else:
        digits = i
        while i < end and 48 <= buf[i] <= 57:
            i += 1
        if i - digits > _INT_DIGITS:
            return -1
    if i < end and buf[i] == 46:
        i += 1
        if i >= end or not (48 <= buf[i] <= 57):
            return -1
        while i < end and 48 <= buf[i] <= 57:
            i += 1
    if i < end and buf[i] in (101, 69):
        i += 1
        if i < end and buf[i] in (43, 45):
            i += 1
        if i >= end or not (48 <= buf[i] <= 57):
            return -1
        while i < end and 48 <= buf[i] <= 57:
            i += 1
    return i


@compiled
def _chunk(buf: np.ndarray, i: int, end: int) -> int:
    """Where a chunk index (null, or an integer from 0 to 2^31 - 1) at ``i`` ends, or -1."""
    if i + 4 <= end and buf[i] == 110 and buf[i + 1] == 117 and buf[i + 2] == 108:
        return i + 4 if buf[i + 3] == 108 else -1
    start = i
    value = 0
    while i < end and 48 <= buf[i] <= 57:
        value = value * 10 + (buf[i] - 48)
        if value > _INT32_MAX:
            return -1
        i += 1
    if i == start or (buf[start] == 48 and i - start > 1):
        return -1
    return i


@compiled
def _document(buf: np.ndarray, pos: int, end: int, out: np.ndarray, row: int) -> bool:
    """Read the corpus line ``buf[pos:end]`` into ``out[:, row]``; False when not taken."""
    i = blanks(buf, pos, end)
    if i >= end or buf[i] != 123:  # '{'
        return False
    i = blanks(buf, i + 1, end)
    seen = 0  # a bit a member read
    out[C_CLUSTER_START, row] = -1
    out[C_CLUSTER_END, row] = -1
    out[C_TITLE_CHARS, row] = 0
    out[C_TEXT_CHARS, row] = 0
    if i < end and buf[i] == 125:
        return False  # no "_id"
    while True:
        if i >= end or buf[i] != 34:
            return False
        k = i + 1
        while k < end and buf[k] != 34:
            if buf[k] == 92 or buf[k] < 32 or buf[k] > 126:
                return False  # an escape or a byte beyond ASCII in a key
            k += 1
        if k >= end:
            return False
        member = _member(buf, i + 1, k)
        if member != _OTHER:
            if seen & (1 << member):
                return False  # named twice: Python keeps the last
            seen |= 1 << member
        i = blanks(buf, k + 1, end)
        if i >= end or buf[i] != 58:  # ':'
            return False
        i = blanks(buf, i + 1, end)
        if member in (_ID, _CLUSTER, _PARENT):
            if member != _ID and i + 4 <= end and buf[i] == 110:
                after = _scalar(buf, i, end)
                if after != i + 4:
                    return False  # not null
                i = after
            else:
                start, stop, after = json_id(buf, i, end)
                if start < 0:
                    return False
                if member == _ID:
                    out[C_ID_START, row] = start
                    out[C_ID_END, row] = stop
                elif member == _CLUSTER:
                    out[C_CLUSTER_START, row] = start
                    out[C_CLUSTER_END, row] = stop
                i = after
        elif member in (_TITLE, _TEXT):
            after, chars = _string(buf, i, end, True)
            if after < 0:
                return False
            out[C_TITLE_CHARS if member == _TITLE else C_TEXT_CHARS, row] = chars
            i = after
        elif member == _CHUNK:
            i = _chunk(buf, i, end)
        else:
            i = _scalar(buf, i, end)
        if i < 0:
            return False
        i = blanks(buf, i, end)
        if i < end and buf[i] == 44:  # ','
            i = blanks(buf, i + 1, end)
            continue
        if i < end and buf[i] == 125:  # '}'
            break
        return False
    if not seen & (1 << _ID):
        return False
    return blanks(buf, i + 1, end) == end


@compiled
def _blank_line(buf: np.ndarray, pos: int, end: int) -> bool:
    """A line of blanks only (Python's ``bytes.strip`` leaves nothing), which is skipped."""
    for i in range(pos, end):
        c = buf[i]
        if c != 32 and not (9 <= c <= 13):
            return False
    return True


@compiled
def corpus_block(
    buf: np.ndarray, n: int, final: bool, out: np.ndarray, max_line: int = MAX_LINE_BYTES
) -> tuple[int, int, int]:
    """Read the whole lines of ``buf[:n]`` (the last one too when ``final``) into ``out``
    (``CORPUS_FIELDS`` x capacity, a column a document): (DONE or REFUSED, the bytes
    consumed, the documents read). A line of ``max_line`` bytes or more (the careful
    reader's bound, ``textio.MAX_LINE_BYTES``), whole or not yet, is refused: the careful
    reader names it, and a gigabyte without a newline is not held past the bound."""
    count = 0
    pos = 0
    while pos < n:
        end = pos
        while end < n and buf[end] != 10:
            end += 1
        if end - pos >= max_line:
            return REFUSED, 0, 0
        if end == n and not final:
            break
        if not _blank_line(buf, pos, end):
            if count == out.shape[1] or not _document(buf, pos, end, out, count):
                return REFUSED, 0, 0
            count += 1
        pos = end + 1
    return DONE, min(pos, n), count
