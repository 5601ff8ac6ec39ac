"""Byte-level readers: ids' hashes and comparisons, decimals, integers and JSON tokens, each
answering where a token ends or whether it is taken (see the package)."""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from app.eval.compiled import compiled

_OFFSET = np.uint64(0xCBF29CE484222325)
_PRIME = np.uint64(0x100000001B3)
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_TWO53 = 1 << 53
_POW10 = np.array([10.0**i for i in range(23)])


@compiled
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


@compiled
def same(a: np.ndarray, a0: int, a1: int, b: np.ndarray, b0: int, b1: int) -> bool:
    if a1 - a0 != b1 - b0:
        return False
    for i in range(a1 - a0):  # noqa: SIM110 (numba compiles no generator into all())
        if a[a0 + i] != b[b0 + i]:
            return False
    return True


@compiled
def greater(buf: np.ndarray, a0: int, a1: int, b0: int, b1: int) -> bool:
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


@compiled
def number(buf: np.ndarray, start: int, end: int, json: bool, long_ok: bool) -> tuple[bool, float]:
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


@compiled
def integer(buf: np.ndarray, start: int, end: int) -> tuple[bool, int]:
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
@compiled
def printable_end(buf: np.ndarray, i: int, n: int) -> int:
    """The first byte at or after ``i`` that is not printable ASCII (or ``n``)."""
    while i < n:
        c = buf[i]
        if c < 33 or c > 126:
            return i
        i += 1
    return n


@compiled
def blanks(buf: np.ndarray, i: int, end: int) -> int:
    while i < end and (buf[i] == 32 or buf[i] == 9 or buf[i] == 13):
        i += 1
    return i


@compiled
def word(buf: np.ndarray, i: int, end: int, word: np.ndarray) -> int:
    """The position after ``word`` at ``i`` (blanks before it skipped), or -1."""
    i = blanks(buf, i, end)
    if end - i < len(word):
        return -1
    for j in range(len(word)):
        if buf[i + j] != word[j]:
            return -1
    return i + len(word)


@compiled
def key(buf: np.ndarray, i: int, end: int, key: np.ndarray) -> int:
    """The position after ``"key" :`` at ``i``, or -1."""
    i = word(buf, i, end, key)
    if i < 0:
        return -1
    i = blanks(buf, i, end)
    if i >= end or buf[i] != 58:  # ':'
        return -1
    return blanks(buf, i + 1, end)


@compiled
def json_id(buf: np.ndarray, i: int, end: int) -> tuple[int, int, int]:
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


@compiled
def json_number_end(buf: np.ndarray, i: int, end: int) -> int:
    """Where the JSON number text at ``i`` ends (its characters: sign, digits, . e E +)."""
    while i < end:
        c = buf[i]
        if not (48 <= c <= 57 or c == 45 or c == 43 or c == 46 or c == 101 or c == 69):
            break
        i += 1
    return i
