"""Repeated documents within a query: the lines that repeat an earlier (qid, doc_id)."""

from __future__ import annotations

import polars as pl

#: Multiplier that spreads query hashes before they are mixed with document hashes.
_MIX = 0x9E3779B97F4A7C15
_LOW_32 = 0xFFFFFFFF


def repeated_lines(frame: pl.DataFrame) -> pl.Series:
    """Positions (``pos``) of the lines that repeat an earlier (qid, doc_id): the first wins.

    A 32-bit hash of the pair finds candidates cheaply (sorting hashes costs far less than a
    hash table of string pairs, and 32 bits take half the memory of 64: a run's peak memory is
    here); only rows whose hash repeats are compared exactly, so a hash collision can never
    drop a line (at seven million lines about six thousand pairs collide, and are compared).
    """
    key = (
        ((pl.col("qid").hash() * _MIX) ^ pl.col("doc_id").hash()) & pl.lit(_LOW_32, pl.UInt64)
    ).cast(pl.UInt32)
    import numpy as np  # here: a command that ranks no run does not load it

    keys = frame.lazy().select(key.alias("key")).collect(engine="streaming").to_series()
    # numpy's sort of 32-bit keys is several times quicker than polars' (SIMD); on a copy of
    # the keys (kept below), one copy only: the one to_numpy makes of a chunked column is
    # writeable and sorted in place, a view of polars' memory is read-only and sorted into one
    ordered = keys.to_numpy()
    if ordered.flags.writeable:
        ordered.sort()
    else:
        ordered = np.sort(ordered)
    # neighbours compared through two views of the sorted keys: no shifted copy
    repeated = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    del ordered
    if not repeated.size:
        return pl.Series("pos", [], dtype=pl.UInt32)
    # the rows to compare exactly, found in the keys kept (not by hashing every line again)
    rows = keys.is_in(pl.Series(repeated).implode()).arg_true()
    del keys
    candidates = frame.select("qid", "doc_id", "pos")[rows].sort("pos")  # the first one is kept
    return candidates.filter(~pl.struct("qid", "doc_id").is_first_distinct()).get_column("pos")


def dropped_per_query(frame: pl.DataFrame, dropped: pl.Series) -> dict[str, int]:
    """The number of ``dropped`` lines (by ``pos``) of each query."""
    if not dropped.len():
        return {}  # nothing to look up seven million positions in
    return dict(
        frame.filter(pl.col("pos").is_in(dropped.implode())).group_by("qid").len().iter_rows()
    )
