"""The corpus's ids in an open-addressing hash table: a document is found by its bytes,
compared byte for byte, never by its hash alone."""

from __future__ import annotations

import numpy as np

from app.eval.compiled import compiled, inlined
from app.eval.compiled.scan import id_hash, prefetch, same, word_of

#: A document's record (``corpus_table``): eight 64-bit words, one cache line, all that a
#: line of a log needs of it: its id's length and first 32 bytes, its cluster's number (0:
#: none), its tokens (the bits of a double; NaN: unknown).
R_LENGTH = 0
R_CODE = 1
R_TOKENS = 2
R_INLINE = 3  # words 3 to 6
RECORD_WORDS = 8
INLINE_BYTES = 32


@compiled
def corpus_table(
    ids: np.ndarray, offsets: np.ndarray, codes: np.ndarray, tokens: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The corpus's ids (``ids[offsets[i]:offsets[i + 1]]``) in an open-addressing table:
    (slots, records). A slot (a power of two of them, at least twice the ids) holds the top
    32 bits of an id's hash and its row + 1 (0: empty); a row's record is ``R_*`` (a
    document's ``codes`` and ``tokens``). A repeated id keeps its first row."""
    n = len(offsets) - 1
    size = 16
    while size < 2 * n:
        size *= 2
    slots = np.zeros(size, np.uint64)
    records = np.zeros((max(n, 1), RECORD_WORDS), np.int64)
    as_floats = records.view(np.float64)
    mask = np.uint64(size - 1)
    for row in range(n):
        start = offsets[row]
        end = offsets[row + 1]
        records[row, R_LENGTH] = end - start
        records[row, R_CODE] = codes[row]
        as_floats[row, R_TOKENS] = tokens[row]
        for k in range(0, min(end - start, INLINE_BYTES), 8):
            records[row, R_INLINE + k // 8] = np.int64(word_of(ids, start + k, end))
        h = id_hash(ids, start, end)
        if lookup(ids, start, end, h, slots, records, ids, offsets) >= 0:
            continue  # named before
        slot = h & mask
        while slots[slot] != 0:
            slot = (slot + np.uint64(1)) & mask
        slots[slot] = (h & _TOP) | np.uint64(row + 1)
    return slots, records


_TOP = np.uint64(0xFFFFFFFF00000000)
_LOW = np.uint64(0xFFFFFFFF)


@inlined
def lookup(
    buf: np.ndarray,
    start: int,
    end: int,
    h: np.uint64,
    slots: np.ndarray,
    records: np.ndarray,
    ids: np.ndarray,
    offsets: np.ndarray,
) -> int:
    """The corpus row of the id ``buf[start:end]`` (hash ``h``), or -1: a slot's hash bits
    first, then the record's length and bytes (past the 32 kept, the corpus's own)."""
    mask = np.uint64(len(slots) - 1)
    top = h & _TOP
    length = end - start
    slot = h & mask
    while True:
        value = slots[slot]
        if value == 0:
            return -1
        if value & _TOP == top:
            row = np.int64(value & _LOW) - 1
            if records[row, R_LENGTH] == length:
                equal = True
                for k in range(0, min(length, INLINE_BYTES), 8):
                    if np.uint64(records[row, R_INLINE + k // 8]) != word_of(buf, start + k, end):
                        equal = False
                        break
                if equal and length > INLINE_BYTES:
                    equal = same(
                        ids,
                        offsets[row] + INLINE_BYTES,
                        offsets[row + 1],
                        buf,
                        start + INLINE_BYTES,
                        end,
                    )
                if equal:
                    return int(row)
        slot = (slot + np.uint64(1)) & mask


#: How many hashes ahead ``add_new`` asks for a slot.
ADD_AHEAD = 16


@compiled
def add_new(slots: np.ndarray, hashes: np.ndarray) -> int:
    """Add ``hashes`` (64-bit, 0 read as 1) to the open-addressing set ``slots`` (0: empty;
    a power of two long, kept at most three quarters full by the caller): the number added, or -1 as
    soon as one is there already (added before, or earlier in ``hashes``). The slot of the
    hash ``ADD_AHEAD`` on is asked for while this one is added: a log's set of queries is
    larger than a core's caches (5M random hashes into 16M slots: 0.056 s against 0.075,
    measured)."""
    mask = np.uint64(len(slots) - 1)
    n = len(hashes)
    for i in range(n):
        if i + ADD_AHEAD < n:
            prefetch(slots, np.intp(hashes[i + ADD_AHEAD] & mask))  # type: ignore[call-arg]
        h = hashes[i]
        if h == 0:
            h = np.uint64(1)
        slot = h & mask
        while slots[slot] != 0:
            if slots[slot] == h:
                return -1
            slot = (slot + np.uint64(1)) & mask
        slots[slot] = h
    return len(hashes)
