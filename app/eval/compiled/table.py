"""The corpus's ids in an open-addressing hash table: a document is found by its bytes,
compared byte for byte, never by its hash alone."""

from __future__ import annotations

import numpy as np

from app.eval.compiled import compiled
from app.eval.compiled.scan import id_hash, same


@compiled
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
            if hashes[slot] == h and same(ids, offsets[other], offsets[other + 1], ids, start, end):
                break
            slot = (slot + np.uint64(1)) & mask
    return hashes, rows


@compiled
def lookup(
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
        if hashes[slot] == h and same(ids, offsets[row], offsets[row + 1], buf, start, end):
            return int(row)
        slot = (slot + np.uint64(1)) & mask
