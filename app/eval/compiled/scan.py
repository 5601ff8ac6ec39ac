"""Byte-level readers: ids' hashes and comparisons, decimals, integers and JSON tokens, each
answering where a token ends or whether it is taken (see the package)."""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from app.eval.compiled import inlined

_OFFSET = np.uint64(0xCBF29CE484222325)
_PRIME = np.uint64(0x100000001B3)
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_TWO53 = 1 << 53
_ADD_5F = np.uint64(0x5F5F5F5F5F5F5F5F)
_TOPS = np.uint64(0x8080808080808080)
#: The powers of ten a double holds exactly.
POW10 = np.array([10.0**i for i in range(23)])


@intrinsic
def _word_at(typingctx: Any, array: Any, index: Any) -> Any:  # pragma: no cover - compiled
    """The 8 bytes of a uint8 array at ``index`` as one little-endian 64-bit word, loaded
    unaligned (the caller keeps ``index + 8`` within the array)."""
    signature = types.uint64(array, types.intp)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        at = builder.gep(data, [args[1]])
        word = builder.bitcast(at, ir.IntType(64).as_pointer())
        return builder.load(word, align=1)

    return signature, codegen


@intrinsic
def put_word(typingctx: Any, array: Any, index: Any, word: Any) -> Any:  # pragma: no cover
    """Store the 64-bit ``word`` little-endian as the 8 bytes of a uint8 array at ``index``,
    unaligned (the caller keeps ``index + 8`` within the array)."""
    signature = types.void(array, types.intp, types.uint64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        at = builder.gep(data, [args[1]])
        builder.store(args[2], builder.bitcast(at, ir.IntType(64).as_pointer()), align=1)
        return context.get_dummy_value()

    return signature, codegen


@intrinsic
def prefetch(typingctx: Any, array: Any, index: Any) -> Any:  # pragma: no cover - compiled
    """Ask the processor to bring the cache line of ``array``'s element ``index`` in (to be
    read, kept in every cache level): a hint, which never faults (an index out of range
    fetches nothing of use)."""
    signature = types.void(array, types.intp)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        at = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        kind = ir.FunctionType(ir.VoidType(), [at.type, i32, i32, i32])
        function = builder.module.declare_intrinsic("llvm.prefetch", [at.type], kind)
        # read (0), the highest locality (3), the data cache (1)
        builder.call(function, [at, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return signature, codegen


@inlined
def word_at(array: np.ndarray, index: int) -> np.uint64:
    """``_word_at`` for the other compiled modules."""
    return _word_at(array, index)  # type: ignore[call-arg]


@inlined
def _mixed(h: np.uint64) -> np.uint64:
    """murmur3's finaliser: every bit of ``h`` moves every bit of the result."""
    h ^= h >> _S33
    h *= _M1
    h ^= h >> _S33
    h *= _M2
    h ^= h >> _S33
    return h


@inlined
def word_of(buf: np.ndarray, i: int, end: int) -> np.uint64:
    """The bytes ``buf[i:min(i + 8, end)]`` as one little-endian word, zeros past ``end``;
    bytes past the end of ``buf`` are never read."""
    if i + 8 <= end:
        return _word_at(buf, i)  # type: ignore[call-arg]
    if i + 8 <= len(buf):
        low = (np.uint64(1) << np.uint64(8 * (end - i))) - np.uint64(1)
        return _word_at(buf, i) & low  # type: ignore[call-arg]
    word = np.uint64(0)
    for j in range(end - 1, i - 1, -1):
        word = (word << np.uint64(8)) | np.uint64(buf[j])
    return word


@inlined
def id_hash(buf: np.ndarray, start: int, end: int) -> np.uint64:
    """64-bit hash of ``buf[start:end]``: its 8-byte words folded in turn (multiplied and
    mixed), its length in the seed."""
    h = _OFFSET ^ (np.uint64(end - start) * _PRIME)
    for i in range(start, end, 8):
        h = _mixed(h ^ word_of(buf, i, end))
    return h


@inlined
def same(a: np.ndarray, a0: int, a1: int, b: np.ndarray, b0: int, b1: int) -> bool:
    """True when the bytes ``a[a0:a1]`` and ``b[b0:b1]`` are the same (8 at a time)."""
    length = a1 - a0
    if length != b1 - b0:
        return False
    for k in range(0, length, 8):  # noqa: SIM110 (numba compiles no generator into all())
        if word_of(a, a0 + k, a1) != word_of(b, b0 + k, b1):
            return False
    return True


@inlined
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


@inlined
def plain_decimal(buf: np.ndarray, i: int, end: int) -> tuple[int, bool, float]:
    """(where it stops, taken, value) of the usual score at ``i``: ``-?digits(.digits)?``
    with at most 15 digits, the nearest double by one division of exact numbers (exact), -0.0
    as 0.0. It stops at the first byte that is neither a digit nor the first point; taken is
    False for any other text (``number`` reads it)."""
    negative = i < end and buf[i] == 45
    if negative:
        i += 1
    mantissa = 0
    digits = 0
    point = -1
    while i < end:
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
        return i, False, 0.0
    value = float(mantissa)
    if point >= 0:
        value /= POW10[digits - point]
    return i, True, (-value if negative else value) + 0.0


@intrinsic
def _low_zero_bits(typingctx: Any, word: Any) -> Any:  # pragma: no cover - compiled
    """How many of the low bits of a nonzero 64-bit word are zero (one instruction)."""
    signature = types.uint64(types.uint64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))

    return signature, codegen


@inlined
def field_end(buf: np.ndarray, i: int, n: int) -> int:
    """Where the field at ``i`` ends: the first byte at or after it that is not a printable
    (past a blank or a control; the caller checked there is no byte past ASCII).

    Eight bytes at a time: a byte under 0x80 plus 0x5F keeps its top bit clear exactly
    when it is 0x20 or less, and carries into no other byte (a log's fields are shorter
    than a word: one step where the byte loop took one a byte, and mispredicted its end)."""
    while i + 8 <= n:
        ends = ~(_word_at(buf, i) + _ADD_5F) & _TOPS  # type: ignore[call-arg]
        if ends:
            return i + int(_low_zero_bits(ends) >> np.uint64(3))
        i += 8
    while i < n and buf[i] > 32:
        i += 1
    return i


@inlined
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
    stop, taken, value = plain_decimal(buf, start, end)  # the usual score
    if taken and stop == end:
        return True, value
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
        value = value * POW10[scale] if scale >= 0 else value / POW10[-scale]
        return True, -value if buf[start] == 45 else value
    if not long_ok:
        return False, 0.0
    value = _strtod(buf.ctypes.data + start) + 0.0  # type: ignore[call-arg]
    if value - value != 0.0:  # infinite: not a score
        return False, 0.0
    return True, value


@inlined
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


@inlined
def printable_end(buf: np.ndarray, i: int, n: int) -> int:
    """The first byte at or after ``i`` that is not printable ASCII (or ``n``)."""
    while i < n:
        c = buf[i]
        if c < 33 or c > 126:
            return i
        i += 1
    return n


@inlined
def blanks(buf: np.ndarray, i: int, end: int) -> int:
    while i < end and (buf[i] == 32 or buf[i] == 9 or buf[i] == 13):
        i += 1
    return i


@inlined
def word(buf: np.ndarray, i: int, end: int, word: np.ndarray) -> int:
    """The position after ``word`` at ``i`` (blanks before it skipped), or -1."""
    i = blanks(buf, i, end)
    if end - i < len(word):
        return -1
    for j in range(len(word)):
        if buf[i + j] != word[j]:
            return -1
    return i + len(word)


@inlined
def key(buf: np.ndarray, i: int, end: int, key: np.ndarray) -> int:
    """The position after ``"key" :`` at ``i``, or -1."""
    i = word(buf, i, end, key)
    if i < 0:
        return -1
    i = blanks(buf, i, end)
    if i >= end or buf[i] != 58:  # ':'
        return -1
    return blanks(buf, i + 1, end)


@inlined
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


@inlined
def json_number_end(buf: np.ndarray, i: int, end: int) -> int:
    """Where the JSON number text at ``i`` ends (its characters: sign, digits, . e E +)."""
    while i < end:
        c = buf[i]
        if not (48 <= c <= 57 or c == 45 or c == 43 or c == 46 or c == 101 or c == 69):
            break
        i += 1
    return i
